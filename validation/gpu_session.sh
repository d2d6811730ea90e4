#!/usr/bin/env bash
# One call on a lent GPU: the GPU issue's second lease (issue 73), its steps in the order of their value, within
# SECONDS; STEP... picks some of them (a second call on the same machine: the ones the first did not reach).
#
#   bash validation/gpu_session.sh OUT [SECONDS [STEP...]]       (STEP: memory compile calls tables more)
#   FIRST_RUN=2 bash validation/gpu_session.sh OUT 200 memory    (a second call: its runs numbered from 2)
#   SMOKE=1 bash validation/gpu_session.sh OUT 600                (here, first: every step on the CPU, tiny sizes)
#
# memory:  the GPU memory pairs: the transformer, the MLP and ResNet-50 at their base settings, with activation
#          checkpointing, batch x2 and bf16 autocast, recorded with --profile-memory (3 runs, round-robin); each
#          sidecar keeps torch.cuda.max_memory_allocated/reserved over the recorded steps (device_memory);
# compile: the transformer and the MLP eager and under torch.compile (default mode, compiled in warm-up steps),
#          3 runs round-robin, then the MLP under mode="reduce-overhead" if time allows;
# calls:   a subset of the GEMM shapes timed with CUDA events and as calls (the NeuSight data set's way), side by
#          side (bench/calibrate_gpu.py --timing both);
# tables:  on an H200 only, its own kernel tables (every section), so that it no longer borrows the H100's;
# more:    on an H100 only, more runs of its one-run settings (transformer batch 32 and bf16, ResNet bf16) and the
#          DLRMs, into h100/.
# The wheels of msgspec, lark and google-re2 travel in .whl/ with shapes.json (validation/record_gpu.sh says how to
# fetch them). Traces are re-compressed as xz on the machine's cores (validation/compact_traces.py) and everything
# is packed into OUT/session.tar.* (15 MiB pieces: cat them, then tar -x) after each step, so what is done comes
# back even if a later step overruns.
set -u
out=${1:?OUT}
total=${2:-540}
steps=("${@:3}")
[[ ${#steps[@]} -eq 0 ]] && steps=(memory compile calls tables more)
t0=$(date +%s)
left() { echo $((total - ($(date +%s) - t0))); }
smoke=()
device=cuda
limit=()
if [[ ${SMOKE:-} ]]; then  # the CPU at tiny sizes: a check of this script, not a measurement
    smoke=(--smoke)
    device=cpu
    limit=(--limit 1)
    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
else
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
fi
work=/tmp/gpu_session
rm -rf "$work" && mkdir -p "$work/traces" "$work/calib"
pack() {
    python3 validation/compact_traces.py "$work/traces" --processes "$(nproc)" >/dev/null || echo "compact failed"
    rm -f "$out"/session.tar.*
    tar -cf - -C "$work" . | split -b 15m - "$out/session.tar."
    echo "packed at $(($(date +%s) - t0)) s: $(du -sh "$work" | cut -f1)"
}
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
    python3 -c 'import torch, platform; print("torch", torch.__version__, "cuda", torch.version.cuda,
        "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "python", platform.python_version(), "cpus", __import__("os").cpu_count())'
    lscpu | grep -E "Model name|^CPU\(s\)"
} 2>&1 | tee "$work/machine.txt"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo cpu)
[[ ${SMOKE:-} ]] && gpu="smoke H100 H200"
rec() { timeout $(($(left) > 30 ? $(left) - 20 : 10)) python3 validation/record.py --run-timeout 150 --keep-going \
    --first-run "${FIRST_RUN:-1}" "${smoke[@]}" "$@" 2>&1 | tee -a "$work/record.log"; }
step() { echo "== $1 at $(($(date +%s) - t0)) s ($(left) s left)" | tee -a "$work/record.log"; }
wants() { [[ " ${steps[*]} " == *" $1 "* ]]; }
if wants memory; then
    step "memory pairs"
    m=gpu/memory
    rec --out "$work/traces" --runs 3 --deadline $(($(left) * 45 / 100)) --only \
        $m/transformer/base $m/transformer/checkpoint $m/transformer/batch32 $m/transformer/amp \
        $m/mlp/base $m/mlp/checkpoint $m/mlp/batch1024 $m/mlp/amp \
        $m/resnet/base $m/resnet/checkpoint $m/resnet/batch128 $m/resnet/amp
    pack
fi
if wants compile; then
    step "torch.compile pair"
    rec --out "$work/traces" --runs 3 --deadline $(($(left) * 55 / 100)) --only \
        gpu/transformer/base gpu/transformer/compile gpu/mlp/base gpu/mlp/compile
    (($(left) > 150)) && rec --out "$work/traces" --runs 2 --deadline 60 --only gpu/mlp/compile_ro
    pack
fi
if wants calls && (($(left) > 60)); then
    step "GEMMs as events and as calls"
    python3 bench/calibrate_gpu.py measure --shapes .whl/shapes.json --out "$work/calib/calls" --device $device \
        --sections gemm --timing both --limit "${limit[1]:-200}" --budget $(($(left) < 170 ? $(left) - 50 : 120)) \
        2>&1 | tee "$work/calls.log"
    pack
fi
if wants tables && [[ $gpu == *H200* ]] && (($(left) > 60)); then
    step "the H200's tables"
    python3 bench/calibrate_gpu.py measure --shapes .whl/shapes.json --out "$work/calib/h200" --device $device \
        "${limit[@]}" --budget $(($(left) - 40)) 2>&1 | tee "$work/tables.log"
    pack
fi
if wants more && [[ $gpu == *H100* ]] && (($(left) > 60)); then
    step "more runs on the H100"
    rec --out "$work/traces/h100" --runs 2 --first-run 2 --deadline $(($(left) * 60 / 100)) --only \
        gpu/transformer/batch32 gpu/transformer/amp gpu/resnet/amp
    rec --out "$work/traces/h100" --runs 1 --first-run 3 --deadline 20 --only \
        gpu/dlrm/hybrid gpu/dlrm/resident gpu/dlrm_large/hybrid gpu/dlrm_large/resident
fi
step "done"
cp "$work/record.log" "$out/" 2>/dev/null
pack
ls -la "$out"
failed=$(grep -c "^FAILED" "$work/record.log")
echo "$failed runs failed (record.log)"
[[ ${SMOKE:-} && $failed -gt 0 ]] && exit 1  # on the CPU only the CUDA-only settings may not run: none here
exit 0
