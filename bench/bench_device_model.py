"""Device swaps, kernel by kernel: the measured-kernels model (daydream.perf.kernels.device_model) leaving one GPU out.

    python bench/bench_device_model.py [DATA] [--classes gemm,conv,elementwise,norm] [--json OUT] [--model OUT]

DATA: the NeuSight data set (default ../shared/calibration/neusight). For each class and each GPU as the target, the
model's trees are fitted on every *other* GPU, then asked for the target time of every kernel measured on both the
target and another GPU (the source), from the source's measured time: what `device` does to a traced kernel. Scored
as the papers score: the geometric mean of |predicted / measured - 1| (GMAE), with the target's efficiency and fixed
time fitted on its own kernels (one sweep of the target) and from the datasheet alone (its vendor's median), next to
the ratio of datasheet rooflines (the rule without the model). Prints the markdown table docs/perf.md carries and the
fit's time; --model writes the model fitted on every GPU (what `daydream models kernels --refit` ships).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import msgspec

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "calibration" / "neusight"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    p.add_argument("--classes", default="gemm,conv,elementwise,norm")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--model", help="write the model fitted on every GPU here")
    args = p.parse_args()
    try:
        import sklearn  # noqa: F401
    except ImportError:
        print("needs scikit-learn (pip install 'daydream-whatif[calibrate]')", file=sys.stderr)
        return 2
    from daydream.perf.kernels import device_model
    from daydream.perf.kernels.kernel_data import read_measurements

    print(
        "| class | target GPU (left out) | kernel pairs | measured target | datasheet only | roofline ratio |\n"
        "| --- | --- | --- | --- | --- | --- |"
    )
    t0 = time.perf_counter()
    model = device_model.fit(
        read_measurements(args.data),
        Path(args.data).name,
        args.classes.split(","),
        progress=lambda r: print(
            f"| {r.kernel_class} | {r.target} | {r.pairs:,} | {r.calibrated_gmae_pct:.1f}% | "
            f"{r.gmae_pct:.1f}% | {r.roofline_gmae_pct:.1f}% |",
            flush=True,
        ),
    )
    print(f"\nfitted and left each GPU out in {time.perf_counter() - t0:.0f} s")
    for cls in args.classes.split(","):
        rows = [r for r in model.accuracy if r.kernel_class == cls]
        if not rows:
            continue
        beats = sum(r.calibrated_gmae_pct < r.roofline_gmae_pct for r in rows)
        print(
            f"{cls}: measured target median {statistics.median(r.calibrated_gmae_pct for r in rows):.1f}% (worst"
            f" {max(r.calibrated_gmae_pct for r in rows):.1f}%), datasheet only median"
            f" {statistics.median(r.gmae_pct for r in rows):.1f}%, roofline median"
            f" {statistics.median(r.roofline_gmae_pct for r in rows):.1f}%; better than the roofline on {beats} of"
            f" {len(rows)} GPUs"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(msgspec.to_builtins(model.accuracy), indent=1) + "\n")
    if args.model:
        device_model.write_model(args.model, model)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
