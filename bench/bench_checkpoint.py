"""What torch.utils.checkpoint's own machinery costs the CPU, on this machine under the profiler: the `segment_cpu`
(per checkpoint call) and `op_cpu` (per op of the checkpointed segment) of transforms/activation_checkpointing.whatif.

    python bench/bench_checkpoint.py [--ops 1 4] [--calls 16] [--repeats 30] [--threads N] [--json]

For each `--ops` k: a chain of `--calls` segments of k tiny Linear(8, 8) + ReLU pairs (2k ops; tiny, so their
re-run costs a few us), forward and backward, timed with and without `checkpoint(..., use_reentrant=False)` while
torch.profiler records (as `daydream record` does: the traces daydream reads carry the profiler's cost), and the
forward pass alone without checkpointing (the re-run, which the transform prices from the trace). The machinery of
a call is the extra time less that re-run; a line through the machinery at the two sizes gives its part per call
(`segment_cpu`) and per op (`op_cpu`: the saved-tensor hooks of each op in the forward pass and the re-run's
bookkeeping). Needs torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def measure(ops: int, calls: int, repeats: int) -> dict[str, float]:
    """Per checkpoint call of `ops` Linear + ReLU pairs: the plain forward + backward, the forward alone, and the
    extra time checkpointing costs (microseconds, medians of `repeats` steps under the profiler)."""
    import torch
    from torch.utils.checkpoint import checkpoint

    layers = [torch.nn.Linear(8, 8) for _ in range(ops * calls)]
    x0 = torch.randn(4, 8, requires_grad=True)

    def segment(x: torch.Tensor, i: int) -> torch.Tensor:
        for j in range(ops):
            x = torch.relu(layers[i * ops + j](x))
        return x

    def step(mode: str) -> None:
        x = x0
        for i in range(calls):
            x = (
                checkpoint(segment, x, i, use_reentrant=False, preserve_rng_state=False)
                if mode == "checkpoint"
                else segment(x, i)
            )
        if mode != "forward":
            x.sum().backward()

    medians = {}
    for mode in ("plain", "forward", "checkpoint"):
        for _ in range(10):
            step(mode)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True):
            times = []
            for _ in range(repeats):
                t = time.perf_counter()
                step(mode)
                times.append(time.perf_counter() - t)
        medians[mode] = statistics.median(times) * 1e6 / calls
    return {
        "plain_us_per_call": medians["plain"],
        "forward_us_per_call": medians["forward"],
        "checkpoint_us_per_call": medians["checkpoint"] - medians["plain"],
        "machinery_us_per_call": medians["checkpoint"] - medians["plain"] - medians["forward"],
    }


def fit(sizes: list[int], calls: int, repeats: int) -> dict[str, object]:
    """The machinery at each size (2k ops per call) and the line through it: per call and per op."""
    rows = {k: measure(k, calls, repeats) for k in sizes}
    if len(sizes) < 2:
        (k,) = sizes
        return {"sizes": rows, "segment_cpu_us": rows[k]["machinery_us_per_call"], "op_cpu_us": 0.0}
    lo, hi = min(sizes), max(sizes)
    per_op = (rows[hi]["machinery_us_per_call"] - rows[lo]["machinery_us_per_call"]) / (2 * (hi - lo))
    per_call = rows[lo]["machinery_us_per_call"] - per_op * 2 * lo
    return {"sizes": rows, "segment_cpu_us": per_call, "op_cpu_us": per_op}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, nargs="+", default=[1, 4], help="Linear+ReLU pairs per checkpointed segment")
    parser.add_argument("--calls", type=int, default=16, help="checkpoint calls per step")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    result = fit(sorted(set(args.ops)), args.calls, args.repeats)
    if args.json:
        print(json.dumps(result))
        return
    for k, row in result["sizes"].items():  # type: ignore[union-attr]
        print(
            f"{k} pair(s) per call: plain {row['plain_us_per_call']:.1f} us, checkpointed"
            f" +{row['checkpoint_us_per_call']:.1f} us (re-run {row['forward_us_per_call']:.1f}, machinery"
            f" {row['machinery_us_per_call']:.1f})"
        )
    print(
        f"activation_checkpointing -p segment_cpu={result['segment_cpu_us']:.0f}us -p"
        f" op_cpu={result['op_cpu_us']:.0f}us"
    )


if __name__ == "__main__":
    main()
