#!/usr/bin/env bash
# A real systemd + journald + sshd test host for bringup's SSH/systemd transport, booted with systemd-nspawn
# from a debootstrapped Debian rootfs. Run as root. All state lives in ./.testhost/ (git-ignored).
# See tests/testhost/README.md for the interface. F1..F8 below name the pitfalls of nspawn on a host without
# systemd as PID 1 (no D-Bus/machined, hybrid cgroups, a SIGKILLed nspawn leaves the container running, ...).
#
# Supported hosts (`check` tells; `build` and `up` refuse others at once): systemd is not PID 1 (no
# /run/systemd/system), and the cgroups are hybrid: /sys/fs/cgroup a tmpfs, cgroup v1 name=systemd at
# /sys/fs/cgroup/systemd and cgroup2 at /sys/fs/cgroup/unified, both writable. Not pure cgroup2, v1 only, or systemd.
#
# One host per state directory (rootfs; TESTHOST_DIR, default .testhost/). `up` records its TESTHOST_NAME, TESTHOST_SSH_PORT and TESTHOST_SIM_PORT in
# .testhost/run/host.env; the other commands use that record, unless a variable is set (which wins, with a warning
# when it disagrees with the running host). A second `up` with another name or port is refused while one runs.
#
#   .ci/testhost.sh build | up | install-sim SRC_DIR | exec CMD... | ssh-config PATH | status | down
#                   | check | pack | clean
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# TESTHOST_DIR: another state directory (its own rootfs, keys, record), for a second host at once: the nodes of a
# deployment over two hosts (tests/e2e/test_multinode_testhost.py)
TH=$(realpath -m "${TESTHOST_DIR:-$REPO/.testhost}")
ROOTFS=$TH/rootfs
RUN=$TH/run
KEYS=$TH/keys
LOGS=$TH/logs
UNITS=$REPO/tests/testhost

SUITE=${TESTHOST_SUITE:-bookworm}
MIRROR=${TESTHOST_MIRROR:-http://deb.debian.org/debian}
DEFAULT_NAME=bringup-testhost DEFAULT_PORT=2222 DEFAULT_SIM_PORT=30001
# the host's identity: NAME (machine name, hostname and host cgroup name), PORT (sshd) and SIM_PORT (sglang-sim's
# --port); set from these, else from the record of the host that `up` booted (HOST_ENV), else the defaults
ENV_NAME=${TESTHOST_NAME:-} ENV_PORT=${TESTHOST_SSH_PORT:-} ENV_SIM_PORT=${TESTHOST_SIM_PORT:-}
HOST_ENV=$RUN/host.env
CACHE=${TESTHOST_CACHE:-$HOME/.cache/bringup-testhost/rootfs-$SUITE.tar.zst}
LOCAL_TARBALL=$TH/rootfs.tar.zst
BOOT_TIMEOUT=${TESTHOST_BOOT_TIMEOUT:-60}
DOWN_GRACE=${TESTHOST_DOWN_GRACE:-10}   # seconds for a clean poweroff before everything is SIGKILLed
PACKAGES=systemd,systemd-sysv,dbus,openssh-server,python3,iproute2,procps,util-linux,sudo
CG_HIERARCHIES=(systemd unified)   # the hybrid layout of this machine: name=systemd (v1) and cgroup2 at unified/
LAYOUT="hybrid cgroups (v1 name=systemd at /sys/fs/cgroup/systemd, cgroup2 at /sys/fs/cgroup/unified)"
# our own pid-namespace depth (1 on this machine): the container's PID 1 has one more NSpid entry, the last being 1
HOST_NS_DEPTH=$(awk '/^NSpid:/ { print NF - 1 }' /proc/self/status)
CPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

log() { printf '[testhost] %s\n' "$*" >&2; }
die() { printf '[testhost] error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

[[ $(id -u) == 0 ]] || die "must run as root"

# ---------------------------------------------------------------------------------------------------------- state

cg_dir() { echo "/sys/fs/cgroup/$1/$NAME"; }

# alive and not a zombie: PID 1 here (process_api) reaps orphans only after a while, and a SIGKILLed nspawn's
# zombie still shows comm=systemd-nspawn
alive() { local st; st=$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null) && [[ -n $st && $st != Z && $st != X ]]; }

# true if PID is alive and sits in our cgroup tree (guards against pid reuse before we signal anything)
in_our_cgroup() {
    local pid=$1
    [[ -n $pid ]] && alive "$pid" || return 1
    grep -Eq "^[0-9]+:(name=systemd)?:/$NAME(/|\$)" "/proc/$pid/cgroup" 2>/dev/null
}

# every pid in our cgroup trees (or in their subtree $1)
cg_pids() {
    local h d
    for h in "${CG_HIERARCHIES[@]}"; do
        d=$(cg_dir "$h")${1:+/$1}
        [[ -d $d ]] || continue
        find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true
    done | sort -un
}

nspawn_pid() {
    local pid
    pid=$(cat "$RUN/nspawn.pid" 2>/dev/null) || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == systemd-nspawn ]] && in_our_cgroup "$pid" && echo "$pid"
}

