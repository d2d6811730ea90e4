"""Every performance model's error on data it was not fitted on: what ``daydream models accuracy`` reports."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from daydream import progress
from daydream.errors import DaydreamError
from daydream.perf.trust.accuracy import Accuracy
from daydream.trace.job import TRACE_SUFFIXES


def trace_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The Kineto traces named or found (recursively) under ``paths``; execution traces (``*_et*``, ``*.et.json*``)
    are not Kineto traces and are left out."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(x for x in p.rglob("*.json*") if x.name.endswith(TRACE_SUFFIXES))
        elif p.is_file():
            found = [p]
        else:
            raise DaydreamError(f"{p}: no such file or directory")
        out.extend(x for x in found if not _is_execution_trace(x))
    return out


def _is_execution_trace(path: Path) -> bool:
    name = path.name
    return ".et." in name or "_et." in name or path.parent.name.endswith("_et")


def model_accuracy(trace_paths: Sequence[str | os.PathLike[str]] = ()) -> list[Accuracy]:
    """Held-out error of each model: the MLP kernel models and their roofline baseline on the bundled measured
    tables, the collective models on the bundled nccl-tests sweeps (always); with traces, the roofline-calibrated
    cross-check on their kernels, the collective model on their NCCL kernels and the T1..T5 E2E estimate on their
    iterations (traces with three or more)."""
    from daydream.perf import collectives
    from daydream.perf.cpu import end_to_end_check as e2e_check
    from daydream.perf.kernels import mlp, roofline

    traces = trace_files(trace_paths)
    # each trace read, then the four checks: what the bar counts
    with progress.task("checking the models' accuracy", total=len(traces) + 4) as advance:
        kinds = {}
        for p in traces:
            kinds[p] = _what_it_holds(p)
            advance(1)
        result = list(mlp.accuracy())
        advance(1)
        result += roofline.accuracy(traces)
        advance(1)
        result += collectives.accuracy([p for p in traces if kinds[p][0]])
        advance(1)
        result += e2e_check.accuracy([p for p in traces if kinds[p][1]])
        advance(1)
    return result


def _what_it_holds(path: Path) -> tuple[bool, bool]:
    """(NCCL/RCCL kernels, three or more iterations with GPU work): which cross-checks a trace can feed."""
    from daydream.graph.kernel_class import is_comm_kernel
    from daydream.trace import load_trace
    from daydream.trace.steps import iteration_steps

    trace = load_trace(path)
    return any(is_comm_kernel(e.name) for e in trace.gpu), trace.has_gpu_activity and len(iteration_steps(trace)) >= 3
