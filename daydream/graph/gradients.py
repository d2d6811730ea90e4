"""An iteration's gradients and how data-parallel training buckets them: what a DDP what-if needs.

A gradient is complete when autograd's ``AccumulateGrad`` for its parameter has run; on the device it is ready when
the last GPU work its thread launched up to then has finished. Its size comes from the first of these that gives every
gradient of a step its size (``SOURCES``, in that order):

1. **shapes** / **execution trace**: the dims the trace recorded for the AccumulateGrad call (Kineto ``Input Dims``
   with ``record_shapes=True``, or a linked execution trace). Exact.
2. **collectives**: the traced DDP all-reduces. DDP's reducer launches a bucket's all-reduce from the hook of the
   bucket's last gradient, inside that gradient's AccumulateGrad call: a bucket holds the gradients ready since the
   previous one, and its message (NCCL's ``In msg nelems`` x the dtype of the kernel's name) is their elements. Each
   bucket exact; its split over its gradients, evenly, estimated.
3. **weight shapes**: where ops recorded shapes but the AccumulateGrad calls did not, the parameters the forward
   pass's Linears, convolutions, norms and embeddings read (their weight and bias inputs), taken in reverse as the
   gradients' order (the backward pass reaches the parameters in reverse, as DDP assumes). Estimated: a weight read
   twice (tied, or a layer run twice) counts twice, a parameter no such op reads is missed.
4. **optimizer kernels**: the optimizer's fused ``multi_tensor_apply_kernel`` launches (PyTorch's foreach and fused
   optimizers, apex's): each thread block of one is a chunk of 65536 elements of one tensor, so a call over the
   parameters launches sum(ceil(n_i / 65536)) blocks in all - C chunks over the step's T gradients put the model's
   parameters between (C - T) x 65536 + T and C x 65536; the middle, (C - T/2) x 65536, is taken (each tensor's last
   chunk half full). A launch that ended because it held its depth's most tensors (and not its most blocks) pins the
   chunks of the tensors up to there; between pins the chunks are spread evenly over the tensors (in the optimizer's
   order, the parameters' - the gradients' reversed). Estimated.

A step no source sizes takes a step's sizes that has as many gradients (``_borrow_sizes``). What the sizes came from
is said (``GradientSizes``): scripts print it, ``daydream plan`` reports it, and a prediction that used estimated
sizes gets a part of its interval for them (``daydream.perf.trust.uncertainty.gradient_sizes_part``): ``error_pct``, the
relative half-width of a step's gradient bytes the source allows - the optimizer kernels' half range,
(T / 2) / (C - T / 2); weight shapes: the largest weights found, as many as their count is off the gradients' -, at
least ``ESTIMATE_FLOOR_PCT`` (the collectives' per-bucket split).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from daydream.errors import DaydreamError
from daydream.graph import derived
from daydream.graph.adjacency import attrs_of, successors_of
from daydream.graph.schema import CPU_KINDS
from daydream.graph.select import in_time_order
from daydream.graph.tensor_parallel import linear_dims
from daydream.trace.sizes import traced_dtype_bytes

_ACCUMULATE_GRAD = re.compile(r"AccumulateGrad")
# torch.nn.parallel.DistributedDataParallel's defaults: bucket_cap_mb=25, and a 1 MiB first bucket so that
# communication starts early in the backward pass.
DDP_BUCKET_CAP = 25 * 2**20
DDP_FIRST_BUCKET = 2**20

# Where a step's gradient sizes come from, in order of preference (the module docstring).
SHAPES, EXECUTION_TRACE, COLLECTIVES, WEIGHT_SHAPES, OPTIMIZER_KERNELS = (
    "shapes",
    "execution trace",
    "collectives",
    "weight shapes",
    "optimizer kernels",
)
SOURCES = (SHAPES, EXECUTION_TRACE, COLLECTIVES, WEIGHT_SHAPES, OPTIMIZER_KERNELS)
EXACT = frozenset({SHAPES, EXECUTION_TRACE})
_FROM = {
    SHAPES: "the shapes the trace recorded",
    EXECUTION_TRACE: "the execution trace",
    COLLECTIVES: "the traced DDP all-reduces",
    WEIGHT_SHAPES: "the forward ops' weight shapes",
    OPTIMIZER_KERNELS: "the optimizer's fused kernels",
}
# The least an estimate's part of a prediction's interval: a split over gradients the trace does not size one by one
# (a bucket's bytes evenly over its gradients) can move a bucket's boundary or a layer's bytes by a gradient's share.
ESTIMATE_FLOOR_PCT = 5.0
# PyTorch's multi_tensor_apply (ATen/native/cuda/MultiTensorApply.cuh): kChunkSize elements a block, at most
# depth_to_max_blocks blocks and depth_to_max_tensors[depth - 1] tensors a launch (depth: the tensor lists it reads).
CHUNK_ELEMENTS = 65536
MAX_BLOCKS = 320
MAX_TENSORS = (110, 64, 48, 36, 30)
_DEPTH = re.compile(r"TensorListMetadata<(\d+)")
# the element type in an NCCL kernel's name: ncclKernel_AllReduce_RING_LL_Sum_float,
# ncclDevKernel_AllReduce_Sum_bf16_RING_LL
_COLLECTIVE_DTYPE = re.compile(r"_(?:Sum|Prod|Min|Max|Avg|PreMulSum|SumPostDiv)_([A-Za-z0-9]+)")
# ops whose inputs hold parameters: (innermost op, its parameter inputs as (position, dims): 1 a vector, more at
# least that many); Linears by linear_dims
_PARAMETER_INPUTS: tuple[tuple[re.Pattern[str], tuple[tuple[int, int], ...]], ...] = (
    (re.compile(r"conv(?!.*backward)", re.I), ((1, 3), (2, 1))),  # (input, weight, bias, ...)
    (re.compile(r"batch_norm(?!.*backward)"), ((1, 1), (2, 1))),  # (input, weight, bias, running_mean, ...)
    (
        re.compile(r"(layer|group)_norm(?!.*backward)"),
        ((2, 1), (3, 1)),
    ),  # (input, normalized_shape | groups, weight, bias)
    (re.compile(r"rms_norm(?!.*backward)"), ((2, 1),)),  # (input, normalized_shape, weight, eps)
)
_EMBEDDING = re.compile(r"^aten::(embedding|embedding_bag|_embedding_bag)$")  # the outermost op: its weight first


@dataclass(frozen=True)
class Gradient:
    """One parameter's gradient in one step: its size, and the task after which it is ready on the device."""

    step: str | None
    nbytes: int
    ready: Any  # the last GPU task launched up to the end of the AccumulateGrad call, else that call's CPU task
    call: Any  # the AccumulateGrad call (its top_op_id), which tells gradients apart
    layer: str | None = None  # the parameter's module where the trace says (traces from `daydream record`)
    source: str = SHAPES  # where its size came from (SOURCES)


