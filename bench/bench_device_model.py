"""Device swaps, kernel by kernel: how well a kernel's time on one GPU predicts its time on another, leave one GPU out.

    python bench/bench_device_model.py [DATA] [--classes gemm,conv,elementwise,norm] [--json OUT]

DATA: the NeuSight data set (default ../shared/calibration/neusight; daydream.perf.kernel_data reads it). For each
kernel class and each GPU as the target, a model is fitted on every *other* GPU's measurements, then asked for the
target/source time ratio of every kernel measured on both the target and another GPU (the source): what `device`
applies to a kernel's measured time. Scored as the papers score: the geometric mean of |predicted / measured ratio
- 1| (GMAE), next to the roofline ratio (max(FLOPs / FP32 peak, bytes / bandwidth) on each GPU, today's rule for a
kernel the trace gives shapes for) and the median kernel's. The model: gradient-boosted trees (scikit-learn, the
`[calibrate]` extra) on features normalized by each GPU (its compute and memory time at peak, their ratio, waves of
tiles over its SMs, the data's size against its L2), not the GPU's raw figures, so that it can speak of a GPU it never
saw; log(measured time / roofline time) is its target.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "calibration" / "neusight"


def roofline_us(m, g) -> float:  # type: ignore[no-untyped-def]
    peak = g.fp32_gflops if m.kernel_class in ("gemm", "conv") else g.vector_gflops
    return max(m.flops() / (peak * 1e3), m.bytes() / (g.memory_gbps * 1e3))


def features(m, g) -> list[float]:  # type: ignore[no-untyped-def]
    """Shape and GPU features, normalized by the GPU: times at its peaks, waves over its SMs, size against its L2."""
    peak = g.fp32_gflops if m.kernel_class in ("gemm", "conv") else g.vector_gflops
    tc, tm = m.flops() / (peak * 1e3), m.bytes() / (g.memory_gbps * 1e3)
    size = [math.log(tc + 1e-9), math.log(tm + 1e-9), math.log((tc + 1e-9) / (tm + 1e-9)), math.log(m.bytes() / (g.l2_mb * 2**20))]
    d = m.dims
    if m.kernel_class == "gemm":
        b, mm, n, k = d
        waves = [b * math.ceil(mm / t) * math.ceil(n / t) / g.sms for t in (64, 128)]
        shape = [math.log(b), math.log(mm), math.log(n), math.log(k), float(m.op == "bmm")]
    elif m.kernel_class == "conv":
        b, c, f, r, s, stride, pad = d
        out = max((s + 2 * pad - r) // max(stride, 1) + 1, 1)
        waves = [b * math.ceil(out * out / t) * math.ceil(f / 64) / g.sms for t in (64, 128)]
        shape = [math.log(b), math.log(c), math.log(f), float(r), math.log(s), float(stride)]
    else:
        b, h = d
        threads = g.sms * 2048
        waves = [b * h / threads, b / g.sms]
        shape = [math.log(b), math.log(h), float(hash(m.op) % 97)]
    wave = [math.log(w + 1e-9) for w in waves] + [w / math.ceil(w) if w > 0 else 0.0 for w in waves]
    return size + wave + shape


def gmae(errors: list[float]) -> float:
    return 100 * math.exp(float(np.mean(np.log(np.maximum(np.abs(errors), 1e-4))))) if errors else math.nan


def evaluate(cls: str, rows: list, gpus: dict) -> list[dict]:  # type: ignore[type-arg]
    from sklearn.ensemble import HistGradientBoostingRegressor

    by_key: dict = defaultdict(dict)
    for m in rows:
        by_key[m.key()][m.device] = m
    devices = sorted({m.device for m in rows})
    X = np.array([features(m, gpus[m.device]) for m in rows])
    y = np.array([math.log(m.latency_us / roofline_us(m, gpus[m.device])) for m in rows])
    device_of = np.array([m.device for m in rows])
    index = {(m.key(), m.device): i for i, m in enumerate(rows)}
    out = []
    for target in devices:
        pairs = [(key, src) for key, on in by_key.items() if target in on for src in on if src != target]
        if not pairs:
            continue
        t0 = time.perf_counter()
        model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.08, max_leaf_nodes=63, min_samples_leaf=20, random_state=0)
        train = device_of != target
        model.fit(X[train], y[train])
        residual = model.predict(X)
        model_errors, roof_errors = [], []
        for key, src in pairs:
            mt, ms = by_key[key][target], by_key[key][src]
            it, i_s = index[(key, target)], index[(key, src)]
            measured = mt.latency_us / ms.latency_us
            roof = roofline_us(mt, gpus[target]) / roofline_us(ms, gpus[src])
            model_errors.append(roof * math.exp(residual[it] - residual[i_s]) / measured - 1)
            roof_errors.append(roof / measured - 1)
        row = {"class": cls, "target": target, "vendor": gpus[target].vendor, "pairs": len(pairs), "model_gmae_pct": gmae(model_errors),
               "roofline_gmae_pct": gmae(roof_errors), "model_median_pct": 100 * float(np.median(np.abs(model_errors))),
               "fit_s": time.perf_counter() - t0}  # fmt: skip
        out.append(row)
        print(f"| {cls} | {target} | {len(pairs):,} | {row['model_gmae_pct']:.1f}% | {row['roofline_gmae_pct']:.1f}% | "
              f"{row['model_median_pct']:.1f}% |", flush=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    p.add_argument("--classes", default="gemm,conv,elementwise,norm")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    try:
        import sklearn  # noqa: F401
    except ImportError:
        print("needs scikit-learn (pip install 'daydream-whatif[calibrate]')", file=sys.stderr)
        return 2
    from daydream.perf.kernel_data import read_gpus, read_measurements

    gpus = read_gpus(args.data)
    rows = [m for m in read_measurements(args.data) if m.device in gpus]
    print("| class | target GPU (left out) | kernel pairs | model GMAE | roofline GMAE | model median |\n| --- | --- | --- | --- | --- | --- |")
    results = []
    for cls in args.classes.split(","):
        results += evaluate(cls, [m for m in rows if m.kernel_class == cls], gpus)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
