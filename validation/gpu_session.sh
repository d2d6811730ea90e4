#!/usr/bin/env bash
# One call on a lent GPU (the GPU issue's four deliverables, in the order of their value), within SECONDS:
#
#   bash validation/gpu_session.sh OUT [SECONDS]
#
# 1. on an H100 only: the device-swap pair, the corpus's three GPU programs at their base settings (five runs each,
#    round-robin, as the H200 corpus was recorded; fewer if the time runs short);
# 2. the hybrid DLRM (tables on the CPU) and the same with the tables on the GPU, at the issue's sizes and larger;
# 3. the MLP under CUDA graphs, beside the eager MLP on the same machine;
# 4. the kernel tables (bench/calibrate_gpu.py) in the time left.
# The wheels of msgspec, lark and google-re2 travel in .whl/ (see validation/record_gpu.sh). Everything is packed into
# OUT/session.tar.* (15 MiB pieces: cat them, then tar -x) after each step, so what is done comes back even if a
# later step overruns.
set -u
out=${1:?OUT}
total=${2:-520}
t0=$(date +%s)
left() { echo $((total - ($(date +%s) - t0))); }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
work=/tmp/gpu_session
rm -rf "$work" && mkdir -p "$work/traces" "$work/calib"
pack() {
    rm -f "$out"/session.tar.*
    tar -cf - -C "$work" . | split -b 15m - "$out/session.tar."
    echo "packed at $(($(date +%s) - t0)) s: $(du -sh "$work" | cut -f1)"
}
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
    python3 -c 'import torch, platform; print("torch", torch.__version__, "cuda", torch.version.cuda,
        "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name(), "python", platform.python_version(),
        "cpus", __import__("os").cpu_count())'
    lscpu | grep -E "Model name|^CPU\(s\)"
} 2>&1 | tee "$work/machine.txt"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
rec() { timeout $(($(left) > 30 ? $(left) - 20 : 10)) python3 validation/record.py --run-timeout 100 --keep-going \
    --out "$work/traces" "$@" 2>&1 | tee -a "$work/record.log"; }
step() { echo "== $1 at $(($(date +%s) - t0)) s ($(left) s left)" | tee -a "$work/record.log"; }
if [[ $gpu == *H100* ]]; then
    step "swap pair"
    rec --only gpu/transformer/base gpu/mlp/base gpu/resnet/base --runs 5 --deadline $(($(left) * 36 / 100))
    pack
    step "dlrm"
    rec --only gpu/dlrm/hybrid gpu/dlrm/resident gpu/dlrm_large/hybrid gpu/dlrm_large/resident --runs 1
    pack
    step "cuda graphs"
    rec --only gpu/mlp/cuda_graphs --runs 3 --deadline 45
else
    step "dlrm"
    rec --only gpu/dlrm/hybrid gpu/dlrm/resident gpu/dlrm_large/hybrid gpu/dlrm_large/resident --runs 1
    pack
    step "cuda graphs"
    rec --only gpu/mlp/base gpu/mlp/cuda_graphs --runs 3 --deadline 80
fi
pack
step "calibration"
python3 bench/calibrate_gpu.py measure --shapes .whl/shapes.json --out "$work/calib" --budget $(($(left) - 25)) \
    2>&1 | tee "$work/calib.log"
step "done"
cp "$work/record.log" "$work/calib.log" "$out/" 2>/dev/null
pack
ls -la "$out"
