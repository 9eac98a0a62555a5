#!/usr/bin/env bash
# A real Docker daemon for tests/e2e/test_containers.py, on machines where nothing starts one (systemd is not PID 1)
# and no image registry is reachable: dockerd is started by hand with its own data root, exec root, pid file and
# socket under ./.containers/ (git-ignored), and the simulated server's image is built from a Debian rootfs made
# with debootstrap and imported with `docker import` (the rootfs tarball is cached under $HOME/.cache).
# Podman (no daemon) gets its own store, network directory and containers.conf under the same directory (the
# ulimits and cgroup manager these machines need: root lacks CAP_SYS_RESOURCE, systemd is not PID 1), the same
# image loaded into it from `docker save`, and podman-compose from PyPI in a virtualenv of its own.
#
#   .ci/containers.sh install | up | image | env | down | clean
#
# `env` prints the variables the tests read: DOCKER_HOST (this daemon, not the machine's), BRINGUP_DOCKER_IMAGE,
# CONTAINERS_CONF and CONTAINERS_STORAGE_CONF (podman's), and PATH with podman-compose on it.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN=${CONTAINERS_RUN:-$REPO/.containers}
SOCK=$RUN/docker.sock
SUITE=${CONTAINERS_SUITE:-bookworm}
MIRROR=${CONTAINERS_MIRROR:-http://deb.debian.org/debian}
CACHE=${CONTAINERS_CACHE:-$HOME/.cache/bringup-containers/rootfs-$SUITE-py.tar.zst}
BASE=bringup/debian-py:$SUITE
IMAGE=${BRINGUP_DOCKER_IMAGE:-bringup/sim:test}

log() { printf '[containers] %s\n' "$*" >&2; }
die() { printf '[containers] error: %s\n' "$*" >&2; exit 1; }
dk() { DOCKER_HOST=unix://$SOCK docker "$@"; }
PODMAN_COMPOSE_VERSION=${PODMAN_COMPOSE_VERSION:-1.6.0}

# a unix socket path must fit in 108 bytes: a deep checkout keeps its daemon's files in a short temp dir
if (( ${#SOCK} > 100 )); then
    RUN=/tmp/bringup-containers-$(printf '%s' "$REPO" | md5sum | cut -c1-8) SOCK=$RUN/docker.sock
fi
PM=$RUN/podman
pm() { CONTAINERS_CONF=$PM/containers.conf CONTAINERS_STORAGE_CONF=$PM/storage.conf podman "$@"; }

install() {
    local need=()
    command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
    command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
    command -v zstd >/dev/null 2>&1 || need+=(zstd)
    command -v podman >/dev/null 2>&1 || need+=(podman)
    [[ -x /usr/libexec/podman/catatonit ]] || need+=(catatonit)  # podman's --init
    if (( ${#need[@]} )); then
        log "installing ${need[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
    fi
    # podman-compose from PyPI: the apt one (1.0.3) leaves the project's network behind
    if ! [[ -x $RUN/podman-compose/bin/podman-compose ]]; then
        log "installing podman-compose $PODMAN_COMPOSE_VERSION"
        mkdir -p "$RUN"
        python3 -m venv "$RUN/podman-compose"
        "$RUN/podman-compose/bin/pip" install -q "podman-compose==$PODMAN_COMPOSE_VERSION"
    fi
    mkdir -p "$RUN/bin"
    ln -sf "$RUN/podman-compose/bin/podman-compose" "$RUN/bin/podman-compose"
}

podman_conf() {
    mkdir -p "$PM/networks"
    cat >"$PM/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$PM/events.log"
[network]
network_config_dir = "$PM/networks"
EOF
    cat >"$PM/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$PM/root"
runroot = "$PM/run"
EOF
}

running() { [[ -S $SOCK ]] && dk info >/dev/null 2>&1; }

up() {
    [[ $(id -u) == 0 ]] || die "must run as root (dockerd)"
    if running; then log "dockerd already up at $SOCK"; podman_conf; return; fi
    mkdir -p "$RUN"
    podman_conf
    log "starting dockerd (data under $RUN)"
    # setsid: the daemon outlives this script, in a session of its own that a terminal's hang-up does not reach
    setsid dockerd --data-root "$RUN/data" --exec-root "$RUN/exec" --pidfile "$RUN/dockerd.pid" \
        --host "unix://$SOCK" >"$RUN/dockerd.log" 2>&1 </dev/null &
    local i
    for i in $(seq 1 150); do
        running && { log "dockerd ready"; return; }
        sleep 0.2
    done
    tail -n 20 "$RUN/dockerd.log" >&2 || true
    die "dockerd did not answer within 30 s"
}

image() {
    running || die "dockerd is not up (.ci/containers.sh up)"
    if ! dk image inspect "$BASE" >/dev/null 2>&1; then
        if [[ ! -s $CACHE ]]; then
            local rootfs
            rootfs=$(mktemp -d)
            log "debootstrap $SUITE (minbase + python3; cached afterwards in $CACHE)"
            debootstrap --variant=minbase --include=python3 "$SUITE" "$rootfs" "$MIRROR" >"$RUN/debootstrap.log" 2>&1 \
                || { tail -n 20 "$RUN/debootstrap.log" >&2; die "debootstrap failed"; }
            mkdir -p "$(dirname "$CACHE")"
            tar -C "$rootfs" -c . | zstd -q -T0 -o "$CACHE.tmp" && mv "$CACHE.tmp" "$CACHE"
            rm -rf "$rootfs"
        fi
        log "importing $BASE"
        zstd -dc "$CACHE" | dk import -c 'CMD ["/bin/bash"]' - "$BASE" >/dev/null
    fi
    # the simulated server from this checkout (stdlib only), rebuilt every time: it changes with the code
    local ctx
    ctx=$(mktemp -d)
    mkdir -p "$ctx/tui"
    cp "$REPO/tui/__init__.py" "$ctx/tui/"
    cp -r "$REPO/tui/sim" "$ctx/tui/sim"
    find "$ctx" -name __pycache__ -prune -exec rm -rf {} +
    printf 'FROM %s\nCOPY tui /opt/bringup/tui\nENV PYTHONPATH=/opt/bringup PYTHONUNBUFFERED=1\nCMD ["python3", "-m", "tui.sim"]\n' \
        "$BASE" >"$ctx/Dockerfile"
    log "building $IMAGE"
    dk build -q -t "$IMAGE" "$ctx" >/dev/null
    rm -rf "$ctx"
    if command -v podman >/dev/null 2>&1; then
        log "loading $IMAGE into podman"
        dk save "$IMAGE" | pm load -q >/dev/null
    fi
}

env_() {
    printf 'export DOCKER_HOST=unix://%s\nexport BRINGUP_DOCKER_IMAGE=%s\n' "$SOCK" "$IMAGE"
    printf 'export CONTAINERS_CONF=%s\nexport CONTAINERS_STORAGE_CONF=%s\n' "$PM/containers.conf" "$PM/storage.conf"
    printf 'export PATH=%s:"$PATH"\n' "$RUN/bin"
}

down() {
    # podman's containers (no daemon: each has its conmon, which `rm -f` ends), then its mounts
    if command -v podman >/dev/null 2>&1 && [[ -s $PM/storage.conf ]]; then
        pm rm -af -t 1 >/dev/null 2>&1 || true
        pm unmount -a >/dev/null 2>&1 || true
    fi
    local pid
    pid=$(cat "$RUN/dockerd.pid" 2>/dev/null) || { log "dockerd not running"; return 0; }
    if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == dockerd ]]; then
        # the tests' containers go first: a daemon stopped under running ones leaves their shims behind
        running && dk ps -aq | xargs -r env DOCKER_HOST="unix://$SOCK" docker rm -f >/dev/null 2>&1 || true
        kill -TERM "$pid"
        local i
        for i in $(seq 1 100); do
            [[ -e /proc/$pid ]] || break
            sleep 0.1
        done
        [[ -e /proc/$pid ]] && kill -KILL "$pid"
    fi
    rm -f "$RUN/dockerd.pid" "$SOCK"
    log "dockerd stopped"
}

clean() { down; rm -rf "$RUN"; }

case ${1:-} in
    install) install ;;
    up) up ;;
    image) image ;;
    env) env_ ;;
    down) down ;;
    clean) clean ;;
    *) die "usage: $0 install | up | image | env | down | clean" ;;
esac