# the container's PID 1: the process in our cgroup whose pid in its innermost namespace is 1
find_leader() {
    local pid ns
    for pid in $(cg_pids); do
        ns=$(awk -v d="$HOST_NS_DEPTH" '/^NSpid:/ && NF == d + 2 { print $NF }' "/proc/$pid/status" 2>/dev/null) \
            || continue
        [[ $ns == 1 ]] && { echo "$pid"; return 0; }
    done
    return 1
}

leader_pid() {
    local pid
    pid=$(cat "$RUN/leader.pid" 2>/dev/null) || return 1
    in_our_cgroup "$pid" && echo "$pid"
}

# nsenter into every namespace of the container, with a clean environment; the process is first moved into our
# exec/ cgroup so that `down` also reaps anything a test left running through `exec`.
container_exec() {
    local leader=$1; shift
    (
        for h in "${CG_HIERARCHIES[@]}"; do
            mkdir -p "$(cg_dir "$h")/exec"
            echo "$BASHPID" > "$(cg_dir "$h")/exec/cgroup.procs"
        done
        exec nsenter -t "$leader" -a env -i PATH="$CPATH" HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 "$@"
    )
}

ssh_banner() {  # "SSH-" once sshd accepts connections on the port
    timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && head -c 4 <&3" 2>/dev/null || true
}

# ------------------------------------------------------------------------------------------------------- identity

valid_name() { [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ ]]; }
valid_port() { [[ $1 =~ ^[0-9]{1,5}$ ]] && (( 10#$1 >= 1 && 10#$1 <= 65535 )); }

# the first component of PID's name=systemd cgroup: the NAME of the test host it belongs to ("" for the root)
pid_cg_name() { sed -n 's|^[0-9]*:name=systemd:/\([^/]*\).*|\1|p' "/proc/$1/cgroup" 2>/dev/null; }

# the directory a systemd-nspawn process boots (its -D argument)
nspawn_rootfs() {
    local a prev=""
    while IFS= read -r -d '' a; do
        [[ $prev == -D || $prev == --directory ]] && { echo "$a"; return 0; }
        [[ $a == --directory=* ]] && { echo "${a#--directory=}"; return 0; }
        prev=$a
    done 2>/dev/null < "/proc/$1/cmdline"
    return 1
}

# every live systemd-nspawn on this machine
nspawn_procs() {
    local d c
    for d in /proc/[0-9]*; do
        { read -r c < "$d/comm"; } 2>/dev/null || continue
        [[ $c == systemd-nspawn ]] && alive "${d#/proc/}" && echo "${d#/proc/}"
    done
    return 0
}

# the NAME of the test host booted from this rootfs, whoever started it with whatever variables: a live
# systemd-nspawn -D $ROOTFS, else the recorded host's PID 1 (nspawn was SIGKILLed, F5)
running_name() {
    local pid dir n
    for pid in $(nspawn_procs); do
        dir=$(nspawn_rootfs "$pid") || continue
        [[ $dir -ef $ROOTFS ]] || continue
        n=$(pid_cg_name "$pid")
        [[ -n $n ]] && { echo "$n"; return 0; }
    done
    [[ -n $REC_NAME ]] && NAME=$REC_NAME leader_pid >/dev/null && { echo "$REC_NAME"; return 0; }
    return 1
}

# a systemd-nspawn in the cgroup NAME that boots another rootfs: the host of another checkout, with the same name
foreign_rootfs() {
    local pid dir
    for pid in $(cg_pids); do
        [[ $(cat "/proc/$pid/comm" 2>/dev/null) == systemd-nspawn ]] || continue
        dir=$(nspawn_rootfs "$pid") || continue
        [[ $dir -ef $ROOTFS ]] || { echo "$dir"; return 0; }
    done
    return 1
}

# REC_NAME, REC_PORT, REC_SIM_PORT: what `up` recorded about the host it booted from this rootfs ("" if unknown)
read_record() {
    local k v pid
    REC_NAME="" REC_PORT="" REC_SIM_PORT=""
    if [[ -f $HOST_ENV ]]; then
        while IFS='=' read -r k v; do
            case $k in
                TESTHOST_NAME) if valid_name "$v"; then REC_NAME=$v; fi ;;
                TESTHOST_SSH_PORT) if valid_port "$v"; then REC_PORT=$v; fi ;;
                TESTHOST_SIM_PORT) if valid_port "$v"; then REC_SIM_PORT=$v; fi ;;
            esac
        done < "$HOST_ENV"
        [[ -n $REC_NAME ]] || log "warning: $HOST_ENV has no valid TESTHOST_NAME; ignoring it"
    elif [[ -f $RUN/nspawn.pid || -f $RUN/leader.pid ]]; then
        # booted by an older version of this script (run/port, no host.env): the name is in nspawn's cgroup
        REC_PORT=$(cat "$RUN/port" 2>/dev/null || true)
        valid_port "$REC_PORT" || REC_PORT=""
        pid=$(cat "$RUN/nspawn.pid" 2>/dev/null || true)
        if [[ -n $pid && $(cat "/proc/$pid/comm" 2>/dev/null) == systemd-nspawn ]] \
                && [[ $(nspawn_rootfs "$pid") -ef $ROOTFS ]]; then
            REC_NAME=$(pid_cg_name "$pid")
        fi
        pid=$(cat "$RUN/leader.pid" 2>/dev/null || true)
        if [[ -z $REC_NAME && -n $pid && /proc/$pid/root/ -ef $ROOTFS ]]; then
            REC_NAME=$(pid_cg_name "$pid")
        fi
        valid_name "$REC_NAME" || REC_NAME=$DEFAULT_NAME
    fi
}

