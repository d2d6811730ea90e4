"""The functions a script can call. Performance models register theirs here (``register_function``)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from daydream.dsl.limits import MAX_LIST
from daydream.dsl.values import format_value
from daydream.errors import DaydreamError, did_you_mean
from daydream.graph import gradients as grad
from daydream.graph import memory as mem
from daydream.graph import pipeline, tensor_parallel
from daydream.graph import select as sel
from daydream.graph.adjacency import attrs_of
from daydream.graph.select import Selection


@dataclass(frozen=True)
class Cost:
    """What a call's work costs in budget units (daydream/dsl/limits.py), besides the 1 per call and per item of its
    arguments and of its result every call is charged; bench/bench_budget.py measures every function against it.
    Work that depends on the arguments' values (shard_plan's search) is charged as it is done (limits.charge_work)."""

    per_task: int = 0  # per task of the graph it walks (one that simulates it: SIMULATION_COST)
    per_item: int = 0  # per item of its arguments it does more than look at (ordering a selection in time)
    per_call: int = 0  # a model's lookups, a formula's Python
    # a pure function of the graph and its arguments: a repeated call on the unchanged graph is answered from the
    # call cache (daydream.dsl.evaluate) and charged as a call, its work charged once
    cached: bool = False


@dataclass(frozen=True)
class Function:
    """``impl(graph, *args, **kwargs)``; ``graph`` is the graph the script is changing."""

    name: str
    impl: Callable[..., Any]
    min_args: int
    max_args: int
    keywords: tuple[str, ...]
    doc: str
    cost: Cost = Cost()


FUNCTIONS: dict[str, Function] = {}


def register_function(
    name: str,
    impl: Callable[..., Any],
    min_args: int,
    max_args: int,
    doc: str,
    keywords: tuple[str, ...] = (),
    cost: Cost = Cost(),
) -> None:
    """Make ``name(...)`` callable from scripts. ``impl`` gets the graph first, then the script's arguments;
    it raises DaydreamError for bad arguments (the interpreter adds the position). ``cost``: what a call's work
    costs in budget units (:class:`Cost`: per task of the graph, per item of its arguments, per call; whether it
    may be answered from the call cache)."""
    FUNCTIONS[name] = Function(name, impl, min_args, max_args, keywords, doc, cost)


def call_problem(name: str, n_args: int, keywords: list[str]) -> tuple[str, str | None, int | None] | None:
    """What is wrong with calling ``name`` so, if anything: (message, hint, index of the bad keyword or None)."""
    fn = FUNCTIONS.get(name)
    if fn is None:
        return f"unknown function {name!r}", did_you_mean(name, FUNCTIONS), None
    if not fn.min_args <= n_args <= fn.max_args:
        want = str(fn.min_args) if fn.min_args == fn.max_args else f"{fn.min_args} to {fn.max_args}"
        return f"{name}() takes {want} argument{'s' if want != '1' else ''}, got {n_args}", fn.doc, None
    for i, key in enumerate(keywords):
        if key not in fn.keywords:
            return f"{name}() has no argument {key!r}", fn.doc, i
    return None


def _selection(value: Any, fn: str) -> Selection:
    if not isinstance(value, Selection):
        raise DaydreamError(f"{fn}() takes a selection, not {type_name(value)}")
    return value


def _numbers(value: Any, fn: str) -> list[float]:
    if isinstance(value, Selection):
        raise DaydreamError(f"{fn}() takes a list of numbers; for a selection's durations write {fn}(SEL.duration)")
    if not isinstance(value, list):
        raise DaydreamError(f"{fn}() takes a list of numbers, not {type_name(value)}")
    out = [v for v in value if v is not None]
    for v in out:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise DaydreamError(f"{fn}() takes numbers; the list holds {type_name(v)} {v!r}")
    return out


def _count(graph: nx.DiGraph, value: Any) -> int:
    if isinstance(value, (Selection, list, str)):
        return len(value)
    raise DaydreamError(f"count() takes a selection or a list, not {type_name(value)}")


def _first(graph: nx.DiGraph, value: Any, n: int = 1) -> Selection:
    return sel.first(graph, _selection(value, "first"), _int(n, "first"))


def _last(graph: nx.DiGraph, value: Any, n: int = 1) -> Selection:
    return sel.last(graph, _selection(value, "last"), _int(n, "last"))


def _int(value: Any, fn: str) -> int:
    if not is_whole(value) or value < 0:
        raise DaydreamError(f"{fn}(): a count must be a whole number >= 0 (got {_shown(value)})")
    return int(value)


def is_whole(value: Any) -> bool:
    """A whole number: an int, or a finite float without a fraction (never a boolean, an infinity or a nan)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or (math.isfinite(value) and value == int(value))


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value[:40] + "..." if len(value) > 40 else value)
    if isinstance(value, (list, Selection)):
        return type_name(value)
    return repr(value)


