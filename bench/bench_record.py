"""The recorder's overhead on the examples: step time recorded vs not, on this machine.

    python bench/bench_record.py [--device cpu] [--repeats 3] [--json]

Per example, three measurements in fresh processes, `--repeats` times each, alternating:
  plain     the example on its own, step times from its `--log` output (steps after its 3 warm-up steps);
  idle      under `daydream record --warmup 8 --steps 4`: the warm-up steps 3..6, with the recorder attached (the
            optimizer hook; module hooks are off until the profiler's warm-up step) and the profiler idle;
  recorded  the same run's recorded steps 8..11 (the profiler on, shapes recorded).
Reported: the median step time of each and the overheads idle / plain and recorded / plain.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {  # defaults of each example: the sizes its README runs
    "mlp": [],
    "cnn": [],
    "transformer": [],
    "dlrm": [],
}
WARMUP, STEPS = 8, 4


def plain(example: str, device: str, args: list[str]) -> list[float]:
    cmd = [
        sys.executable,
        str(ROOT / "examples" / f"{example}.py"),
        "--device",
        device,
        "--steps",
        str(WARMUP + STEPS),
        "--log",
        "--log-steps",
        *args,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [float(x) for x in re.findall(r"step \d+: ([0-9.]+) ms", out)][3:]


def recorded(example: str, device: str, args: list[str]) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "daydream",
            "record",
            "--warmup",
            str(WARMUP),
            "--steps",
            str(STEPS),
            "--out",
            tmp,
            "--",
            sys.executable,
            str(ROOT / "examples" / f"{example}.py"),
            "--device",
            device,
            "--steps",
            str(WARMUP + STEPS),
            *args,
        ]
        subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall = json.loads((Path(tmp) / "rank0.daydream.json").read_text())["steps"]["wall_ms"]
    return wall[3 : WARMUP - 1], wall[WARMUP : WARMUP + STEPS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    rows = []
    for example, args in EXAMPLES.items():
        p: list[float] = []
        h: list[float] = []
        r: list[float] = []
        for _ in range(ns.repeats):
            p += plain(example, ns.device, args)
            hooks, rec = recorded(example, ns.device, args)
            h += hooks
            r += rec
        mp, mh, mr = statistics.median(p), statistics.median(h), statistics.median(r)
        rows.append(
            {
                "example": example,
                "plain_ms": mp,
                "idle_ms": mh,
                "recorded_ms": mr,
                "idle_overhead_pct": 100 * (mh / mp - 1),
                "recorded_overhead_pct": 100 * (mr / mp - 1),
            }
        )
    if ns.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'example':<12}{'plain ms':>10}{'idle ms':>10}{'recorded ms':>13}{'idle':>9}{'recorded':>10}")
    for row in rows:
        print(
            f"{row['example']:<12}{row['plain_ms']:>10.2f}{row['idle_ms']:>10.2f}{row['recorded_ms']:>13.2f}"
            f"{row['idle_overhead_pct']:>+8.1f}%{row['recorded_overhead_pct']:>+9.1f}%"
        )


if __name__ == "__main__":
    main()
