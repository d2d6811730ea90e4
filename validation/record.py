"""Record the validation corpus: each setting of its programs, several times, on this machine's CPU.

    python validation/record.py [--runs 8] [--only NAME ...]

Each run is `daydream record` of a fresh process (warm-up steps, then the recorded steps) into
validation/traces/<setting>/run<k>/ (rank0.json.gz and its sidecar), or the program profiling itself. Four programs:
examples/mlp.py (the settings the models were developed on), examples/transformer.py (`transformer/...`, recorded
later as a check on a program the models had not seen), and two that record themselves with torch.profiler alone
(validation/programs/lstm.py and convnet.py, `lstm/...` and `convnet/...`: no sidecar, no module ranges). The cases
in validation/cases.toml pair a BEFORE setting with the AFTER setting of one change; `daydream validate` predicts
each AFTER from a BEFORE trace and compares with the AFTER runs. The runs are taken round-robin over the settings,
so that a slow spell of the machine falls on every setting rather than on one.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
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
}
WARMUP = 3


def record(name: str, run: int, out: Path) -> None:
    target = out / name / f"run{run}"
    if target.exists():
        shutil.rmtree(target)
    model, extra, steps = SETTINGS[name]
    if steps is None:  # the program profiles itself, as a user's program would
        target.mkdir(parents=True)
        cmd = [sys.executable, *model, *extra, "--out", str(target / "rank0.json.gz")]
    else:
        program = [sys.executable, *model, *extra, "--steps", str(WARMUP + steps + 2)]
        cmd = [sys.executable, "-m", "daydream", "record", "--warmup", str(WARMUP), "--steps", str(steps),
               "--out", str(target), "--", *program]  # fmt: skip
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    print(f"recorded {name} run {run}: {target}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=8, help="runs of each setting (default: %(default)s)")
    p.add_argument("--only", nargs="+", choices=sorted(SETTINGS), help="record these settings only")
    p.add_argument("--out", type=Path, default=HERE / "traces", help="output folder (default: validation/traces)")
    args = p.parse_args(argv)
    names = args.only or list(SETTINGS)
    for run in range(1, args.runs + 1):
        for name in names:
            record(name, run, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