def _aggregate(fn: str, reduce: Callable[[list[float]], float], empty: float | None) -> Callable[..., Any]:
    def impl(graph: nx.DiGraph, *values: Any) -> Any:
        numbers = _numbers(values[0], fn) if len(values) == 1 else _numbers(list(values), fn)
        if not numbers:
            if empty is None:
                raise DaydreamError(f"{fn}() of no values")
            return empty
        try:
            return reduce(numbers)
        except (OverflowError, ValueError) as exc:  # math.fsum: "intermediate overflow"
            raise DaydreamError(f"{fn}(): {exc}") from None

    return impl


def _math(fn: str, f: Callable[[float], Any]) -> Callable[..., Any]:
    def impl(graph: nx.DiGraph, x: Any) -> Any:
        if x is None:
            return None
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise DaydreamError(f"{fn}() takes a number, not {type_name(x)}")
        try:
            return f(x)
        except (ValueError, OverflowError) as exc:
            raise DaydreamError(f"{fn}({x!r}): {exc}") from None

    return impl


def _round(graph: nx.DiGraph, x: Any, digits: Any = 0) -> Any:
    return _math("round", lambda v: round(v, _int(digits, "round")))(graph, x)


def _range(graph: nx.DiGraph, a: Any, b: Any = None) -> list[int]:
    lo, hi = (0, _int(a, "range")) if b is None else (_int(a, "range"), _int(b, "range"))
    if hi - lo > MAX_LIST:
        raise DaydreamError(f"range(): {hi - lo:,} numbers; a list holds at most {MAX_LIST:,}")
    return list(range(lo, hi))


def number_argument(value: Any, fn: str, what: str) -> float:
    """``value`` as a finite float, or a DaydreamError naming the function and the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DaydreamError(f"{fn}(): {what} must be a number, not {type_name(value)}")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise DaydreamError(f"{fn}(): {what} must be a finite number, not {_shown(value)}")
    return out


def whole_argument(value: Any, fn: str, what: str, low: int = 0, high: int = 2**53) -> int:
    """``value`` as an int in [low, high] (a float without a fraction counts), or a DaydreamError."""
    if not is_whole(value) or not low <= value <= high:
        raise DaydreamError(f"{fn}(): {what} must be a whole number from {low} to {high:,}, not {_shown(value)}")
    return int(value)


def _runs(graph: nx.DiGraph, value: Any) -> list[Selection]:
    return sel.runs(graph, _selection(value, "runs"))


def _input_bytes(graph: nx.DiGraph, value: Any, element_bytes: Any = 4) -> float | None:
    """Bytes of the first input tensor of the op of the first task of a selection (none without shapes)."""
    tasks = sel.in_time_order(graph, _selection(value, "input_bytes"))
    size = number_argument(element_bytes, "input_bytes", "element_bytes")
    for node in tasks:
        elements = grad.tensor_elements(attrs_of(graph)[node].get("shapes"))
        if elements is not None:
            return elements * size
    return None


def _gradient_buckets(
    graph: nx.DiGraph, cap: Any = grad.DDP_BUCKET_CAP, first: Any = grad.DDP_FIRST_BUCKET, element_bytes: Any = 4
) -> list[list[Any]]:
    fn = "gradient_buckets"
    size = whole_argument(element_bytes, fn, "element_bytes", 1, 1024)
    grads = _read_gradients(graph, size)
    buckets = grad.ddp_buckets(grads, number_argument(cap, fn, "cap"), number_argument(first, fn, "first"))
    return [[Selection([grad.bucket_ready(graph, b)]), sum(g.nbytes for g in b)] for b in buckets]


def _gradients(graph: nx.DiGraph, element_bytes: Any = 4) -> list[list[Any]]:
    size = whole_argument(element_bytes, "gradients", "element_bytes", 1, 1024)
    return [[Selection([g.ready]), g.nbytes, g.layer] for g in _read_gradients(graph, size)]


def _read_gradients(graph: nx.DiGraph, element_bytes: int) -> list[grad.Gradient]:
    """The step's gradients for a script, which changes the graph by them: where their sizes are estimated, the
    prediction's interval widens for it (grad.note_estimate_used)."""
    grads, sizes = grad.read_gradients(graph, element_bytes)
    grad.note_estimate_used(graph, sizes)
    return grads


