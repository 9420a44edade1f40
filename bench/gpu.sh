#!/usr/bin/env bash
# Every GPU measurement of the results page in one command, on a machine with one CUDA GPU,
# PyTorch and Hugging Face transformers installed (the rest of aiayn's needs may come as
# wheels in .whl/, installed into a folder of their own when present: for a machine without
# a network). Each step has a time limit and writes its output into RESULTS_DIR (default
# gpu-results/; $OUT where that is set), so a failing step costs only itself.
#
#   bash bench/gpu.sh [RESULTS_DIR [STEP ...]]
#
# STEP: tests, train, compiled, decode-base, decode-big, projection (default: all, about 15
# minutes on an H100, most of it processes starting and compiling: split them over calls
# where one call is limited).
# Steps: the CUDA tests (pytest -m gpu); decoding against Hugging Face generate and
# CTranslate2 (bench/gpu_decode.py); training steps on WMT-length batches against
# torch.nn.Transformer and Hugging Face Marian, eager and compiled (bench/train.py
# --shape wmt); the WMT14 base recipe's pace projected to 100k updates
# (bench/wmt_projection.py, on the dataset in .gpu/wmt_data.tgz when present).
set -uo pipefail
cd "$(dirname "$0")/.."
results="${1:-${OUT:-gpu-results}}"
shift || true
steps="${*:-tests train compiled decode-base decode-big projection}"
mkdir -p "$results"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/aiayn-site .whl/*.whl
    export PYTHONPATH="$PYTHONPATH:/tmp/aiayn-site"
fi

# CTranslate2's wheels load cuBLAS 12 by name; where only cuBLAS 13 is installed (PyTorch's
# CUDA 13 builds), offer it under that name (the functions CTranslate2 calls keep their ABI).
shim=/tmp/aiayn-cublas-shim
mkdir -p "$shim"
python3 - "$shim" <<'EOF' || true
import ctypes.util, os, sys, torch
torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")
libs = {line.split()[-1] for line in open("/proc/self/maps") if "libcublas" in line}
for lib in libs:
    name = os.path.basename(lib).split(".so")[0]
    if not os.path.exists(f"{sys.argv[1]}/{name}.so.12") and ".so.12" not in lib:
        os.symlink(lib, f"{sys.argv[1]}/{name}.so.12")
print("cuBLAS:", *sorted(libs))
EOF
export LD_LIBRARY_PATH="$shim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

step() {  # step NAME SECONDS COMMAND...: run it with a time limit, its output into NAME.txt
    local name=$1 limit=$2
    shift 2
    [[ " $steps " == *" $name "* ]] || return 0
    echo "== $name ($(date -u +%T), limit ${limit}s): $*"
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$results/$name.txt"
    echo "== $name: exit ${PIPESTATUS[0]}"
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
    python3 -c "import ctranslate2; print('ctranslate2', ctranslate2.__version__, 'CUDA devices', ctranslate2.get_cuda_device_count())"
} 2>&1 | tee "$results/environment.txt"

data=""
if [ -f .gpu/wmt_data.tgz ]; then
    mkdir -p /tmp/aiayn-wmt && tar -xzf .gpu/wmt_data.tgz -C /tmp/aiayn-wmt && data=/tmp/aiayn-wmt/wmt_data
fi

step tests 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_cuda.py
step train 180 python3 bench/train.py --device cuda --shape wmt --sizes base big --steps 6 --trace "$results/trace.txt"
step compiled 360 python3 bench/train.py --device cuda --shape wmt --sizes big --steps 6 --systems --compiled aiayn nn.Transformer
step decode-base 180 python3 bench/gpu_decode.py --sizes base --batches 64 1024 --repeats 2
step decode-big 240 python3 bench/gpu_decode.py --sizes big --batches 64 1024 --repeats 2
if [ -n "$data" ]; then
    step projection 240 python3 bench/wmt_projection.py --data "$data" --updates 60
fi
