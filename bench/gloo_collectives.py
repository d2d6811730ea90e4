"""Measure gloo's collectives between local processes on this host and fit the link preset `gloo-local`.

A CPU recording's collectives (tensor parallelism, DDP on the CPU) run over gloo; the nccl-tests formula prices them
as latency + factor x bytes / bus bandwidth (daydream.perf.collectives), so this measures all_reduce, all_gather and
reduce_scatter of float32 tensors from 4 KiB to 16 MiB between `--ranks` processes over loopback TCP, takes each
size's mean (and quartiles) over `--runs` runs, and fits the latency and bus bandwidth by least squares over the three
(their
factors: 2(n-1)/n for all_reduce, (n-1)/n for the others). The mean, not the median: a step holds many collectives,
and their sum is their count times the mean (on a busy host the times have a heavy tail: a waiting process wakes on
the scheduler's tick). Prints the table, the fit and its error per size.

    python bench/gloo_collectives.py [--ranks 2] [--runs 40] [--json]

Needs torch (the `[record]` extra). Times are per call, from the slowest rank's view (a barrier before each run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]
KINDS = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
}


def _worker(rank: int, ranks: int, runs: int, init: str, out: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=ranks)
    rows = []
    for nbytes in SIZES:
        full = torch.ones(nbytes // 4)
        part = torch.ones(nbytes // 4 // ranks)
        for kind in KINDS:
            times = []
            for i in range(runs + 3):
                dist.barrier()
                t0 = time.perf_counter()
                if kind == "allreduce":
                    dist.all_reduce(full)
                elif kind == "allgather":
                    dist.all_gather_into_tensor(full, part)
                else:
                    dist.reduce_scatter_tensor(part, full)
                t = time.perf_counter() - t0
                if i >= 3:
                    times.append(t * 1e6)
            q = statistics.quantiles(times, n=4)
            rows.append(
                {
                    "collective": kind,
                    "bytes": nbytes,
                    "us": statistics.fmean(times),
                    "median_us": q[1],
                    "p25_us": q[0],
                    "p75_us": q[2],
                }
            )
    dist.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            json.dump(rows, f)


def fit(rows: list[dict], ranks: int) -> tuple[float, float]:
    """Latency (us) and bus bandwidth (GB/s) minimising the squared relative error of t = lat + f x bytes / bw."""
    import numpy as np

    x = np.array([KINDS[r["collective"]](ranks) * r["bytes"] for r in rows])
    t = np.array([r["us"] for r in rows])
    a = np.stack([np.ones_like(x), x], axis=1) / t[:, None]
    (lat, inv_bw), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return float(lat), float(1e-3 / inv_bw)  # bytes/us -> GB/s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        init = f"file://{os.path.join(tmp, 'rendezvous')}"
        mp.spawn(_worker, args=(args.ranks, args.runs, init, out), nprocs=args.ranks, join=True)
        with open(out) as f:
            rows = json.load(f)
    lat, bw = fit(rows, args.ranks)
    for r in rows:
        r["model_us"] = lat + KINDS[r["collective"]](args.ranks) * r["bytes"] / (bw * 1e3)
        r["error_pct"] = 100 * (r["model_us"] - r["us"]) / r["us"]
    if args.json:
        json.dump({"ranks": args.ranks, "latency_us": lat, "bus_bw_gbs": bw, "rows": rows}, sys.stdout, indent=1)
        return
    print(
        f"{'collective':<14}{'bytes':>10}{'mean us':>10}{'median us':>11}{'p25-p75 us':>14}{'model us':>10}{'error':>8}"
    )
    for r in rows:
        spread = f"{r['p25_us']:.0f}-{r['p75_us']:.0f}"
        print(
            f"{r['collective']:<14}{r['bytes']:>10}{r['us']:>10.1f}{r['median_us']:>11.1f}{spread:>14}{r['model_us']:>10.1f}"
            f"{r['error_pct']:>7.1f}%"
        )
    print(f"fit over {args.ranks} ranks: latency {lat:.1f} us, bus bandwidth {bw:.2f} GB/s")


if __name__ == "__main__":  # mp.spawn re-imports this file in each worker
    main()