write_record() {  # write_record NAME PORT SIM_PORT
    mkdir -p "$RUN"
    printf '%s\n' "# written by .ci/testhost.sh: the test host booted from $ROOTFS" "TESTHOST_NAME=$1" \
        "TESTHOST_SSH_PORT=$2" "TESTHOST_SIM_PORT=$3" > "$HOST_ENV.tmp"
    mv "$HOST_ENV.tmp" "$HOST_ENV"
}

describe_running() {  # "NAME (ssh 127.0.0.1:PORT, sim port SIM_PORT)" of the running host RUNNING, from the record
    if [[ $RUNNING == "$REC_NAME" ]]; then
        echo "$RUNNING (ssh 127.0.0.1:${REC_PORT:-?}, sim port ${REC_SIM_PORT:-$DEFAULT_SIM_PORT})"
    else
        echo "$RUNNING (not in $HOST_ENV)"
    fi
}

# explicit variables win over the record; say so when they disagree with the running host
warn_env_mismatch() {
    [[ -n $RUNNING ]] || return 0
    warn_var TESTHOST_NAME "$ENV_NAME" "$RUNNING"
    [[ $RUNNING == "$REC_NAME" ]] || return 0
    warn_var TESTHOST_SSH_PORT "$ENV_PORT" "$REC_PORT"
    warn_var TESTHOST_SIM_PORT "$ENV_SIM_PORT" "$REC_SIM_PORT"
}

warn_var() {  # warn_var VAR SET RUNNING_VALUE
    [[ -n $2 && -n $3 && $2 != "$3" ]] || return 0
    log "warning: $1=$2, but the running host is $(describe_running): using $2 as set (unset $1 for $3)"
}

# ------------------------------------------------------------------------------------------------------- layout

