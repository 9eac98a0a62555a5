#!/usr/bin/env bash
# A real Slurm cluster (Debian's slurm-wlm: munge, slurmctld, slurmd) for bringup's `manager = "slurm"` tests, on
# three test hosts of .ci/testhost.sh in the host network: the controller and login host `ctl` (bringup-slurm, sshd
# 127.0.0.1:2226) and the compute nodes n1 and n2 (ssh 2227, 2228), with 4 GPUs each as GRES and the simulated
# server and its nvidia-smi installed. The host directory .slurm-shared/ is the cluster's shared filesystem, bound at
# /shared on all three. Run as root. See tests/testhost/README.md (A Slurm cluster) for the interface.
#
#   .ci/slurm.sh up | down | status | env | exec-ctl CMD... | exec-node n1|n2 CMD... | stop-slurmd n1|n2
#                | start-slurmd n1|n2
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TESTHOST=$REPO/.ci/testhost.sh
TEMPLATES=$REPO/tests/testhost/slurm
SUITE=${TESTHOST_SUITE:-bookworm}
# the rootfs with the Slurm packages in it, built once from the test host's own rootfs (≈ 25 s), then unpacked (≈ 4 s)
SLURM_CACHE=${SLURM_TESTHOST_CACHE:-$HOME/.cache/bringup-testhost/rootfs-$SUITE-slurm.tar.zst}
PACKAGES=(slurmctld slurmd slurm-client munge)
SHARED=$REPO/.slurm-shared
SHARED_MOUNT=/shared
CTLD_PORT=${SLURM_CTLD_PORT:-6817}
NODES=(n1 n2)
declare -A DIR=([ctl]=$REPO/.testhost-slurm [n1]=$REPO/.testhost-slurm-n1 [n2]=$REPO/.testhost-slurm-n2)
declare -A NAME=([ctl]=bringup-slurm [n1]=bringup-slurm-n1 [n2]=bringup-slurm-n2)
declare -A SSH_PORT=([ctl]=2226 [n1]=2227 [n2]=2228)
declare -A SIM_PORT=([ctl]=30006 [n1]=30007 [n2]=30008)
declare -A SLURMD_PORT=([n1]=${SLURM_N1_PORT:-6818} [n2]=${SLURM_N2_PORT:-6819})
UP_TIMEOUT=${SLURM_UP_TIMEOUT:-90}   # seconds `up` waits for both nodes to be idle
# a second user for "cancelled by another user" and "a second operator": the same uid on the three hosts (one rootfs)
SECOND_USER=tester2

