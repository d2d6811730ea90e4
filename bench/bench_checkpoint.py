"""What torch.utils.checkpoint's own machinery costs the CPU per checkpoint call, on this machine under the profiler:
the `segment_cpu` of transforms/activation_checkpointing.whatif.

    python bench/bench_checkpoint.py [--ops 1] [--calls 16] [--repeats 30] [--threads N] [--json]

A chain of `--calls` segments of `--ops` tiny Linear(8, 8) + ReLU pairs ( tiny, so their re-run costs a few us),
forward and backward, timed with and without `checkpoint(..., use_reentrant=False)` while torch.profiler records
(as `daydream record` does: the traces daydream reads carry the profiler's cost). Reported: the median extra time per
checkpoint call (the wrapper, the saved-tensor hooks, setting up the re-run in the backward pass, and the re-run of
the tiny ops). Needs torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def measure(ops: int, calls: int, repeats: int) -> dict[str, float]:
    import torch
    from torch.utils.checkpoint import checkpoint

    layers = [torch.nn.Linear(8, 8) for _ in range(ops * calls)]
    x0 = torch.randn(4, 8, requires_grad=True)

    def segment(x: torch.Tensor, i: int) -> torch.Tensor:
        for j in range(ops):
            x = torch.relu(layers[i * ops + j](x))
        return x

    def step(checkpointed: bool) -> None:
        x = x0
        for i in range(calls):
            x = checkpoint(segment, x, i, use_reentrant=False, preserve_rng_state=False) if checkpointed else segment(x, i)
        x.sum().backward()

    medians = {}
    for checkpointed in (False, True):
        for _ in range(10):
            step(checkpointed)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True):
            times = []
            for _ in range(repeats):
                t = time.perf_counter()
                step(checkpointed)
                times.append(time.perf_counter() - t)
        medians[checkpointed] = statistics.median(times) * 1e6
    return {"plain_us_per_call": medians[False] / calls, "checkpoint_us_per_call": (medians[True] - medians[False]) / calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1, help="Linear+ReLU pairs per checkpointed segment")
    parser.add_argument("--calls", type=int, default=16, help="checkpoint calls per step")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    result = measure(args.ops, args.calls, args.repeats)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"segment without checkpointing: {result['plain_us_per_call']:.1f} us; "
              f"checkpoint machinery per call: {result['checkpoint_us_per_call']:.1f} us "
              f"(activation_checkpointing -p segment_cpu=...)")  # fmt: skip


if __name__ == "__main__":
    main()
