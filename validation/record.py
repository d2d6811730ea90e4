"""Record the validation corpus: each setting of its programs, several times, on this machine's CPU or a GPU.

    python validation/record.py [--runs 8] [--only NAME ...]
    python validation/record.py --gpu --runs 5 [--deadline S] [--keep-going]   (validation/record_gpu.sh)
    python validation/record.py --memory --runs 3                            (the memory pairs, on the CPU)

Each run is `daydream record` of a fresh process (warm-up steps, then the recorded steps) into
validation/traces/<setting>/run<k>/ (rank0.json.gz and its sidecar), or the program profiling itself. Four programs:
examples/mlp.py (the settings the models were developed on), examples/transformer.py (`transformer/...`, recorded
later as a check on a program the models had not seen), and two that record themselves with torch.profiler alone
(validation/programs/lstm.py and convnet.py, `lstm/...` and `convnet/...`: no sidecar, no module ranges). The cases
in validation/cases.toml pair a BEFORE setting with the AFTER setting of one change; `daydream validate` predicts
each AFTER from a BEFORE trace and compares with the AFTER runs. The runs are taken round-robin over the settings,
so that a slow spell of the machine falls on every setting rather than on one.

The memory settings (`memory/...`, chosen with --memory) are recorded with `daydream record --profile-memory`: their
traces hold the allocator's `[memory]` events (every allocation and free with the running "Total Allocated"), so that
a predicted peak after a change can be compared with the peak measured after it (validation/cases.toml, its [[memory_case]] tables; the
measured peaks: bench/memory_pairs.py). examples/mlp.py's base, batch x2 (`memory/batch256`), activation
checkpointing (`memory/checkpoint`), gradient accumulation of the same samples per step (`memory/batch64acc2`: 2
micro-batches of 64) and of the same micro-batch (`memory/accumulate2`: 2 of 128), SGD with momentum instead of Adam
(`memory/sgd`) and bf16 autocast on the CPU (`memory/amp`); examples/transformer.py's base, batch x2, checkpoint and
accumulation (`memory/transformer/...`) as held-out checks. Two recorded steps each, to keep the traces small.

On a GPU the same pairs (`gpu/memory/...`: the transformer, the MLP and ResNet-50 at their base settings, with
activation checkpointing, batch x2 and bf16 autocast) are recorded with --profile-memory too, and each run's sidecar
keeps the caching allocator's own peak over the recorded steps (`device_memory`: torch.cuda.max_memory_allocated and
max_memory_reserved), the number a predicted peak is checked against. `--smoke` runs any settings on the CPU at a
tiny size: a check of a lent GPU's script (validation/gpu_session.sh) before the lease, not a measurement.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Many small layers: the step is a few hundred CPU ops, long enough to time (about 12 ms unprofiled on 2 cores) and
# short enough to record quickly; the for-loop Adam runs a dozen ops per parameter.
MLP = ["examples/mlp.py", "--device", "cpu", "--width", "256", "--depth", "16", "--batch", "128", "--optimizer", "adam"]
# A second program, not the one the models were developed on: a 4-layer encoder (attention, LayerNorm, GELU, an
# MLM head over the vocabulary), about 65 ms a step on 2 cores; two recorded steps keep its traces small.
TRANSFORMER = ["examples/transformer.py", "--device", "cpu", "--batch", "16", "--layers", "4", "--optimizer", "adam"]
# An LSTM language model that records itself with torch.profiler (three steps); about 120 ms a step on 2 cores.
LSTM = ["validation/programs/lstm.py"]
# A ConvNet (convolutions, BatchNorm, max-pooling) that records itself likewise; about 80 ms a step on 2 cores.
CONVNET = ["validation/programs/convnet.py"]
# Tensor parallelism on the CPU: the encoder split Megatron's way over 2 gloo processes (one thread each), recording
# itself with daydream's recorder (rank0 and rank1 files), against the unsplit model in one process of one thread
TP_TRANSFORMER = ["validation/programs/tp_transformer.py"]
# Pipeline parallelism on the CPU: the same encoder in 2 stages over 2 gloo processes (GPipe, 4 micro-batches), its
# BEFORE the unsplit model recorded again beside it
PP_TRANSFORMER = ["validation/programs/pp_transformer.py"]
TRANSFORMER_GPU = [
    "examples/transformer.py", "--device", "cuda", "--batch", "16", "--layers", "4", "--hidden", "1024",
    "--heads", "16", "--seq", "256", "--vocab", "8192", "--optimizer", "adam",
]  # fmt: skip
MLP_GPU = ["examples/mlp.py", "--device", "cuda", "--width", "1024", "--depth", "16", "--batch", "512",
           "--optimizer", "adam"]  # fmt: skip
RESNET_GPU = ["examples/cnn.py", "--device", "cuda", "--depth", "50", "--width", "64", "--image", "96",
              "--batch", "64"]  # fmt: skip
# A mini-DLRM with the tables on the CPU (hybrid training, as FAE's baseline) or on the GPU: the default sizes
# (8 tables of 10,000 rows, dim 16, batch 128) and a larger one (26 tables of 200,000 rows, dim 64, pooling 20, batch
# 2048, sparse gradients) whose CPU lookups take a share of the step
DLRM_GPU = ["examples/dlrm.py", "--device", "cuda", "--zipf", "1.05"]
DLRM_LARGE_GPU = [*DLRM_GPU, "--tables", "26", "--rows", "200000", "--dim", "64", "--pooling", "20", "--batch", "2048",
                  "--bottom", "512,256", "--top", "512,256", "--sparse"]  # fmt: skip
# name -> (program, its arguments for the setting, recorded steps; None: the program records itself)
SETTINGS: dict[str, tuple[list[str], list[str], int | None]] = {
    "base": (MLP, [], 4),
    "batch256": (MLP, ["--batch", "256"], 4),
    "foreach": (MLP, ["--optimizer", "adam-foreach"], 4),
    # fused=True came later, when the machine ran slower than when base/ was recorded: its BEFORE is recorded again
    # beside it, round-robin, as every pair is
    "fusedpair/base": (MLP, [], 4),
    "fusedpair/fused": (MLP, ["--optimizer", "adam-fused"], 4),
    "checkpoint": (MLP, ["--checkpoint"], 4),
    "accumulate2": (MLP, ["--accumulate", "2"], 4),
    "threads1": (MLP, ["--threads", "1"], 4),
    # 40 us of CPU per sample: 5 ms of loading per step, on the training thread or in two worker processes
    "loader0": (MLP, ["--transform-us", "40"], 4),
    "loader2": (MLP, ["--transform-us", "40", "--workers", "2"], 4),
    "transformer/base": (TRANSFORMER, [], 2),
    "transformer/batch32": (TRANSFORMER, ["--batch", "32"], 2),
    "transformer/foreach": (TRANSFORMER, ["--optimizer", "adam-foreach"], 2),
    "transformer/fused": (TRANSFORMER, ["--optimizer", "adam-fused"], 2),
    "transformer/checkpoint": (TRANSFORMER, ["--checkpoint"], 2),
    "transformer/accumulate2": (TRANSFORMER, ["--accumulate", "2"], 2),
    "transformer/threads1": (TRANSFORMER, ["--threads", "1"], 2),
    "lstm/base": (LSTM, [], None),
    "lstm/batch64": (LSTM, ["--batch", "64"], None),
    "lstm/foreach": (LSTM, ["--foreach"], None),
    "lstm/fused": (LSTM, ["--fused"], None),
    "lstm/threads1": (LSTM, ["--threads", "1"], None),
    "lstm/accumulate2": (LSTM, ["--accumulate", "2"], None),
    "convnet/base": (CONVNET, [], None),
    "convnet/batch64": (CONVNET, ["--batch", "64"], None),
    "convnet/foreach": (CONVNET, ["--foreach"], None),
    "convnet/fused": (CONVNET, ["--fused"], None),
    "convnet/threads1": (CONVNET, ["--threads", "1"], None),
    "convnet/accumulate2": (CONVNET, ["--accumulate", "2"], None),
    "convnet/checkpoint": (CONVNET, ["--checkpoint"], None),
    "tp/base": (TP_TRANSFORMER, ["--tp", "1"], None),
    "tp/tp2": (TP_TRANSFORMER, ["--tp", "2"], None),
    "pp/base": (TP_TRANSFORMER, ["--tp", "1"], None),
    "pp/pp2": (PP_TRANSFORMER, ["--micro-batches", "4"], None),
    "dp/base": (TP_TRANSFORMER, ["--tp", "1"], None),
    "dp/dp2": (TP_TRANSFORMER, ["--tp", "1", "--dp", "2"], None),
    # On a GPU (validation/record_gpu.sh runs these on a lent H100/H200). A transformer encoder whose fp32 GEMMs
    # (~1.4 TFLOP a step) make it GPU-bound, so that precision, batch and recomputation move the step; an MLP of
    # small kernels whose step is bound by the CPU launching them (optimizer for-loop, CUDA graphs); a ResNet-50
    # (cuDNN convolutions, TF32 by PyTorch's default) between the two.
    "gpu/transformer/base": (TRANSFORMER_GPU, [], 3),
    "gpu/transformer/batch32": (TRANSFORMER_GPU, ["--batch", "32"], 3),
    "gpu/transformer/amp": (TRANSFORMER_GPU, ["--amp", "bf16"], 3),
    "gpu/transformer/fused": (TRANSFORMER_GPU, ["--optimizer", "adam-fused"], 3),
    "gpu/transformer/checkpoint": (TRANSFORMER_GPU, ["--checkpoint"], 3),
    "gpu/mlp/base": (MLP_GPU, [], 3),
    "gpu/mlp/foreach": (MLP_GPU, ["--optimizer", "adam-foreach"], 3),
    # not in the corpus yet: recorded with 3 warm-up steps, the graph's capture (after the program's own 3 eager
    # steps) and its re-instantiation at the first replay under the profiler fell in the recorded steps (26 and
    # 12 ms against 3.5 ms for the steady step); WARMUP_OF gives it room, and more steps keep the median steady
    "gpu/mlp/cuda_graphs": (MLP_GPU, ["--cuda-graphs"], 5),
    "gpu/resnet/base": (RESNET_GPU, [], 3),
    "gpu/resnet/amp": (RESNET_GPU, ["--amp", "bf16"], 3),
    "gpu/resnet/batch128": (RESNET_GPU, ["--batch", "128"], 3),
    "gpu/dlrm/hybrid": (DLRM_GPU, ["--tables-on-cpu"], 3),
    "gpu/dlrm/resident": (DLRM_GPU, [], 3),
    "gpu/dlrm_large/hybrid": (DLRM_LARGE_GPU, ["--tables-on-cpu"], 3),
    "gpu/dlrm_large/resident": (DLRM_LARGE_GPU, [], 3),
    # Kernel fusion (the GPU issue's second lease): the transformer and the MLP under torch.compile, compiled in the
    # warm-up steps (WARMUP_OF), beside their eager runs (gpu/transformer/base, gpu/mlp/base); reduce-overhead adds
    # CUDA graphs of the compiled code (the ledger's kernel_fusion + cuda_graphs)
    "gpu/transformer/compile": (TRANSFORMER_GPU, ["--compile"], 3),
    "gpu/transformer/compile_ro": (TRANSFORMER_GPU, ["--compile", "--compile-mode", "reduce-overhead"], 3),
    "gpu/mlp/compile": (MLP_GPU, ["--compile"], 3),
    "gpu/mlp/compile_ro": (MLP_GPU, ["--compile", "--compile-mode", "reduce-overhead"], 3),
    # GPU memory pairs: the three GPU programs recorded with --profile-memory (GPU_MEMORY_PREFIX) at their base
    # settings and with activation checkpointing, batch x2 and bf16 autocast; each run's sidecar keeps the caching
    # allocator's peak over the recorded steps (torch.cuda.max_memory_allocated/reserved), beside the [memory] events
    "gpu/memory/transformer/base": (TRANSFORMER_GPU, [], 2),
    "gpu/memory/transformer/checkpoint": (TRANSFORMER_GPU, ["--checkpoint"], 2),
    "gpu/memory/transformer/batch32": (TRANSFORMER_GPU, ["--batch", "32"], 2),
    "gpu/memory/transformer/amp": (TRANSFORMER_GPU, ["--amp", "bf16"], 2),
    "gpu/memory/mlp/base": (MLP_GPU, [], 2),
    "gpu/memory/mlp/checkpoint": (MLP_GPU, ["--checkpoint"], 2),
    "gpu/memory/mlp/batch1024": (MLP_GPU, ["--batch", "1024"], 2),
    "gpu/memory/mlp/amp": (MLP_GPU, ["--amp", "bf16"], 2),
    "gpu/memory/resnet/base": (RESNET_GPU, [], 2),
    "gpu/memory/resnet/checkpoint": (RESNET_GPU, ["--checkpoint"], 2),
    "gpu/memory/resnet/batch128": (RESNET_GPU, ["--batch", "128"], 2),
    "gpu/memory/resnet/amp": (RESNET_GPU, ["--amp", "bf16"], 2),
    # Memory: recorded with --profile-memory (MEMORY_PREFIX) into traces/memory/...; the peaks, not the times, are
    # compared, so two recorded steps are enough
    "memory/base": (MLP, [], 2),
    "memory/batch256": (MLP, ["--batch", "256"], 2),
    "memory/checkpoint": (MLP, ["--checkpoint"], 2),
    "memory/batch64acc2": (MLP, ["--batch", "64", "--accumulate", "2"], 2),
    "memory/accumulate2": (MLP, ["--accumulate", "2"], 2),
    "memory/sgd": (MLP, ["--optimizer", "sgd"], 2),
    "memory/amp": (MLP, ["--amp", "bf16"], 2),
    "memory/transformer/base": (TRANSFORMER, [], 2),
    "memory/transformer/batch32": (TRANSFORMER, ["--batch", "32"], 2),
    "memory/transformer/checkpoint": (TRANSFORMER, ["--checkpoint"], 2),
    "memory/transformer/accumulate2": (TRANSFORMER, ["--accumulate", "2"], 2),
}
MEMORY_PREFIX = "memory/"  # settings recorded with `daydream record --profile-memory`, chosen with --memory
GPU_MEMORY_PREFIX = "gpu/memory/"  # likewise, on a GPU (chosen with --gpu)
WARMUP = 3
# settings that need more warm-up steps than WARMUP: a graph's capture, torch.compile's compilation (and, in
# reduce-overhead mode, cudagraph trees' warm-up run and recording) must fall before the recorded steps
WARMUP_OF = {name: 5 for name in SETTINGS if name.endswith(("/cuda_graphs", "/compile", "/compile_ro"))}
# --smoke: the GPU settings at a tiny size on the CPU, a check of a lent GPU's script before the lease (its
# traces are not measurements): each program's sizes, given before a setting's own arguments so that those win
SMOKE = {
    "examples/transformer.py": ["--batch", "2", "--layers", "1", "--hidden", "32", "--heads", "2", "--seq", "16",
                                "--vocab", "64"],
    "examples/mlp.py": ["--width", "16", "--depth", "2", "--batch", "8"],
    "examples/cnn.py": ["--depth", "14", "--width", "4", "--image", "32", "--batch", "2"],
    "examples/dlrm.py": ["--tables", "2", "--rows", "100", "--dim", "4", "--pooling", "4", "--batch", "8",
                         "--bottom", "16", "--top", "16"],
}  # fmt: skip


def record(name: str, run: int, out: Path, timeout: float | None = None, smoke: bool = False) -> None:
    """One run of one setting; raises CalledProcessError (with the program's stderr) or TimeoutExpired."""
    target = out / name / f"run{run}"
    if target.exists():
        shutil.rmtree(target)
    model, extra, steps = SETTINGS[name]
    if smoke:
        model = [*("cpu" if a == "cuda" else a for a in model), *SMOKE.get(model[0], [])]
    if steps is None:  # the program profiles itself, as a user's program would
        target.mkdir(parents=True)
        cmd = [sys.executable, *model, *extra, "--out", str(target / "rank0.json.gz")]
    else:
        warmup = WARMUP_OF.get(name, WARMUP)
        program = [sys.executable, *model, *extra, "--steps", str(warmup + steps + 2)]
        memory = ["--profile-memory"] if name.startswith((MEMORY_PREFIX, GPU_MEMORY_PREFIX)) else []
        cmd = [sys.executable, "-m", "daydream", "record", "--warmup", str(warmup), "--steps", str(steps), *memory,
               "--out", str(target), "--", *program]  # fmt: skip
    start = time.monotonic()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=timeout)
    print(f"recorded {name} run {run} in {time.monotonic() - start:.1f} s: {target}", flush=True)


