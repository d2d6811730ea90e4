"""An iteration's gradients and how data-parallel training buckets them: what a DDP what-if needs.

A gradient is complete when autograd's ``AccumulateGrad`` for its parameter has run. Its size comes from the
shapes the trace recorded for that call (Kineto ``Input Dims`` with ``record_shapes=True``, or a linked execution
trace); on the device it is ready when the last GPU work its thread launched up to then has finished.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import networkx as nx

from daydream.errors import DaydreamError
from daydream.graph.adjacency import attrs_of, successors_of
from daydream.graph.schema import CPU_KINDS
from daydream.graph.select import in_time_order

_ACCUMULATE_GRAD = re.compile(r"AccumulateGrad")
# torch.nn.parallel.DistributedDataParallel's defaults: bucket_cap_mb=25, and a 1 MiB first bucket so that
# communication starts early in the backward pass.
DDP_BUCKET_CAP = 25 * 2**20
DDP_FIRST_BUCKET = 2**20


@dataclass(frozen=True)
class Gradient:
    """One parameter's gradient in one step: its size, and the task after which it is ready on the device."""

    step: str | None
    nbytes: int
    ready: Any  # the last GPU task launched up to the end of the AccumulateGrad call, else that call's CPU task
    call: Any  # the AccumulateGrad call (its top_op_id), which tells gradients apart
    layer: str | None = None  # the parameter's module where the trace says (traces from `daydream record`)


def _is_accumulate(a: dict[str, Any]) -> bool:
    op = a.get("top_op") or a.get("op")
    return bool(op) and bool(_ACCUMULATE_GRAD.search(op))


def tensor_elements(shapes: Any) -> int | None:
    """Elements of the first tensor among an op's input dims (``[[1024, 512], [], ...]`` -> 524288); ``[[]]``, the
    dims of a 0-dim tensor (a scalar parameter), is one element."""
    if not isinstance(shapes, list):
        return None
    for dims in shapes:
        if isinstance(dims, list) and dims and all(isinstance(d, int) for d in dims):
            return math.prod(dims)
    return 1 if shapes == [[]] else None


def gradients(graph: nx.DiGraph, element_bytes: int = 4) -> list[Gradient]:
    """The graph's gradients in the order they became ready, each step's in turn.

    ``element_bytes``: bytes per gradient element (4 for fp32 parameters; traces record dims, not dtypes here).
    Raises DaydreamError when the graph has no AccumulateGrad calls, or calls without recorded shapes.
    """
    nodes, succ = attrs_of(graph), successors_of(graph)
    calls: dict[Any, list[Any]] = {}
    for v, a in nodes.items():
        if a["kind"] in CPU_KINDS and _is_accumulate(a):
            key = a.get("top_op_id")
            calls.setdefault(key if key is not None else ("task", v), []).append(v)
    if not calls:
        raise DaydreamError(
            "the graph has no gradients: no autograd AccumulateGrad calls in the selected step (is it a training iteration?)"
        )
    last_task = {key: in_time_order(graph, tasks)[-1] for key, tasks in calls.items()}
    wanted = {v: key for key, v in last_task.items()}
    ready: dict[Any, Any] = {}
    for thread in {nodes[v]["thread"] for v in wanted}:
        launched = None
        for u in in_time_order(graph, [x for x, b in nodes.items() if b["thread"] == thread]):
            for w, e in succ[u].items():
                if e.get("kind") == "launch":
                    launched = w
            if u in wanted:
                ready[wanted[u]] = launched if launched is not None else u
    order = {key: nodes[v]["start"] + nodes[v]["duration"] for key, v in last_task.items()}
    by_step: dict[Any, list[Any]] = {}
    for key in sorted(calls, key=lambda k: (str(nodes[last_task[k]].get("step")), order[k])):
        by_step.setdefault(nodes[last_task[key]].get("step"), []).append(key)
    sizes = {key: next((n for n in (tensor_elements(nodes[t].get("shapes")) for t in tasks) if n is not None), None)
             for key, tasks in calls.items()}  # fmt: skip
    _borrow_sizes(by_step, sizes)
    missing = sum(1 for n in sizes.values() if n is None)
    if missing:
        et = graph.graph.get("execution_trace")
        if et:  # one was read with the trace: say why it did not give the sizes, not to give one
            why = ("it covers another iteration than this step (an execution trace records one): choose that step "
                   "(--step)" if et.ops else "it was not used: its ops do not match the trace's (see the warning)")  # fmt: skip
            raise DaydreamError(
                f"{missing} of {len(calls)} gradients have no recorded size, and the execution trace {et.path} does not "
                f"give them: {why}; or record the trace with shapes (torch.profiler.profile(record_shapes=True))"
            )
        raise DaydreamError(
            f"{missing} of {len(calls)} gradients have no recorded size: record the trace with shapes "
            "(torch.profiler.profile(record_shapes=True)) or give the execution trace that covers this step (--et)"
        )
    out = []
    for step_keys in by_step.values():
        for key in step_keys:
            layer = next((nodes[t].get("layer") for t in calls[key] if nodes[t].get("layer")), None)
            out.append(Gradient(nodes[last_task[key]].get("step"), sizes[key] * element_bytes, ready[key], key, layer))
    return out


def _borrow_sizes(by_step: dict[Any, list[Any]], sizes: dict[Any, int | None]) -> None:
    """A step whose gradients lack sizes (the step before the measured one, simulated as its context, which an
    execution trace of one iteration does not cover) takes them from a step whose gradients all have theirs and
    number the same: every step's gradients are the same parameters', ready in the same order."""
    complete = [keys for keys in by_step.values() if all(sizes[k] is not None for k in keys)]
    for keys in by_step.values():
        if all(sizes[k] is not None for k in keys):
            continue
        donor = next((d for d in complete if len(d) == len(keys)), None)
        if donor is not None:
            for k, d in zip(keys, donor):
                sizes[k] = sizes[k] if sizes[k] is not None else sizes[d]


def ddp_buckets(grads: list[Gradient], cap: float = DDP_BUCKET_CAP, first_cap: float = DDP_FIRST_BUCKET) -> list[list[Gradient]]:
    """Gradients grouped into DDP buckets, per step, in ready order: a bucket closes once it holds at least its
    limit (``first_cap`` for a step's first bucket, ``cap`` after), as torch's ``compute_bucket_assignment_by_size``
    does; the order is the observed ready order, which DDP adopts after its first iteration (bucket rebuild)."""
    if not cap > 0 or not first_cap > 0:
        raise DaydreamError(f"bucket sizes must be > 0 bytes (got cap {cap}, first bucket {first_cap})")
    buckets: list[list[Gradient]] = []
    current: list[Gradient] = []
    size, limit, step = 0, first_cap, object()
    for g in grads:
        if g.step != step:
            if current:
                buckets.append(current)
            current, size, limit, step = [], 0, first_cap, g.step
        current.append(g)
        size += g.nbytes
        if size >= limit:
            buckets.append(current)
            current, size, limit = [], 0, cap
    if current:
        buckets.append(current)
    return buckets


def bucket_ready(graph: nx.DiGraph, bucket: list[Gradient]) -> Any:
    """The task after which every gradient of ``bucket`` is ready: the latest of their ready tasks (traced order)."""
    nodes = attrs_of(graph)
    return max((g.ready for g in bucket), key=lambda v: (nodes[v]["start"] + nodes[v]["duration"], str(v)))
