#!/usr/bin/env bash
# The simulated server's image, made locally, to try bringup's container deployments without a GPU host: this
# checkout's tui/sim (the standard library only) on a Python base image, as .ci/containers.sh makes it for the tests
# (which build their base from a debootstrapped rootfs instead, having no registry).
#
#   bash deploy/sim-image.sh [docker|podman]
#
# Without an argument: docker when its daemon answers, else podman. Needs that CLI (docker with its daemon running:
# this script starts none) and the base image: pulled from Docker Hub unless it is there already. Then it prints a
# deployment of the image to add to your config file, with this checkout's venv Python as the simulated nvidia-smi.
#
# Environment: SIM_IMAGE, the image made (default bringup/sim:latest); SIM_BASE, the base image, any with python3
# (3.11 or later) on its PATH (default docker.io/library/python:3.11-slim); SIM_PORT, the port of the deployment
# printed (default 31721).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE=${SIM_IMAGE:-bringup/sim:latest}
BASE=${SIM_BASE:-docker.io/library/python:3.11-slim}
PORT=${SIM_PORT:-31721}

die() { printf 'sim-image: %s\n' "$*" >&2; exit 1; }

ENGINE=${1:-}
if [[ -z $ENGINE ]]; then
    if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
        ENGINE=docker
    elif command -v podman >/dev/null 2>&1; then
        ENGINE=podman
    else
        die "needs docker (its daemon running) or podman; neither answers here"
    fi
fi
case $ENGINE in
    docker | podman) ;;
    *) die "usage: $0 [docker|podman] (not '$ENGINE')" ;;
esac
command -v "$ENGINE" >/dev/null 2>&1 || die "$ENGINE is not installed (not on PATH)"
[[ -f $REPO/tui/sim/__main__.py ]] || die "$REPO/tui/sim not found: run this script from a bringup checkout"

# the build context: the package's __init__ and the simulator, nothing else (no venv, no caches)
CTX=$(mktemp -d)
trap 'rm -rf "$CTX"' EXIT
mkdir -p "$CTX/tui"
cp "$REPO/tui/__init__.py" "$CTX/tui/"
cp -r "$REPO/tui/sim" "$CTX/tui/sim"
find "$CTX" -name __pycache__ -prune -exec rm -rf {} +
cat >"$CTX/Dockerfile" <<EOF
FROM $BASE
COPY tui /opt/bringup/tui
ENV PYTHONPATH=/opt/bringup PYTHONUNBUFFERED=1
CMD ["python3", "-m", "tui.sim"]
EOF

printf 'sim-image: building %s with %s (base %s)\n' "$IMAGE" "$ENGINE" "$BASE" >&2
"$ENGINE" build -q -t "$IMAGE" "$CTX" >/dev/null || die "$ENGINE build failed (is $BASE reachable, or set SIM_BASE to a local image with python3?)"

# the deployment: the simulator writes its GPUs' state to a host directory the simulated nvidia-smi reads; the
# container shares the host's PID namespace so that GPU memory is attributed to the container's processes
PY=$REPO/.venv/bin/python
[[ -x $PY ]] || PY=/path/to/bringup/.venv/bin/python
SIMGPU=/tmp/bringup-sim-container
# podman refuses --init in the host's PID namespace (the server is no PID 1 there and needs none)
INIT='"--init", '
[[ $ENGINE == podman ]] && INIT=''
printf 'sim-image: made %s; a deployment of it, for your config.toml (mkdir -p %s first):\n\n' "$IMAGE" "$SIMGPU" >&2
cat <<EOF
[hosts.sim-container]
nvidia_smi = ["$PY", "-m", "tui.sim.nvidia_smi", "--sim-state-dir", "$SIMGPU"]

[deployments.sim-container]
host = "sim-container"
manager = "docker"
engine = "$ENGINE"
container = "bringup-sim"
image = "$IMAGE"
run_args = ["--pid", "host", $INIT"-p", "127.0.0.1:$PORT:$PORT", "-v", "$SIMGPU:/simgpu"]
command = ["python3", "-u", "-m", "tui.sim", "--host", "0.0.0.0", "--port", "$PORT", "--tp-size", "8",
           "--enable-metrics", "--sim-state-dir", "/simgpu", "--time-scale", "0.1"]
endpoint = "http://127.0.0.1:$PORT"
EOF