def _group(name: str) -> str:
    """Which of --gpu, --memory or neither records a setting."""
    return "gpu" if name.startswith("gpu/") else "memory" if name.startswith(MEMORY_PREFIX) else "cpu"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=8, help="runs of each setting (default: %(default)s)")
    p.add_argument("--only", nargs="+", choices=sorted(SETTINGS), help="record these settings only")
    p.add_argument("--out", type=Path, default=HERE / "traces", help="output folder (default: validation/traces)")
    p.add_argument("--first-run", type=int, default=1, metavar="K", help="number the runs from K (more runs of a setting later)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--gpu", action="store_true", help="the GPU settings (gpu/...) instead of the CPU ones")
    which.add_argument("--memory", action="store_true", help="the memory settings (memory/..., recorded with --profile-memory)")
    p.add_argument(
        "--deadline",
        type=float,
        metavar="S",
        help="start no run after S seconds (a lent GPU's time is short): the rounds done are kept whole",
    )
    p.add_argument("--run-timeout", type=float, metavar="S", help="a run that takes over S seconds fails")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="run the chosen settings on the CPU at a tiny size (a check of a GPU script, not a measurement)",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="a setting whose run fails is dropped (its error printed) and the others go on",
    )
    args = p.parse_args(argv)
    if args.runs < 1 or args.first_run < 1:
        p.error("--runs and --first-run must be at least 1")
    group = "gpu" if args.gpu else "memory" if args.memory else "cpu"
    names = args.only or [name for name in SETTINGS if _group(name) == group]
    start = time.monotonic()
    failed = False
    for run in range(args.first_run, args.first_run + args.runs):
        done = run - args.first_run
        if args.deadline is not None and done:
            # a round takes about as long as the ones before: start one only when it can end before the deadline
            per_round = (time.monotonic() - start) / done
            if time.monotonic() - start + per_round > args.deadline:
                print(f"deadline: stopped after {done} runs of each setting", flush=True)
                break
        for name in list(names):
            try:
                record(name, run, args.out, args.run_timeout, args.smoke)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
                failed = True
                why = f"exit {e.returncode}" if isinstance(e, subprocess.CalledProcessError) else "timed out"
                stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else e.stderr or ""
                print(f"FAILED {name} run {run} ({why}):\n{stderr[-3000:]}", flush=True)
                if not args.keep_going:
                    return 1
                names.remove(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