@dataclass(frozen=True)
class GradientSizes:
    """Where a graph's gradient sizes came from: the least exact source a step's came from (``SOURCES``), the relative
    half-width of a step's gradient bytes that source allows (0: exact), and how it estimated them, for a person."""

    source: str
    error_pct: float = 0.0
    detail: str = ""

    @property
    def estimated(self) -> bool:
        return self.source not in EXACT

    def how(self) -> str:
        """Where the sizes came from, and for an estimate how: ``estimated from the traced DDP all-reduces (...)``."""
        if not self.estimated:
            return f"from {_FROM[self.source]}"
        return f"estimated from {_FROM[self.source]} ({self.detail})"

    def note(self) -> str:
        """One line: where the sizes came from, and for an estimate how and how far to trust it."""
        return f"gradient sizes {self.how()}" + (f": +-{self.error_pct:.0f}%" if self.estimated else "")


@dataclass(frozen=True)
class _Estimate:
    """One step's gradient sizes from one source: elements per gradient, in ready order."""

    elements: list[int]
    error_pct: float
    detail: str


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
    """The graph's gradients in the order they became ready, each step's in turn (:func:`read_gradients`)."""
    return read_gradients(graph, element_bytes)[0]


def gradient_sizes(graph: nx.DiGraph) -> GradientSizes:
    """Where the graph's gradient sizes come from (:func:`read_gradients`)."""
    return read_gradients(graph)[1]