def _gradient_estimate(graph: nx.DiGraph) -> str | None:
    """How the step's gradient sizes were estimated, a line; none where the trace records them or has none."""
    try:
        sizes = grad.gradient_sizes(graph)
    except DaydreamError:
        return None
    return sizes.note() if sizes.estimated else None


def _text(graph: nx.DiGraph, value: Any) -> str:
    """A value as ``print`` shows it: a string as it is, a number to 6 significant digits (a whole number in full)."""
    return value if isinstance(value, str) else format_value(value)


def _tensor_parallel_pairs(graph: nx.DiGraph) -> list[list[Any]]:
    def linear(x: Any) -> list[Any]:
        return [x.layer, x.tokens, x.in_features, x.out_features]

    return [
        [p.step, [linear(c) for c in p.columns], linear(p.row), list(p.sharded), list(p.replicated)]
        for p in tensor_parallel.split_pairs(graph)
    ]


def _linears(graph: nx.DiGraph) -> list[list[Any]]:
    return [[step, x.layer, x.tokens, x.in_features, x.out_features] for step, x in tensor_parallel.linear_calls(graph)]


def _pipeline_stages(graph: nx.DiGraph, stages: Any, step: Any = None, cut: Any = None) -> list[list[Any]]:
    fn = "pipeline_stages"
    n = whole_argument(stages, fn, "STAGES", 1, 4096)
    if step is not None and not isinstance(step, str):
        raise DaydreamError(f"{fn}(): step is a step's name (a string) or none, not {type_name(step)}")
    if cut is not None and not (isinstance(cut, list) and all(isinstance(c, str) for c in cut)):
        raise DaydreamError(f"{fn}(): cut is a list of block names (strings) or none, not {type_name(cut)}")
    found = pipeline.blocks(graph, step)
    if not found:
        return []
    return [
        [
            list(s.blocks),
            s.forward_us,
            s.backward_us,
            s.forward_tasks,
            s.backward_tasks,
            s.send_elements,
            s.cpu_forward_us,
            s.cpu_backward_us,
        ]
        for s in pipeline.cut_stages(found, n, cut)
    ]


def _gradients_missing(graph: nx.DiGraph) -> str | None:
    """Why the step's gradients cannot be had (none where they can): what a script that needs them requires."""
    try:
        grad.gradients(graph, 4)
    except DaydreamError as exc:
        return str(exc)
    return None


def _tensors(graph: nx.DiGraph, selection: Any = None, category: Any = None, freed: Any = False) -> mem.TensorSet:
    memory = mem.memory_of(graph)
    if selection is not None and not isinstance(selection, Selection):
        raise DaydreamError(f"tensors() takes a selection of tasks (or none: every tensor), not {type_name(selection)}")
    if category is not None and not (
        isinstance(category, str) or (isinstance(category, list) and all(isinstance(c, str) for c in category))
    ):
        raise DaydreamError(f"tensors(): category is a category's name or a list of them, not {type_name(category)}")
    if not isinstance(freed, bool):
        raise DaydreamError(f"tensors(): freed is true or false, not {type_name(freed)}")
    codes = mem.category_codes(category) if category is not None else None
    if memory is None:
        return mem.TensorSet(np.zeros(0, np.int64), 0, 0.0)
    if selection is None:
        rows = memory.of_categories(codes) if codes is not None else np.arange(len(memory))
    else:
        rows = memory.of_tasks(selection, codes, "free" if freed else "alloc")
    return mem.TensorSet(rows, memory.generation, float((memory.nbytes[rows] * memory.scale[rows]).sum()))


def _tensor_bytes(graph: nx.DiGraph, tensors: Any) -> float:
    if not isinstance(tensors, mem.TensorSet):
        raise DaydreamError(f"tensor_bytes() takes tensors (tensors(...)), not {type_name(tensors)}")
    return tensors.nbytes


def _block(graph: nx.DiGraph, layer: Any) -> str | None:
    if layer is not None and not isinstance(layer, str):
        raise DaydreamError(f"block() takes a module path (a task's layer), not {type_name(layer)}")
    return pipeline.block_of(layer)


def type_name(value: Any) -> str:
    if isinstance(value, Selection):
        return "a selection"
    if isinstance(value, mem.TensorSet):
        return "tensors"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


