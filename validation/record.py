"""Record the validation corpus: each setting of examples/mlp.py, several times, on this machine's CPU.

    python validation/record.py [--runs 5] [--only NAME ...]

Each run is `daydream record` of a fresh process (warm-up steps, then the recorded steps) into
validation/traces/<setting>/run<k>/ (rank0.json.gz and its sidecar). The cases in validation/cases.toml pair a
BEFORE setting with the AFTER setting of one change; `daydream validate` predicts each AFTER from a BEFORE trace and
compares with the AFTER runs. The runs are taken round-robin over the settings, so that a slow spell of the machine
falls on every setting rather than on one.
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
MODEL = ["examples/mlp.py", "--device", "cpu", "--width", "256", "--depth", "16", "--batch", "128", "--optimizer", "adam"]
SETTINGS: dict[str, list[str]] = {
    "base": [],
    "batch256": ["--batch", "256"],
    "foreach": ["--optimizer", "adam-foreach"],
    "checkpoint": ["--checkpoint"],
    "accumulate2": ["--accumulate", "2"],
    "threads1": ["--threads", "1"],
    # 40 us of CPU per sample: 5 ms of loading per step, on the training thread or in two worker processes
    "loader0": ["--transform-us", "40"],
    "loader2": ["--transform-us", "40", "--workers", "2"],
}
WARMUP, STEPS = 3, 4


def record(name: str, run: int, out: Path) -> None:
    target = out / name / f"run{run}"
    if target.exists():
        shutil.rmtree(target)
    program = [sys.executable, *MODEL, *SETTINGS[name], "--steps", str(WARMUP + STEPS + 2)]
    cmd = [sys.executable, "-m", "daydream", "record", "--warmup", str(WARMUP), "--steps", str(STEPS),
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