log() { printf '[slurm] %s\n' "$*" >&2; }
die() { printf '[slurm] error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

[[ $(id -u) == 0 ]] || die "must run as root"

# .ci/testhost.sh on host H (ctl, n1, n2): its own state directory, name and ports, whatever TESTHOST_* the caller
# has set for another host (a test module on the fourth host sets TESTHOST_DIR)
th() {
    local h=$1; shift
    env -u TESTHOST_NAME -u TESTHOST_SSH_PORT -u TESTHOST_SIM_PORT -u TESTHOST_NSPAWN_ARGS -u TESTHOST_CACHE \
        TESTHOST_DIR="${DIR[$h]}" "$@" 8>&-   # the lock's fd: not inherited by the containers it boots
}
th_full() {  # the same with the host's name and ports (build, up): the record supplies them to the other commands
    local h=$1; shift
    th "$h" TESTHOST_NAME="${NAME[$h]}" TESTHOST_SSH_PORT="${SSH_PORT[$h]}" TESTHOST_SIM_PORT="${SIM_PORT[$h]}" "$@"
}
texec() { local h=$1; shift; th "$h" bash "$TESTHOST" exec "$@"; }
is_up() { th "$1" bash "$TESTHOST" status >/dev/null 2>&1; }

valid_node() { [[ ${1:-} == n1 || ${1:-} == n2 ]] || die "no compute node ${1:-(none)}: n1 or n2"; }

# ---------------------------------------------------------------------------------------------------------- build

# (the binaries are links to /etc/alternatives, absolute, so resolved on this side they point nowhere)
has_slurm() { [[ -L ${DIR[$1]}/rootfs/usr/sbin/slurmd && -L ${DIR[$1]}/rootfs/usr/sbin/slurmctld ]]; }

# The Slurm rootfs, made once: the test host's own rootfs (its cache, or a debootstrap) booted as ctl, the packages
# installed with apt in it, then packed to SLURM_CACHE. The daemons are disabled in it: `up` enables each host's own.
make_slurm_cache() {
    local t0 r=${DIR[ctl]}/rootfs
    t0=$(now)
    log "no $SLURM_CACHE: installing ${PACKAGES[*]} into ctl's rootfs (apt, in the container)"
    th_full ctl bash "$TESTHOST" build
    th_full ctl bash "$TESTHOST" up
    texec ctl sh -c 'export DEBIAN_FRONTEND=noninteractive && apt-get update -qq &&
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null &&
        apt-get clean && rm -rf /var/lib/apt/lists/*' sh "${PACKAGES[@]}" \
        || { th ctl bash "$TESTHOST" down || true; die "apt-get install ${PACKAGES[*]} failed in ctl"; }
    texec ctl sh -c "systemctl disable --now slurmctld slurmd munge >/dev/null 2>&1;
        id -u $SECOND_USER >/dev/null 2>&1 || useradd -m -s /bin/bash -U $SECOND_USER"
    th ctl bash "$TESTHOST" down
    has_slurm ctl || die "the packages are not in $r after the install"
    th ctl bash "$TESTHOST" pack "$SLURM_CACHE"
    log "Slurm rootfs cached in $(since "$t0") s: $SLURM_CACHE"
}

build_host() {
    local h=$1
    if [[ -d ${DIR[$h]}/rootfs ]] && ! has_slurm "$h"; then
        log "$h: the rootfs has no Slurm: rebuilding it from $SLURM_CACHE"
        th "$h" bash "$TESTHOST" clean
    fi
    th_full "$h" TESTHOST_CACHE="$SLURM_CACHE" bash "$TESTHOST" build 2>&1 | sed "s/^/[$h] /" >&2
    has_slurm "$h" || die "$h: no Slurm in ${DIR[$h]}/rootfs (remove it and $SLURM_CACHE, then up again)"
}

# ------------------------------------------------------------------------------------------------------ configure

# owner uid:gid of PATH inside a rootfs, numeric (the rootfs's users, not this machine's)
owner() { stat -c %u:%g "$1"; }

# Idempotent, on the stopped rootfs from this side: slurm.conf and gres.conf, the one munge key, this host's daemons
# enabled and the others disabled, the second user's key, the GPU devices of a node, and no state from an earlier run
# (no old jobs, no node remembered DOWN)
configure_host() {
    local h=$1 r=${DIR[$1]}/rootfs i ctl_key=${DIR[ctl]}/rootfs/etc/munge/munge.key pub home
    install -d -m 755 "$r/etc/slurm"
    sed -e "s/@CTLD_PORT@/$CTLD_PORT/" -e "s/@N1_PORT@/${SLURMD_PORT[n1]}/" -e "s/@N2_PORT@/${SLURMD_PORT[n2]}/" \
        "$TEMPLATES/slurm.conf" > "$r/etc/slurm/slurm.conf"
    install -m 644 "$TEMPLATES/gres.conf" "$r/etc/slurm/gres.conf"
    install -m 644 "$TEMPLATES/cgroup.conf" "$r/etc/slurm/cgroup.conf"
    chmod 644 "$r/etc/slurm/slurm.conf"
    [[ -s $ctl_key ]] || die "no munge key in ctl's rootfs ($ctl_key)"
    if [[ $h != ctl ]]; then
        install -m 400 "$ctl_key" "$r/etc/munge/munge.key"
        chown "$(owner "$r/etc/munge")" "$r/etc/munge/munge.key"
    fi
    for d in var/log/slurm var/lib/slurm/slurmctld var/lib/slurm/slurmd; do
        install -d -m 755 "$r/$d"
        chown "$(owner "$r/var/lib/slurm")" "$r/$d"
    done
    rm -rf "${r:?}"/var/lib/slurm/slurmctld/* "${r:?}"/var/lib/slurm/slurmd/*
    : > "$r/var/log/slurm/slurmctld.log"; : > "$r/var/log/slurm/slurmd.log"
    chown "$(owner "$r/var/lib/slurm")" "$r/var/log/slurm/"*.log
    if [[ $h == ctl ]]; then
        systemctl --root="$r" --quiet enable munge.service slurmctld.service
        systemctl --root="$r" --quiet disable slurmd.service
    else
        systemctl --root="$r" --quiet enable munge.service slurmd.service
        systemctl --root="$r" --quiet disable slurmctld.service
        printf '# written by .ci/slurm.sh: this node'"'"'s name in slurm.conf\nSLURMD_OPTIONS="-N %s"\n' "$h" \
            > "$r/etc/default/slurmd"
        install -d -m 755 "$r/opt/bringup-gres"
        for i in 0 1 2 3; do
            [[ -c $r/opt/bringup-gres/nvidia$i ]] || mknod -m 666 "$r/opt/bringup-gres/nvidia$i" c 195 "$i"
        done
    fi
    # the second user takes ctl's key, as root and tester do (written by testhost.sh build)
    pub=$(cat "${DIR[ctl]}/keys/id_ed25519.pub")
    home=$r/home/$SECOND_USER
    [[ -d $home ]] || die "$h: no $SECOND_USER in the rootfs (remove $SLURM_CACHE and the rootfs, then up again)"
    install -d -m 700 "$home/.ssh"
    echo "$pub" > "$home/.ssh/authorized_keys"
    chmod 600 "$home/.ssh/authorized_keys"
    chown -R "$(owner "$home")" "$home/.ssh"
    chroot "$r" usermod -p '*' "$SECOND_USER"   # no password, but not locked: sshd lets the key in
}

# an OpenSSH config for the login host: `slurm-login` (root), `slurm-tester`, `slurm-tester2`
write_ssh_config() {
    local c=${DIR[ctl]} tmp
    tmp=$(mktemp)
    th ctl bash "$TESTHOST" ssh-config "$tmp" 2>/dev/null   # writes keys/known_hosts for the port
    rm -f "$tmp"
    cat > "$c/ssh_config.tmp" <<EOF
# written by .ci/slurm.sh up: the Slurm test cluster's login host ${NAME[ctl]}
Host slurm-login slurm-tester slurm-$SECOND_USER
    HostName 127.0.0.1
    Port ${SSH_PORT[ctl]}
    IdentityFile $c/keys/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile $c/keys/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    CheckHostIP no
    BatchMode yes
    PasswordAuthentication no
    KbdInteractiveAuthentication no
    ControlMaster no
    ControlPath none
    LogLevel ERROR

Host slurm-login
    User root

Host slurm-tester
    User tester

Host slurm-$SECOND_USER
    User $SECOND_USER
EOF
    mv "$c/ssh_config.tmp" "$c/ssh_config"
}

# ------------------------------------------------------------------------------------------------------------- up

node_states() { texec ctl sinfo -h -N -p gpu -o '%N %T %G' 2>/dev/null | sort -u | tr '\n' ';'; }

show_logs() {
    local h
    for h in ctl "${NODES[@]}"; do
        log "--- $h: /var/log/slurm"
        tail -n 15 "${DIR[$h]}"/rootfs/var/log/slurm/*.log >&2 2>/dev/null || true
    done
}

cmd_up() {
    local t0 h deadline states=""
    t0=$(now)
    # up, whatever its jobs do now (tests may be running on it): left alone
    if is_up ctl && is_up n1 && is_up n2 && [[ $(node_states) =~ ^n1\ [a-z+*~#]+\ gpu:4\;n2\ [a-z+*~#]+\ gpu:4\;$ ]]; then
        log "already up: $(node_states)"
        return 0
    fi
    # a partly up cluster (a killed run) starts again from a clean state
    for h in n2 n1 ctl; do is_up "$h" && th "$h" bash "$TESTHOST" down; done
    if has_slurm ctl && [[ ! -f $SLURM_CACHE ]]; then
        th ctl bash "$TESTHOST" pack "$SLURM_CACHE"
    elif [[ ! -f $SLURM_CACHE ]]; then
        make_slurm_cache
    fi
    for h in ctl "${NODES[@]}"; do build_host "$h"; done
    for h in ctl "${NODES[@]}"; do configure_host "$h"; done
    install -d -m 1777 "$SHARED"
    chmod 1777 "$SHARED"
    # the controller first: each slurmd registers with it once it starts
    for h in ctl "${NODES[@]}"; do
        th_full "$h" TESTHOST_NSPAWN_ARGS="--bind=$SHARED:$SHARED_MOUNT" bash "$TESTHOST" up
    done
    for h in "${NODES[@]}"; do th "$h" bash "$TESTHOST" install-sim "$REPO/tui/sim"; done
    write_ssh_config
    deadline=$(( $(date +%s) + UP_TIMEOUT ))
    while :; do
        states=$(node_states)
        [[ $states == "n1 idle gpu:4;n2 idle gpu:4;" ]] && break
        if (( $(date +%s) >= deadline )); then
            show_logs
            die "the nodes are not idle with gpu:4 after ${UP_TIMEOUT} s (sinfo: ${states:-nothing}): see the logs above"
        fi
        sleep 0.2
    done
    log "up in $(since "$t0") s: slurmctld 127.0.0.1:$CTLD_PORT, login ssh 127.0.0.1:${SSH_PORT[ctl]}, nodes $states" \
        "shared $SHARED at $SHARED_MOUNT"
}

cmd_down() {
    local h rc=0
    for h in n2 n1 ctl; do
        [[ -d ${DIR[$h]} ]] || continue
        th "$h" bash "$TESTHOST" down || rc=1
    done
    return "$rc"
}

cmd_status() {
    local h rc=0 st
    for h in ctl "${NODES[@]}"; do
        st=$(th "$h" bash "$TESTHOST" status 2>/dev/null) || rc=3
        echo "$h=${st%%$'\n'*}"
    done
    if ((rc == 0)); then
        texec ctl sinfo -N -o '%N %T %G' || rc=3
    fi
    return "$rc"
}

cmd_env() {
    cat <<EOF
export BRINGUP_SLURM_SSH_PORT=${SSH_PORT[ctl]}
export BRINGUP_SLURM_SSH_KEY=${DIR[ctl]}/keys/id_ed25519
export BRINGUP_SLURM_KNOWN_HOSTS=${DIR[ctl]}/keys/known_hosts
export BRINGUP_SLURM_SSH_CONFIG=${DIR[ctl]}/ssh_config
export BRINGUP_SLURM_CTL_DIR=${DIR[ctl]}
export BRINGUP_SLURM_N1_DIR=${DIR[n1]}
export BRINGUP_SLURM_N2_DIR=${DIR[n2]}
export BRINGUP_SLURM_SHARED_DIR=$SHARED
export BRINGUP_SLURM_SHARED_MOUNT=$SHARED_MOUNT
export BRINGUP_SLURM_CTLD_PORT=$CTLD_PORT
EOF
}

usage() {
    sed -n '2,/^set /p' "${BASH_SOURCE[0]}" | sed -n 's/^# \{0,1\}//p' >&2
    exit 2
}

# one up or down at a time (testhost.sh locks each host on its own)
lock() { mkdir -p "${DIR[ctl]}"; exec 8>"${DIR[ctl]}/.slurm-lock"; flock -w 300 8 || die "another slurm.sh holds the lock"; }

cmd=${1:-}; shift || true
case $cmd in
    up) lock; cmd_up ;;
    down) lock; cmd_down ;;
    status) cmd_status ;;
    env) cmd_env ;;
    exec-ctl) (($#)) || usage; texec ctl "$@" ;;
    exec-node) valid_node "${1:-}"; n=$1; shift; (($#)) || usage; texec "$n" "$@" ;;
    stop-slurmd) valid_node "${1:-}"; texec "$1" systemctl stop slurmd.service ;;
    start-slurmd) valid_node "${1:-}"; texec "$1" systemctl start slurmd.service ;;
    *) usage ;;
esac