# what a call's work costs besides the 1 per call, per item of its arguments and of its result (Function), as
# bench/bench_budget.py measured it: ordering a selection in time, walking its tasks' edges, a model's structure
_COSTS: dict[str, Cost] = {
    **{
        name: Cost(per_item=1)
        for name in ("first", "last", "launches", "kernels", "ops", "parents", "sum", "mean", "median", "min", "max")
    },
    # a number's Python (its checks, the result's) on a loaded machine
    **{name: Cost(per_call=5) for name in ("abs", "ceil", "floor", "round", "sqrt", "log", "log2", "exp")},
    "repeats": Cost(per_item=4, cached=True),
    "runs": Cost(per_item=2, cached=True),
}
# the step's gradients: a walk of the whole graph of up to ~19 us a task (resnet_kineto's 38k tasks: 0.4-0.7 s)
_GRADIENT_WALK = Cost(per_task=20, cached=True)

for _name, _impl, _lo, _hi, _doc in [
    ("first", _first, 1, 2, "first(SEL) or first(SEL, N): the task (the N tasks) of SEL that start first"),
    ("last", _last, 1, 2, "last(SEL) or last(SEL, N): the task (the N tasks) of SEL that start last"),
    (
        "launches",
        lambda g, s: sel.launches(g, _selection(s, "launches")),
        1,
        1,
        "launches(SEL): the CPU calls that launched SEL's GPU tasks",
    ),
    (
        "kernels",
        lambda g, s: sel.kernels(g, _selection(s, "kernels")),
        1,
        1,
        "kernels(SEL): the GPU tasks launched by SEL's CPU calls",
    ),
    (
        "ops",
        lambda g, s: sel.op_tasks(g, _selection(s, "ops")),
        1,
        1,
        (
            "ops(SEL): the CPU tasks of the op calls SEL's tasks belong to (a kernel's launching op, with every task"
            " under it; by top_op_id)"
        ),
    ),
    (
        "parents",
        lambda g, s: sel.parents(g, _selection(s, "parents")),
        1,
        1,
        "parents(SEL): tasks SEL depends on directly",
    ),
    (
        "children",
        lambda g, s: sel.children(g, _selection(s, "children")),
        1,
        1,
        "children(SEL): tasks that depend directly on SEL",
    ),
    ("count", _count, 1, 1, "count(X): tasks in a selection, items in a list"),
    ("sum", _aggregate("sum", math.fsum, 0.0), 1, 64, "sum(LIST): total (none values skipped)"),
    ("mean", _aggregate("mean", statistics.fmean, None), 1, 64, "mean(LIST): average"),
    ("median", _aggregate("median", statistics.median, None), 1, 64, "median(LIST)"),
    ("min", _aggregate("min", min, None), 1, 64, "min(LIST) or min(A, B, ...)"),
    ("max", _aggregate("max", max, None), 1, 64, "max(LIST) or max(A, B, ...)"),
    ("abs", _math("abs", abs), 1, 1, "abs(X)"),
    ("ceil", _math("ceil", math.ceil), 1, 1, "ceil(X): smallest whole number >= X"),
    ("floor", _math("floor", math.floor), 1, 1, "floor(X): largest whole number <= X"),
    ("round", _round, 1, 2, "round(X) or round(X, DIGITS)"),
    ("sqrt", _math("sqrt", math.sqrt), 1, 1, "sqrt(X)"),
    ("log", _math("log", math.log), 1, 1, "log(X): natural logarithm"),
    ("log2", _math("log2", math.log2), 1, 1, "log2(X)"),
    ("exp", _math("exp", math.exp), 1, 1, "exp(X)"),
    ("range", _range, 1, 2, "range(N) or range(A, B): the whole numbers from 0 (or A) below N (or B)"),
    (
        "repeats",
        lambda g, s: sel.repeats(g, _selection(s, "repeats")),
        1,
        1,
        (
            "repeats(SEL): a model's blocks by the structure of SEL's op calls (the stretch from the first to the last"
            " occurrence of its repeated block), a selection per block; [] where none repeats"
        ),
    ),
    (
        "runs",
        _runs,
        1,
        1,
        (
            "runs(SEL): SEL split into maximal runs of tasks that follow each other directly on their thread (a list of"
            " selections)"
        ),
    ),
]:
    register_function(_name, _impl, _lo, _hi, _doc, cost=_COSTS.get(_name, Cost()))