# F1..F3 and the cgroup handling (CG_HIERARCHIES, the launcher, `down`) assume this machine's layout: detect it, so
# that another layout fails here with a reason instead of later in nspawn, or by creating cgroups in the wrong tree
layout_problem() {  # prints why this machine is not a supported host; false if it is one
    local pid1 t
    pid1=$(cat /proc/1/comm 2>/dev/null || echo '?')
    if [[ -d /run/systemd/system ]]; then
        echo "booted with systemd: /run/systemd/system exists (PID 1 is $pid1)"; return 0
    fi
    if [[ $pid1 == systemd ]]; then
        echo "systemd is PID 1 (/proc/1/comm)"; return 0
    fi
    t=$(stat -fc %T /sys/fs/cgroup 2>/dev/null || echo missing)
    case $t in
        cgroup2fs) echo "pure cgroup2: the unified hierarchy is mounted at /sys/fs/cgroup itself"; return 0 ;;
        tmpfs) ;;
        *) echo "/sys/fs/cgroup is $t, not a tmpfs of cgroup mounts"; return 0 ;;
    esac
    t=$(findmnt -rn -o FSTYPE,OPTIONS --mountpoint /sys/fs/cgroup/systemd 2>/dev/null | tail -1 || true)
    [[ ${t%% *} == cgroup && ,${t#* }, == *,name=systemd,* ]] \
        || { echo "no cgroup v1 name=systemd hierarchy at /sys/fs/cgroup/systemd (found: ${t:-nothing})"; return 0; }
    t=$(findmnt -rn -o FSTYPE --mountpoint /sys/fs/cgroup/unified 2>/dev/null | tail -1 || true)
    [[ $t == cgroup2 ]] || { echo "no cgroup2 at /sys/fs/cgroup/unified (found: ${t:-nothing}): v1 only"; return 0; }
    for t in systemd unified; do
        [[ -w /sys/fs/cgroup/$t ]] || { echo "/sys/fs/cgroup/$t is not writable (read-only cgroups)"; return 0; }
    done
    return 1
}

check_host_layout() {
    local why
    why=$(layout_problem) || return 0
    die "unsupported host: $why. Supported: systemd not PID 1, $LAYOUT; see tests/testhost/README.md (Supported hosts)"
}

cmd_check() {
    check_host_layout
    echo "supported: PID 1 is $(cat /proc/1/comm), $LAYOUT"
}

# ---------------------------------------------------------------------------------------------------------- build

install_host_tools() {
    local sysver want=() ctver
    sysver=$(dpkg-query -W -f='${Version}' systemd 2>/dev/null) || die "systemd package not installed on the host"
    ctver=$(dpkg-query -W -f='${db:Status-Abbrev} ${Version}' systemd-container 2>/dev/null || true)
    # F7: pin systemd-container to the installed systemd, or apt upgrades the host's own systemd packages
    [[ $ctver == "ii  $sysver" ]] || want+=("systemd-container=$sysver")
    [[ $ctver == ii* && $ctver != "ii  $sysver" ]] && log "warning: systemd-container ${ctver#ii  } != systemd $sysver"
    command -v debootstrap >/dev/null || want+=(debootstrap)
    command -v zstd >/dev/null || want+=(zstd)
    command -v ssh-keygen >/dev/null || want+=(openssh-client)
    command -v ss >/dev/null || want+=(iproute2)
    ((${#want[@]})) || return 0
    log "apt-get install ${want[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
}

ensure_key() {
    mkdir -p "$KEYS"; chmod 700 "$KEYS"
    [[ -s $KEYS/id_ed25519 ]] || ssh-keygen -q -t ed25519 -N '' -C bringup-testhost -f "$KEYS/id_ed25519"
}

debootstrap_rootfs() {
    local tmp=$ROOTFS.tmp t0
    rm -rf "$tmp"
    log "debootstrap $SUITE (minbase + $PACKAGES) from $MIRROR; log: $TH/debootstrap.log"
    t0=$(now)
    # a private mount namespace: debootstrap's /proc, /sys mounts in the target vanish when it exits, even on failure
    if ! unshare --mount --propagation private \
            debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$tmp" "$MIRROR" \
            >"$TH/debootstrap.log" 2>&1; then
        tail -20 "$TH/debootstrap.log" >&2
        rm -rf "$tmp"
        die "debootstrap failed"
    fi
    rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/* 2>/dev/null || true
    mv "$tmp" "$ROOTFS"
    log "debootstrap done in $(since "$t0") s"
}

unpack_rootfs() {
    local tarball=$1 tmp=$ROOTFS.tmp t0
    t0=$(now)
    rm -rf "$tmp"; mkdir -p "$tmp"
    tar --use-compress-program='zstd -d' --numeric-owner --xattrs --xattrs-include='*' -C "$tmp" -xpf "$tarball"
    mv "$tmp" "$ROOTFS"
    log "unpacked $tarball in $(since "$t0") s"
}

pack_rootfs() {
    local dest=$1 t0
    [[ -d $ROOTFS ]] || die "no rootfs to pack"
    [[ -z $(running_name) ]] || die "the test host $(running_name) is up: run down before packing"
    t0=$(now)
    mkdir -p "$(dirname "$dest")"
    tar --use-compress-program='zstd -T0 -3' --numeric-owner --xattrs --xattrs-include='*' -C "$ROOTFS" \
        -cpf "$dest.tmp" .
    mv "$dest.tmp" "$dest"
    log "packed $dest ($(du -h "$dest" | cut -f1)) in $(since "$t0") s"
}

# idempotent customisation; runs after every build (cheap), also over an unpacked cache from another checkout
customize_rootfs() {
    local r=$ROOTFS pub
    [[ -x $r/usr/bin/sudo && -x $r/usr/sbin/sshd ]] || die "rootfs lacks sudo/sshd: remove it and the cache, rebuild"
    pub=$(cat "$KEYS/id_ed25519.pub")
    # host keys are baked into the rootfs (openssh-server's postinst made them); make sure they exist
    ls "$r"/etc/ssh/ssh_host_ed25519_key >/dev/null 2>&1 || chroot "$r" ssh-keygen -A
    # root: key only
    install -d -m 700 "$r/root/.ssh"
    echo "$pub" > "$r/root/.ssh/authorized_keys"; chmod 600 "$r/root/.ssh/authorized_keys"
    # tester: same key, passwordless sudo
    grep -q '^tester:' "$r/etc/passwd" || chroot "$r" useradd -m -s /bin/bash -U tester
    chroot "$r" usermod -p '*' tester   # no password, but not locked
    install -d -m 700 -o "$(stat -c %u "$r/home/tester")" -g "$(stat -c %g "$r/home/tester")" "$r/home/tester/.ssh"
    echo "$pub" > "$r/home/tester/.ssh/authorized_keys"
    chown --reference="$r/home/tester" "$r/home/tester/.ssh/authorized_keys"
    chmod 600 "$r/home/tester/.ssh/authorized_keys"
    echo 'tester ALL=(ALL) NOPASSWD:ALL' > "$r/etc/sudoers.d/tester"; chmod 440 "$r/etc/sudoers.d/tester"
    # mallory: a local user with no sudo, no key and no login over SSH, the attacker of the adversary tests
    # (tests/e2e/test_host_adversary_lock.py), who acts through `exec runuser -u mallory -- CMD...`
    grep -q '^mallory:' "$r/etc/passwd" || chroot "$r" useradd -M -d /nonexistent -s /bin/sh -U mallory
    chroot "$r" usermod -L mallory
    # no getty on the console: --console=read-only gives the container no input anyway
    ln -sf /dev/null "$r/etc/systemd/system/console-getty.service"
    write_identity
}

write_identity() {  # also called by `up`, so TESTHOST_NAME and TESTHOST_SSH_PORT can change without a rebuild
    echo "$NAME" > "$ROOTFS/etc/hostname"
    printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$NAME" > "$ROOTFS/etc/hosts"
    cat > "$ROOTFS/etc/ssh/sshd_config.d/bringup-testhost.conf" <<EOF
# written by .ci/testhost.sh
ListenAddress 127.0.0.1:$PORT
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
MaxSessions 10
UseDNS no
EOF
}

cmd_build() {
    local t0; t0=$(now)
    check_host_layout
    mkdir -p "$TH" "$RUN" "$LOGS"
    install_host_tools
    ensure_key
    if [[ -d $ROOTFS ]]; then
        log "rootfs exists: $ROOTFS"
    elif [[ -f $LOCAL_TARBALL ]]; then
        unpack_rootfs "$LOCAL_TARBALL"
    elif [[ -f $CACHE ]]; then
        unpack_rootfs "$CACHE"
    else
        debootstrap_rootfs
        customize_rootfs
        pack_rootfs "$CACHE"
    fi
    customize_rootfs
    log "build done in $(since "$t0") s"
}

cmd_pack() { pack_rootfs "${1:-$CACHE}"; }

cmd_clean() {  # remove the rootfs (not keys, not the cache)
    [[ -z $RUNNING ]] || die "the test host $RUNNING is up: run down first"
    rm -rf "$ROOTFS" "$ROOTFS.tmp"
}

# ---------------------------------------------------------------------------------------------------------- up

cmd_up() {
    local t0 pid leader state="" deadline foreign
    t0=$(now)
    check_host_layout
    [[ -d $ROOTFS ]] || die "no rootfs: run build first"
    # one container per rootfs. nspawn's image lock is no guard: the stale-state cleanup below would remove it.
    if [[ -n $RUNNING ]]; then
        if [[ $RUNNING != "$NAME" || ( -n $REC_PORT && $PORT != "$REC_PORT" ) ]]; then
            die "the test host $(describe_running) is already up from $ROOTFS, and a rootfs boots one host:" \
                "not booting ${ENV_NAME:-$NAME} on port ${ENV_PORT:-$DEFAULT_PORT}. Stop it first: TESTHOST_NAME=$RUNNING $0 down"
        fi
        if nspawn_pid >/dev/null && leader_pid >/dev/null; then
            warn_env_mismatch
            log "already up: $(describe_running), nspawn $(nspawn_pid), leader $(leader_pid)"
            return 0
        fi
    else
        # nothing runs: a record is stale (a killed run). Clear what that run left under its name, then boot with
        # the variables or the defaults, not with the stale record.
        if [[ -n $REC_NAME && $REC_NAME != "${ENV_NAME:-$DEFAULT_NAME}" ]]; then
            NAME=$REC_NAME foreign_rootfs >/dev/null || NAME=$REC_NAME cmd_down_quiet
        fi
        NAME=${ENV_NAME:-$DEFAULT_NAME} PORT=${ENV_PORT:-$DEFAULT_PORT} SIM_PORT=${ENV_SIM_PORT:-$DEFAULT_SIM_PORT}
    fi
    if foreign=$(foreign_rootfs); then
        die "the cgroup name $NAME is taken by the test host of another checkout ($foreign): set another TESTHOST_NAME"
    fi
    [[ $SIM_PORT != "$PORT" ]] || die "TESTHOST_SIM_PORT and TESTHOST_SSH_PORT are both $PORT"
    cmd_down_quiet   # stale state from a killed run (F5): clear it before booting again
    [[ -z $(ss -Hltn "( sport = :$PORT )") ]] || die "port $PORT is in use: $(ss -Hltnp "( sport = :$PORT )" | head -1)"
    [[ -z $(ss -Hltn "( sport = :$SIM_PORT )") ]] || log "warning: port $SIM_PORT is in use, so sglang-sim.service" \
        "could not listen on it (set TESTHOST_SIM_PORT): $(ss -Hltnp "( sport = :$SIM_PORT )" | head -1)"
    mkdir -p "$RUN" "$LOGS"
    write_identity
    write_record "$NAME" "$PORT" "$SIM_PORT"
    : > "$LOGS/console.log"

    # F8: the launcher writes its own pid, then execs nspawn (so the pid file is nspawn's pid).
    # F2: it first moves itself into our own cgroup, because --keep-unit makes nspawn put its supervisor/ and payload/
    #     cgroups under its current cgroup, which is the root here.
    # F1: no system bus / machined: --register=no --keep-unit.  F3: pure cgroup2 inside the container.
    # shellcheck disable=SC2016,SC2086
    setsid bash -c '
        set -e
        echo $$ > "$1/nspawn.pid"
        for h in systemd unified; do
            mkdir -p "/sys/fs/cgroup/$h/$2"
            echo $$ > "/sys/fs/cgroup/$h/$2/cgroup.procs"
        done
        export SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1
        shift 2
        exec systemd-nspawn "$@"
    ' launcher "$RUN" "$NAME" \
        -D "$ROOTFS" -b -M "$NAME" --register=no --keep-unit --link-journal=no --console=read-only \
        ${TESTHOST_NSPAWN_ARGS:-} \
        </dev/null >>"$LOGS/console.log" 2>&1 9>&- &
    disown

    deadline=$(( $(date +%s) + BOOT_TIMEOUT ))
    fail() { log "$1; console log tail:"; tail -25 "$LOGS/console.log" >&2; cmd_down_quiet; die "up failed"; }
    # the launcher's pid file, then the container's PID 1
    while ! pid=$(cat "$RUN/nspawn.pid" 2>/dev/null) || [[ -z $pid ]]; do
        (( $(date +%s) < deadline )) || fail "timeout waiting for the launcher"
        sleep 0.02
    done
    while :; do
        alive "$pid" || fail "systemd-nspawn exited"
        (( $(date +%s) < deadline )) || fail "timeout waiting for the container's PID 1"
        leader=$(find_leader) && break
        sleep 0.05
    done
    echo "$leader" > "$RUN/leader.pid"
    # F4: "Failed to connect to bus" for ~0.1 s after PID 1 appears: poll
    while :; do
        (( $(date +%s) < deadline )) || fail "timeout waiting for systemd (last state: ${state:-none})"
        nspawn_pid >/dev/null || fail "systemd-nspawn exited"
        state=$(container_exec "$leader" systemctl is-system-running 2>/dev/null || true)
        [[ $state == running || $state == degraded ]] && break
        sleep 0.1
    done
    [[ $state == degraded ]] && log "warning: system is degraded: $(container_exec "$leader" systemctl --failed --no-legend --plain | tr '\n' ' ')"
    while [[ $(ssh_banner "$PORT") != SSH- ]]; do
        (( $(date +%s) < deadline )) || fail "timeout waiting for sshd on 127.0.0.1:$PORT"
        if container_exec "$leader" systemctl is-failed -q ssh.service; then
            container_exec "$leader" journalctl -u ssh.service -n 10 --no-pager >&2 || true
            fail "ssh.service failed in the container"
        fi
        sleep 0.1
    done
    log "up in $(since "$t0") s: $NAME, nspawn $pid, leader $leader, systemd $state, sshd 127.0.0.1:$PORT," \
        "sim port $SIM_PORT"
}

# ---------------------------------------------------------------------------------------------------------- down

cmd_down_quiet() { ( cmd_down ) >/dev/null 2>&1 || true; }   # a subshell: cmd_down's die must not end the caller

kill_cgroup() {  # kill_cgroup SUB: SIGKILL every process under our cgroup SUB ("" = all) until none is left
    local sub=$1 pids
    for _ in $(seq 50); do
        pids=$(cg_pids "$sub")
        [[ -z $pids ]] && return 0
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
        sleep 0.1
    done
}

# Processes started by `exec` live in the container's PID namespace but were forked by nsenter on the host.
# systemd 252's final "Sending SIGTERM to remaining processes" records every PID in the namespace and then waits
# for SIGCHLD; one that is reaped by its host-side nsenter sends it none, and it sleeps the full 90 s (seen here).
# So kill them first, the in-container ones before their nsenter parents, and wait until they are reaped.
kill_exec_stragglers() {
    local pids inner=() outer=() p end
    pids=$(cg_pids exec)
    [[ -n $pids ]] || return 0
    for p in $pids; do
        if [[ $(awk '/^NSpid:/ { print NF - 1 }' "/proc/$p/status" 2>/dev/null) -gt $((HOST_NS_DEPTH)) ]]; then
            inner+=("$p")
        else
            outer+=("$p")
        fi
    done
    if ((${#inner[@]})); then
        kill -KILL "${inner[@]}" 2>/dev/null || true
        end=$(( $(date +%s) + 3 ))
        while (( $(date +%s) < end )); do   # gone from /proc, i.e. reaped, not just dead
            local left=0
            for p in "${inner[@]}"; do [[ -e /proc/$p ]] && left=1; done
            ((left)) || break
            sleep 0.02
        done
    fi
    kill_cgroup exec
}

wait_gone() {  # wait_gone SECONDS PID... : true once none of the PIDs is alive
    local end=$(( $(date +%s%N) / 1000000 + $1 * 1000 )) p alive; shift
    while :; do
        alive=0
        for p in "$@"; do alive "$p" && alive=1; done
        ((alive)) || return 0
        (( $(date +%s%N) / 1000000 < end )) || return 1
        sleep 0.05
    done
}

cmd_down() {
    local t0 pid leader h d quiet=0 running foreign
    t0=$(now)
    # everything below the cgroups (the image locks, the pid files, the record) belongs to the host of this rootfs
    running=$(running_name || true)
    [[ -z $running || $running == "$NAME" ]] \
        || die "TESTHOST_NAME=$NAME is not up; the test host running from $ROOTFS is $running:" \
               "stop it with TESTHOST_NAME=$running $0 down"
    if foreign=$(foreign_rootfs); then
        die "the cgroup name $NAME is taken by the test host of another checkout ($foreign): not touching it"
    fi
    pid=$(nspawn_pid || true)
    leader=$(leader_pid || find_leader || true)
    [[ -z $pid && -z $leader && -z $(cg_pids) ]] && quiet=1
    # processes a test started through `exec` live in the container's PID namespace, so the container's final
    # "Sending SIGTERM to remaining processes" waits on them (nsenter'd processes may have SIGTERM blocked): kill first
    kill_exec_stragglers
    if [[ -n $pid ]]; then
        # nspawn forwards SIGTERM as SIGRTMIN+3: a clean poweroff (~0.2 s)
        kill -TERM "$pid" 2>/dev/null || true
        wait_gone "$DOWN_GRACE" "$pid" || log "nspawn still running after ${DOWN_GRACE} s: SIGKILL everything"
    elif [[ -n $leader ]]; then
        # F5: nspawn was SIGKILLed, the container outlived it: power it off directly
        log "nspawn is gone but the container's PID 1 ($leader) is not (F5): SIGRTMIN+3"
        kill -s SIGRTMIN+3 "$leader" 2>/dev/null || true
        wait_gone "$DOWN_GRACE" "$leader" || log "container still running after ${DOWN_GRACE} s: SIGKILL everything"
    fi
    # anything left in our cgroups (a stuck shutdown, stragglers): SIGKILL until empty
    kill_cgroup ""
    [[ -z $(cg_pids) ]] || log "warning: processes left in our cgroups: $(cg_pids | tr '\n' ' ')"
    # F2: remove our cgroup trees (depth-first rmdir; they are empty now)
    for h in "${CG_HIERARCHIES[@]}"; do
        d=$(cg_dir "$h")
        if [[ -d $d ]]; then find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
        [[ -d $d ]] && log "warning: could not remove $d"
    done
    # mounts under the rootfs (only possible after an interrupted debootstrap run outside unshare)
    if [[ -e $ROOTFS ]] && findmnt -rn -o TARGET | grep -Fq "$ROOTFS"; then
        findmnt -rn -o TARGET | grep -F "$ROOTFS" | sort -r | xargs -r -n1 umount -l || true
    fi
    # F1's leftover: nspawn cannot delete /run/systemd/nspawn/propagate/NAME because /run is no tmpfs here
    # and the image lock it holds on the rootfs, left behind when nspawn was SIGKILLed
    [[ -d $ROOTFS ]] && rm -f "/run/systemd/nspawn/locks/inode-$(stat -c %d:%i "$ROOTFS")"
    rmdir "/run/systemd/nspawn/propagate/$NAME" /run/systemd/nspawn/propagate /run/systemd/nspawn/locks \
        /run/systemd/nspawn 2>/dev/null || true
    # nspawn's image lock file next to the rootfs
    rm -f "$TH/.#rootfs.lck" "$TH/.#rootfs"*.lck 2>/dev/null || true
    rm -f "$RUN/nspawn.pid" "$RUN/leader.pid" "$RUN/port" "$HOST_ENV"
    if ((quiet)); then log "was not up; cleaned up in $(since "$t0") s"; else log "down in $(since "$t0") s"; fi
}

# ---------------------------------------------------------------------------------------------------------- others

need_up() {
    if ! nspawn_pid >/dev/null || ! leader_pid >/dev/null; then
        RUNNING=${RUNNING:-$(running_name || true)}
        [[ -n $RUNNING && $RUNNING != "$NAME" ]] \
            && die "the test host $NAME is not up, $(describe_running) is: unset TESTHOST_NAME"
        die "the test host is not up (run: $0 up)"
    fi
}

cmd_exec() {
    (($#)) || die "usage: $0 exec CMD..."
    need_up
    container_exec "$(leader_pid)" "$@"
}

cmd_status() {
    local pid leader foreign
    if pid=$(nspawn_pid) && leader=$(leader_pid); then
        echo "up"
        echo "name=$NAME"
        echo "nspawn_pid=$pid"
        echo "leader_pid=$leader"
        echo "ssh=127.0.0.1:$PORT"
        echo "sim=127.0.0.1:$SIM_PORT"
        echo "state=$(container_exec "$leader" systemctl is-system-running 2>/dev/null || true)"
        echo "rootfs=$ROOTFS"
        return 0
    fi
    if foreign=$(foreign_rootfs); then
        log "the cgroup name $NAME belongs to the test host of another checkout ($foreign)"
        echo "down"
    elif [[ -n $(cg_pids) ]]; then
        echo "stale (processes left in our cgroups; run down)"
    else
        echo "down"
    fi
    return 3
}

cmd_ssh_config() {
    local out=${1:?usage: $0 ssh-config PATH} port kh k
    [[ -d $ROOTFS ]] || die "no rootfs: run build first"
    ensure_key
    port=$PORT
    kh=$KEYS/known_hosts
    local tmp; tmp=$(mktemp "$kh.XXXXXX")   # concurrent callers each write their own, then rename
    for k in "$ROOTFS"/etc/ssh/ssh_host_*_key.pub; do
        echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$k")" >> "$tmp"
    done
    chmod 644 "$tmp"; mv -f "$tmp" "$kh"
    mkdir -p "$(dirname "$out")"
    cat > "$out" <<EOF
# written by .ci/testhost.sh ssh-config; the test host $NAME from $ROOTFS
Host testhost testhost-tester
    HostName 127.0.0.1
    Port $port
    IdentityFile $KEYS/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile $kh
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    CheckHostIP no
    BatchMode yes
    PasswordAuthentication no
    KbdInteractiveAuthentication no
    ControlMaster no
    ControlPath none
    LogLevel ERROR

Host testhost
    User root

Host testhost-tester
    User tester
EOF
    log "wrote $out (known hosts: $kh)"
}

#: the simulator's modules: the directory runs alone on the test host (stdlib only)
SIM_FILES=(server.py args.py http_api.py gpus.py nvidia_smi.py scenarios.py nodes.py releases.py __init__.py)

cmd_install_sim() {
    local src=${1:?usage: $0 install-sim SRC_DIR} leader f scale=${TESTHOST_SIM_TIME_SCALE:-0.1}
    for f in "${SIM_FILES[@]}"; do [[ -f $src/$f ]] || die "$src/$f missing"; done
    [[ $scale =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "TESTHOST_SIM_TIME_SCALE=$scale is not a number"
    [[ $SIM_PORT != "$PORT" ]] || die "TESTHOST_SIM_PORT and TESTHOST_SSH_PORT are both $PORT"
    need_up
    leader=$(leader_pid)
    # through the container (not the rootfs directory), so it also works with --volatile=overlay
    container_exec "$leader" sh -c 'rm -rf /opt/bringup-sim && mkdir -p /opt/bringup-sim /var/lib/bringup-sim && chmod 755 /var/lib/bringup-sim'
    tar -C "$src" -cf - --owner=0 --group=0 "${SIM_FILES[@]}" \
        | container_exec "$leader" tar -C /opt/bringup-sim -xf -
    container_exec "$leader" sh -c 'cat > /usr/local/bin/nvidia-smi && chmod 755 /usr/local/bin/nvidia-smi' <<'EOF'
#!/bin/sh
# simulated nvidia-smi (bringup test host)
exec python3 /opt/bringup-sim/nvidia_smi.py --sim-state-dir /var/lib/bringup-sim "$@"
EOF
    sed "s/@TIME_SCALE@/$scale/; s/@SIM_PORT@/$SIM_PORT/" "$UNITS/sglang-sim.service" \
        | container_exec "$leader" sh -c 'cat > /etc/systemd/system/sglang-sim.service'
    container_exec "$leader" systemctl daemon-reload
    # the record says which port the installed unit uses
    [[ $REC_NAME == "$NAME" && $REC_SIM_PORT != "$SIM_PORT" ]] && write_record "$NAME" "${REC_PORT:-$PORT}" "$SIM_PORT"
    log "installed the sim into /opt/bringup-sim, /usr/local/bin/nvidia-smi and sglang-sim.service" \
        "(127.0.0.1:$SIM_PORT, time scale $scale; not started)"
}

usage() {
    sed -n '2,/^set /p' "${BASH_SOURCE[0]}" | sed -n 's/^# \{0,1\}//p' >&2
    exit 2
}

# one mutating command at a time per checkout
lock() { mkdir -p "$TH"; exec 9>"$TH/.lock"; flock -w 120 9 || die "another testhost.sh command holds $TH/.lock"; }

cmd=${1:-}; shift || true
valid_name "${ENV_NAME:-$DEFAULT_NAME}" \
    || die "TESTHOST_NAME=$ENV_NAME is not a machine name (letters, digits, '_', '.', '-'; 64 at most)"
for v in TESTHOST_SSH_PORT TESTHOST_SIM_PORT; do
    [[ -z ${!v:-} ]] || valid_port "${!v}" || die "$v=${!v} is not a port number"
done
case $cmd in
    build|up|down|install-sim|pack|clean) lock ;;
esac
# after the lock: the record and the running host are what the previous command left
read_record
NAME=${ENV_NAME:-${REC_NAME:-$DEFAULT_NAME}}
PORT=${ENV_PORT:-${REC_PORT:-$DEFAULT_PORT}}
SIM_PORT=${ENV_SIM_PORT:-${REC_SIM_PORT:-$DEFAULT_SIM_PORT}}
# the host running from this rootfs (a /proc scan: only where it matters, `exec` is called a lot)
RUNNING=""
case $cmd in
    up|clean) RUNNING=$(running_name || true) ;;
    status|exec|install-sim|ssh-config|build)
        if [[ -n $ENV_NAME$ENV_PORT$ENV_SIM_PORT ]]; then RUNNING=$(running_name || true); warn_env_mismatch; fi ;;
esac
case $cmd in
    check) cmd_check ;;
    build) cmd_build ;;
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    exec) cmd_exec "$@" ;;
    install-sim) cmd_install_sim "$@" ;;
    ssh-config) cmd_ssh_config "$@" ;;
    pack) cmd_pack "$@" ;;
    clean) cmd_clean ;;
    *) usage ;;
esac
