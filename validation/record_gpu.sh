#!/usr/bin/env bash
# Record the GPU settings of validation/record.py on a lent GPU machine and pack the traces for the trip back.
#
#   bash validation/record_gpu.sh OUT [DEADLINE_S [RECORD.PY OPTIONS...]]
#
# The machine has PyTorch but not daydream's other dependencies, and no package index: wheels of msgspec, lark and
# google-re2 for its Python travel in .whl/ (ignored by git), fetched beforehand with
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl msgspec lark==1.2.2 google-re2
# Five runs of each setting, round-robin, none
# started after DEADLINE_S seconds; the traces go to OUT/gpu.tar.* (15 MiB pieces: cat them, then tar -x), the
# machine's facts to the log. A run takes 10-18 s on an H200's host (process start, CUDA, cuDNN autotuning in the
# warm-up steps, the profiler), so 11 settings x 5 runs outlast one call: the corpus's were recorded in three calls
# on one machine, the first with the defaults (2 runs of each), then `--only SETTING... --runs 3 --first-run 3`.
set -u
out=${1:?OUT}
deadline=${2:-470}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
work=/tmp/gpu_traces
rm -rf "$work" && mkdir -p "$work"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
    python3 -c 'import torch, platform; print("torch", torch.__version__, "cuda", torch.version.cuda,
        torch.cuda.get_device_name(), "python", platform.python_version(), "cpus", __import__("os").cpu_count())'
    lscpu | grep -E "Model name|^CPU\(s\)"
} | tee "$work/machine.txt"
timeout $((deadline + 60)) python3 validation/record.py --gpu --runs 5 --deadline "$deadline" --run-timeout 120 \
    --keep-going --out "$work/traces" "${@:3}" \
    2>&1 | tee "$work/record.log"
du -sh "$work"
tar -cf /tmp/gpu_traces.tar -C "$work" . && split -b 15m /tmp/gpu_traces.tar "$out/gpu.tar."
ls -la "$out"