register_function(
    "input_bytes",
    _input_bytes,
    1,
    2,
    "input_bytes(SEL, element_bytes = 4): bytes of the first input tensor of the first task of SEL with recorded shapes"
    " (none without)",
    keywords=("element_bytes",),
    cost=Cost(per_item=1),
)
register_function(
    "gradients",
    _gradients,
    0,
    1,
    "gradients(element_bytes = 4): the step's gradients in the order they became ready, each step's in turn, each "
    "[the task after which it is ready, its bytes (recorded, else estimated: gradient_estimate()), its module (none "
    "where the trace does not say)]",
    keywords=("element_bytes",),
    cost=_GRADIENT_WALK,
)
register_function(
    "tensors",
    _tensors,
    0,
    3,
    "tensors(SEL = none, category = none, freed = false): the step's tensors the tasks of SEL allocate (freed = true: "
    'free), of a category or a list of them ("activations", "gradients", "optimizer state", '
    '"parameters", "inputs", "temporaries", "before the step"; daydream.graph.memory); SEL none: every '
    "tensor (of the category). `scale TENSORS by F [after TASK] [until TASK]` changes their bytes",
    keywords=("category", "freed"),
    cost=Cost(per_item=1, per_call=10),
)
register_function(
    "block",
    _block,
    1,
    1,
    "block(LAYER): the block a module belongs to (daydream.graph.pipeline: the path up to its first numbered module, "
    "Encoder.layers.3, else its first two components); none for the root module or none",
)
register_function(
    "tensor_bytes",
    _tensor_bytes,
    1,
    1,
    "tensor_bytes(TENSORS): their bytes as the trace (or the shapes) give them, times the scales so far",
)
register_function(
    "text",
    _text,
    1,
    1,
    'text(X): X as print shows it, a string: a name that holds a number ("gpu:" + text(k) + "/7")',
    cost=Cost(per_call=5),
)
register_function(
    "tensor_parallel_pairs",
    _tensor_parallel_pairs,
    0,
    0,
    "tensor_parallel_pairs(): the Linear pairs Megatron-LM's tensor parallelism splits, found in the forward pass "
    "(daydream.graph.tensor_parallel), in time order, each [STEP, COLUMNS, ROW, SHARDED, REPLICATED]: COLUMNS the "
    "column-parallel Linears and ROW the row-parallel one as [MODULE, TOKENS, IN_FEATURES, OUT_FEATURES], SHARDED the "
    "modules of the ops between them (on activations split by the ranks), REPLICATED those of the ops since the "
    "step's previous ROW (norms, residual adds); [] without modules and shapes in the trace",
    cost=Cost(per_task=2, cached=True),
)
register_function(
    "linears",
    _linears,
    0,
    0,
    "linears(): the forward pass's Linear calls (aten::linear, or addmm / mm / matmul by a 2-D weight) with their "
    "modules and input shapes, in time order, each [STEP, MODULE, TOKENS, IN_FEATURES, OUT_FEATURES]",
    cost=Cost(per_task=1, cached=True),
)
register_function(
    "pipeline_stages",
    _pipeline_stages,
    1,
    3,
    "pipeline_stages(STAGES, step = none, cut = none): the forward pass's blocks (daydream.graph.pipeline: a numbered "
    "module of the model's layer list, or a top-level child) cut into STAGES contiguous stages, balanced by their "
    "measured forward + backward time, or cut where the blocks named in `cut` begin; per stage [BLOCKS, FORWARD_US, "
    "BACKWARD_US, FORWARD_TASKS, BACKWARD_TASKS, SEND_ELEMENTS, CPU_FORWARD_US, CPU_BACKWARD_US] (the elements of the "
    "activation it sends the next stage, none for the last; on a GPU trace the CPU time of the calls that issue its "
    "work); `step` (none: the graph's last step); [] without modules",
    keywords=("step", "cut"),
    cost=Cost(per_task=2, cached=True),
)
register_function(
    "gradients_missing",
    _gradients_missing,
    0,
    0,
    "gradients_missing(): why the step's gradients cannot be had (no AccumulateGrad calls, no sizes recorded or to "
    "estimate), none where they can: `require gradients_missing() == none, gradients_missing()`",
    cost=_GRADIENT_WALK,
)
register_function(
    "gradient_estimate",
    _gradient_estimate,
    0,
    0,
    "gradient_estimate(): how the step's gradient sizes were estimated, a line to print (from the traced DDP "
    "all-reduces, the forward ops' weight shapes or the optimizer's fused kernels: daydream.graph.gradients); none "
    "where the trace records them (shapes, execution trace) or has none (gradients_missing() says why)",
    cost=_GRADIENT_WALK,
)
register_function(
    "gradient_buckets",
    _gradient_buckets,
    0,
    3,
    "gradient_buckets(cap = 25MiB, first = 1MiB, element_bytes = 4): DDP's gradient buckets, per step in ready order, "
    "each [the task after which its gradients are ready, its bytes]",
    keywords=("cap", "first", "element_bytes"),
    cost=_GRADIENT_WALK,
)
