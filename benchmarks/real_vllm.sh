#!/bin/bash
# Put carried vLLM together on a GPU machine that cannot fetch anything, then run benchmarks/real_vllm.py.
# The pieces come in .gpu-carry/<n>/ (git-ignored; one folder per transfer): vllm.tar.xz.part-NN (the wheel's
# vllm/ package with the flash-attention and MoE kernels left out, xz'd and split) and deps/*.whl (the requirements
# the machine lacks, for CPython 3.12 x86-64).
# Usage: benchmarks/real_vllm.sh probe|smoke|run   (writes under $OUT)
# Rebuild .gpu-carry here from the package index: python3 benchmarks/real_vllm_prepare.py [--have piplist.txt] (--help)
# With the device tool, one warm machine, calls back to back (each carries one folder, at most ~30 MB beside the
# tree): carry a: `probe`; carry b: `true`; carry c: `true`; carry d: `smoke && bash benchmarks/real_vllm.sh run`.
set -u
MODE=${1:-run}
C=${REAL_VLLM_CARRY:-.gpu-carry}
SITE=/tmp/real_vllm_site
BIN=/tmp/real_vllm_bin
OUT=${OUT:-/tmp/real_vllm_out}
mkdir -p "$OUT"
if [ "$MODE" = probe ]; then
  { python3 --version; which python3; nvidia-smi; df -h / /tmp; nproc; free -g
    python3 -c 'import torch;print("torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())'
    ldd --version | head -1; which gcc cc nvcc; ls "$C"/* 2>&1 | head -40; } > "$OUT/probe.txt" 2>&1
  python3 -m pip list > "$OUT/piplist.txt" 2>&1
  exit 0
fi
if [ ! -f $SITE/.done ]; then
  mkdir -p $SITE
  t=$(date +%s.%N)
  cat "$C"/*/vllm.tar.xz.part-* | xz -d -T0 | tar x -C $SITE || { echo "vllm pieces did not join"; exit 3; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE "$C"/*/deps/*.whl \
    || { echo "pip install of the carried wheels failed"; exit 3; }
  touch $SITE/.done
  echo "installed in $(python3 -c "print(round($(date +%s.%N)-$t,1))") s"
fi
export PYTHONPATH=$SITE:$PWD
mkdir -p $BIN
printf '#!%s\nimport sys\nfrom vllm.entrypoints.cli.main import main\nsys.argv[0] = "vllm"\nsys.exit(main())\n' \
  "$(command -v python3)" > $BIN/vllm
chmod +x $BIN/vllm
export PATH=$BIN:$PATH REAL_VLLM_BIN=$BIN/vllm PYTHONUNBUFFERED=1
if [ "$MODE" = smoke ]; then
  python3 - <<'PY' 2>&1 | tee "$OUT/smoke.txt"
import importlib, traceback
for m in ["vllm", "vllm._C_stable_libtorch", "vllm.entrypoints.cli.main", "vllm.entrypoints.openai.api_server",
          "vllm.v1.engine.core", "vllm.v1.worker.gpu_worker", "vllm.v1.worker.gpu_model_runner",
          "vllm.model_executor.models.llama", "vllm.v1.attention.backends.triton_attn", "tui.cli.commands",
          "tui.managers.process", "pynvml"]:
    try:
        importlib.import_module(m); print("ok  ", m)
    except BaseException as e:
        print("FAIL", m, repr(e)); traceback.print_exc(limit=-3)
PY
  timeout 60 vllm serve --help=attention 2>&1 | head -5
  exit 0
fi
python3 benchmarks/real_vllm.py 2>&1 | tee "$OUT/driver.log"