def read_gradients(graph: nx.DiGraph, element_bytes: int = 4) -> tuple[list[Gradient], GradientSizes]:
    """The graph's gradients in the order they became ready, each step's in turn, sized from the first source that
    sizes a step (the module docstring), and where their sizes came from.

    ``element_bytes``: bytes per gradient element (4 for fp32 parameters; sizes are read as elements).
    Raises DaydreamError when the graph has no AccumulateGrad calls, or no source sizes its gradients.
    """
    nodes, succ = attrs_of(graph), successors_of(graph)
    calls: dict[Any, list[Any]] = {}
    for v, a in nodes.items():
        if a["kind"] in CPU_KINDS and _is_accumulate(a):
            key = a.get("top_op_id")
            calls.setdefault(key if key is not None else ("task", v), []).append(v)
    if not calls:
        raise DaydreamError(
            "the graph has no gradients: no autograd AccumulateGrad calls in the selected step (is it a training"
            " iteration?)"
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
    sizes = {
        key: next((n for n in (tensor_elements(nodes[t].get("shapes")) for t in tasks) if n is not None), None)
        for key, tasks in calls.items()
    }
    et = graph.graph.get("execution_trace")
    recorded = EXECUTION_TRACE if et and et.ops else SHAPES
    source = {key: recorded for key, n in sizes.items() if n is not None}
    _borrow_sizes(by_step, sizes, source)
    estimates: dict[str, _Estimate] = {}  # each source's least certain step
    for name, estimate in _ESTIMATORS:
        for step, keys in by_step.items():
            if all(sizes[k] is not None for k in keys):
                continue
            found = estimate(graph, step, keys)
            if found is None:
                continue
            for key, n in zip(keys, found.elements, strict=True):
                sizes[key], source[key] = n, name
            if name not in estimates or found.error_pct > estimates[name].error_pct:
                estimates[name] = found
        _borrow_sizes(by_step, sizes, source)
    missing = sum(1 for n in sizes.values() if n is None)
    if missing:
        raise DaydreamError(_missing_sizes(missing, len(calls), et))
    out = []
    for step_keys in by_step.values():
        for key in step_keys:
            layer = next((nodes[t].get("layer") for t in calls[key] if nodes[t].get("layer")), None)
            nbytes = sizes[key] * element_bytes  # type: ignore[operator]  # (every size found: checked above)
            out.append(Gradient(nodes[last_task[key]].get("step"), nbytes, ready[key], key, layer, source[key]))
    worst = max(source.values(), key=SOURCES.index)
    found = estimates.get(worst)
    return out, GradientSizes(worst, found.error_pct, found.detail) if found else GradientSizes(worst)


def _missing_sizes(missing: int, total: int, et: Any) -> str:
    """Why ``missing`` of ``total`` gradients have no size: nothing recorded them, nothing gave an estimate."""
    none = (
        "and nothing to estimate them from (no DDP all-reduces in the backward pass, no weight shapes of the "
        "forward ops, no fused optimizer kernels with their grids)"
    )
    if et:  # one was read with the trace: say why it did not give the sizes, not to give one
        why = (
            "it covers another iteration than this step (an execution trace records one): choose that step (--step)"
            if et.ops
            else "it was not used: its ops do not match the trace's (see the warning)"
        )
        return (
            f"{missing} of {total} gradients have no recorded size, {none}, and the execution trace {et.path} does not "
            f"give them: {why}; or record the trace with shapes (torch.profiler.profile(record_shapes=True))"
        )
    return (
        f"{missing} of {total} gradients have no recorded size, {none}: record the trace with shapes "
        "(torch.profiler.profile(record_shapes=True)) or give the execution trace that covers this step (--et)"
    )


def _borrow_sizes(by_step: dict[Any, list[Any]], sizes: dict[Any, int | None], source: dict[Any, str]) -> None:
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
                if sizes[k] is None:
                    sizes[k], source[k] = sizes[d], source[d]


def _from_collectives(graph: nx.DiGraph, step: Any, keys: list[Any]) -> _Estimate | None:
    """A step's sizes from its DDP buckets: the all-reduces launched inside an AccumulateGrad call (the reducer's hook
    of a bucket's last gradient), each over the gradients ready since the one before, split evenly; None where there
    are none, or gradients become ready after the last (no bucket holds them)."""
    at = {key: i for i, key in enumerate(keys)}
    launched: dict[int, int] = {}  # the gradient whose call launched a bucket -> the bucket's elements
    total = 0
    for a in _allreduces(graph).get(step, ()):
        nbytes = a.get("bytes")
        i = at.get(a.get("top_op_id")) if _is_accumulate(a) else None
        if i is not None:
            launched[i] = launched.get(i, 0) + nbytes // _collective_element_bytes(a["name"])
            total += nbytes
    if not launched or max(launched) != len(keys) - 1:
        return None
    elements: list[int] = []
    for last in sorted(launched):
        n = last + 1 - len(elements)
        share, extra = divmod(launched[last], n)
        elements += [share + (1 if j < extra else 0) for j in range(n)]
    detail = f"{len(launched)} buckets a step, {total:,} bytes, each split evenly over its gradients"
    return _Estimate(elements, ESTIMATE_FLOOR_PCT, detail)


def _allreduces(graph: nx.DiGraph) -> dict[Any, list[dict[str, Any]]]:
    """The all-reduces with a byte count (int), by step: read once for every step (kept while the graph's tasks and
    attributes stay), not once per step (a graph of many steps made that quadratic)."""
    found = derived.cached(graph, "all-reduces by step", (derived.TASKS, derived.ATTRIBUTES))
    if found is None:
        found = {}
        for a in attrs_of(graph).values():
            if a["kind"] == "comm" and a.get("collective") == "allreduce" and type(a.get("bytes")) is int:
                found.setdefault(a.get("step"), []).append(a)
        derived.keep(graph, "all-reduces by step", found, (derived.TASKS, derived.ATTRIBUTES))
    return found


def _collective_element_bytes(name: str) -> int:
    """Bytes per element of a collective, by the type its kernel's name says; fp32's where it says none."""
    m = _COLLECTIVE_DTYPE.search(name)
    return (traced_dtype_bytes(m.group(1)) if m else None) or 4


def _from_weight_shapes(graph: nx.DiGraph, step: Any, keys: list[Any]) -> _Estimate | None:
    """A step's sizes from the parameters its forward ops read (``_parameters``), once per op call, in time order:
    the gradients take them in reverse (``_spread`` where they do not number the same); None without any."""
    nodes = attrs_of(graph)
    shaped = [
        v
        for v, a in nodes.items()
        if a.get("step") == step and a.get("phase") == "forward" and a["kind"] in CPU_KINDS and a.get("shapes")
    ]
    found: list[int] = []
    done: set[Any] = set()
    for v in in_time_order(graph, shaped):
        a = nodes[v]
        call = a.get("top_op_id")
        call = call if call is not None else ("task", v)
        if call in done:
            continue
        params = _parameters(a)
        if params:
            found += params
            done.add(call)
    if not found:
        return None
    n = len(keys)
    # as many parameters as the count is off by may be counted twice (a tied weight) or missed: as large as the
    # largest found, at most
    off = sum(sorted(found, reverse=True)[: abs(len(found) - n)])
    detail = f"{len(found)} weights and biases of {sum(found):,} elements read by the forward pass, for {n} gradients"
    return _Estimate(_spread(found[::-1], n), max(ESTIMATE_FLOOR_PCT, 100.0 * off / sum(found)), detail)


def _parameters(a: dict[str, Any]) -> list[int]:
    """Elements of the parameters an op call reads, by its innermost op and input dims: a Linear's weight and bias,
    a convolution's, a norm's (1-D), an embedding's table; [] for any other op."""
    op, shapes, top = a.get("op") or "", a.get("shapes"), a.get("top_op") or ""
    if not isinstance(shapes, list):
        return []
    dims = linear_dims(op, shapes)
    if dims is not None:
        bias = {"aten::addmm": 0, "aten::linear": 2}.get(op)
        return [dims[1] * dims[2]] + ([n] if bias is not None and (n := _input(shapes, bias, 1)) else [])
    if _EMBEDDING.match(top):
        return [n] if (n := _input(shapes, 0, 2)) else []
    for pattern, inputs in _PARAMETER_INPUTS:
        if pattern.search(op):
            return [n for position, rank in inputs if (n := _input(shapes, position, rank))]
    return []


def _input(shapes: list[Any], position: int, rank: int) -> int | None:
    """Elements of input ``position`` where it is a tensor of ``rank`` dims (1: a vector; more: at least that many)."""
    dims = shapes[position] if position < len(shapes) else None
    if not isinstance(dims, list) or not dims or not all(type(d) is int for d in dims):
        return None
    return math.prod(dims) if (len(dims) == 1 if rank == 1 else len(dims) >= rank) else None


def _spread(sizes: Sequence[int], n: int) -> list[int]:
    """``sizes`` over ``n`` slots by position: slot i takes what lies in the i-th n-th of them (a size spread evenly
    over its own place); ``sizes`` themselves where they number n. The total is kept."""
    m = len(sizes)
    if m == n:
        return list(sizes)
    before = [0]
    for s in sizes:
        before.append(before[-1] + s)

    def upto(x: float) -> float:
        i = int(x)
        return before[m] if i >= m else before[i] + (x - i) * sizes[i]

    cuts = [round(upto(i * m / n)) for i in range(n + 1)]
    return [b - a for a, b in zip(cuts, cuts[1:])]


def _from_optimizer_kernels(graph: nx.DiGraph, step: Any, keys: list[Any]) -> _Estimate | None:
    """A step's sizes from its optimizer's fused kernels (the module docstring): the parameters' chunks, those of
    the calls that cover the most (a call over the parameters, their gradients or state; others cover less), pinned
    where a launch ended at its most tensors and spread evenly between; None without such kernels, or with fewer
    chunks than gradients (they cover something else)."""
    calls: dict[Any, list[tuple[float, int, str]]] = {}
    for v, a in attrs_of(graph).items():
        blocks = a.get("blocks")
        if a.get("step") == step and a.get("phase") == "optimizer" and type(blocks) is int and blocks > 0:
            call = a.get("top_op_id")
            calls.setdefault((call, a.get("op")) if call is not None else ("task", v), []).append(
                (a["start"], blocks, a["name"])
            )
    chunks = {call: sum(b for _, b, _ in launches) for call, launches in calls.items()}
    n, total = len(keys), max(chunks.values(), default=0)
    if total < n:
        return None
    pins = {0: 0, n: total}
    for call, launches in calls.items():
        if chunks[call] == total:
            for tensors, upto in _pins(sorted(launches)):
                pins[tensors] = upto if pins.get(tensors, upto) == upto else -1
    marks = sorted(pins.items())
    if any(t1 <= t0 or c1 - c0 < t1 - t0 for (t0, c0), (t1, c1) in zip(marks, marks[1:])):
        marks = [(0, 0), (n, total)]  # pins that do not fit these gradients (or each other): none
    elements: list[int] = []  # in the optimizer's order: the parameters'
    for (t0, c0), (t1, c1) in zip(marks, marks[1:]):
        each = ((c1 - c0) - (t1 - t0) / 2) * CHUNK_ELEMENTS / (t1 - t0)
        elements += [round(each)] * (t1 - t0)
    low, high = (total - n) * CHUNK_ELEMENTS + n, total * CHUNK_ELEMENTS
    detail = (
        f"{total:,} chunks of {CHUNK_ELEMENTS:,} elements over {n} tensors a step: {low:,} to {high:,} parameters, "
        "the middle taken"
    )
    error = 100.0 * (n / 2) / (total - n / 2)
    return _Estimate(elements[::-1], max(ESTIMATE_FLOOR_PCT, error), detail)


def _pins(launches: list[tuple[float, int, str]]) -> list[tuple[int, int]]:
    """(tensors, chunks) up to each boundary between one call's launches (in order) that their sizes fix: a launch of
    fewer than MAX_BLOCKS blocks that is not the call's last stopped at its depth's most tensors, at a tensor's end;
    one of MAX_BLOCKS may have stopped inside a tensor, and the count of tensors after it is not known."""
    out: list[tuple[int, int]] = []
    tensors = chunks = 0
    for _, blocks, name in launches[:-1]:
        depth = int(m.group(1)) if (m := _DEPTH.search(name)) else 0
        if blocks >= MAX_BLOCKS or not 1 <= depth <= len(MAX_TENSORS):
            break
        tensors += MAX_TENSORS[depth - 1]
        chunks += blocks
        out.append((tensors, chunks))
    return out


_ESTIMATORS: tuple[tuple[str, Callable[[nx.DiGraph, Any, list[Any]], _Estimate | None]], ...] = (
    (COLLECTIVES, _from_collectives),
    (WEIGHT_SHAPES, _from_weight_shapes),
    (OPTIMIZER_KERNELS, _from_optimizer_kernels),
)

# The estimate a script's gradients came from, kept beside the graph once a script reads them (the DSL's
# gradients() and gradient_buckets()): the prediction's interval widens for it (daydream.perf.trust.uncertainty).
_USED = "estimated gradient sizes"


def note_estimate_used(graph: nx.DiGraph, sizes: GradientSizes) -> None:
    """Remember that a change to ``graph`` used estimated gradient sizes (the least certain, where several)."""
    if not sizes.estimated:
        return
    kept = used_estimate(graph)
    if kept is None or sizes.error_pct > kept.error_pct:
        derived.keep(graph, _USED, sizes, ())


def used_estimate(graph: nx.DiGraph) -> GradientSizes | None:
    """The estimated gradient sizes a change to ``graph`` used, if any (:func:`note_estimate_used`)."""
    return derived.cached(graph, _USED, ())


def ddp_buckets(
    grads: list[Gradient], cap: float = DDP_BUCKET_CAP, first_cap: float = DDP_FIRST_BUCKET
) -> list[list[Gradient]]:
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
