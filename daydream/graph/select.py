"""Selections: sets of tasks of a graph, found by kind and attributes, combined, and followed along edges.

These are the primitives behind ``select`` in .whatif scripts; notebooks call them directly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from typing import Any

import networkx as nx
import numpy as np

from daydream.errors import DaydreamError
from daydream.graph import derived
from daydream.graph.adjacency import attrs_of, predecessors_of, successors_of
from daydream.graph.schema import CPU_KINDS, GPU_KINDS, ORDER_KINDS

# Selector words of `select KIND`: `gpu` is everything that runs on a GPU, `kernel` the compute kernels
# only (task kind "gpu"), `cpu` everything on a CPU thread.
KIND_SELECTORS: dict[str, frozenset[str]] = {
    "task": frozenset(CPU_KINDS | GPU_KINDS),
    "cpu": frozenset(CPU_KINDS),
    "dataloader": frozenset({"dataloader"}),
    "gpu": frozenset(GPU_KINDS),
    "kernel": frozenset({"gpu"}),
    "memcpy": frozenset({"memcpy"}),
    "memset": frozenset({"memset"}),
    "comm": frozenset({"comm"}),
}

# The longest block `repeats` looks for, in op calls: a transformer layer is tens of calls; the bound keeps the search
# linear in the selection's size (a few passes over it per block length).
MAX_REPEAT_CALLS = 256
# How many block lengths `repeats` weighs (those with the longest back-to-back runs): each costs a pass per first call.
REPEAT_CANDIDATES = 16

# Attributes matched as regular expressions by the keyword filters of `select` (others compare equal).
_REGEX_ATTRIBUTES = frozenset({"name", "layer", "op", "top_op", "thread", "phase", "region", "step", "collective"})


class Selection:
    """An immutable set of task ids. ``|``, ``&`` and ``-`` combine selections."""

    __slots__ = ("nodes",)

    def __init__(self, nodes: Iterable[Any] = ()) -> None:
        self.nodes: frozenset[Any] = nodes if isinstance(nodes, frozenset) else frozenset(nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.nodes)

    def __contains__(self, node: object) -> bool:
        return node in self.nodes

    def __bool__(self) -> bool:
        return bool(self.nodes)

    def __or__(self, other: Selection) -> Selection:
        return Selection(self.nodes | other.nodes)

    def __and__(self, other: Selection) -> Selection:
        return Selection(self.nodes & other.nodes)

    def __sub__(self, other: Selection) -> Selection:
        return Selection(self.nodes - other.nodes)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Selection) and self.nodes == other.nodes

    def __hash__(self) -> int:
        return hash(self.nodes)

    def __repr__(self) -> str:
        shown = sorted(self.nodes, key=repr)[:8]
        more = f", ... {len(self.nodes) - 8} more" if len(self.nodes) > 8 else ""
        return f"Selection({', '.join(map(repr, shown))}{more})"


def task_value(attrs: dict[str, Any], name: str) -> Any:
    """Attribute ``name`` of a task; ``end`` is derived (traced start + current duration)."""
    if name == "end":
        start = attrs.get("start")
        return None if start is None else start + attrs["duration"]
    return attrs.get(name)


def kind_set(kind: str | Iterable[str] | None) -> frozenset[str] | None:
    """The task kinds a selector word (or several) stands for; None for every kind."""
    if kind is None:
        return None
    words = [kind] if isinstance(kind, str) else list(kind)
    out: set[str] = set()
    for w in words:
        if w not in KIND_SELECTORS:
            raise DaydreamError(f"unknown task kind selector {w!r}: use one of {', '.join(KIND_SELECTORS)}")
        out |= KIND_SELECTORS[w]
    return frozenset(out)


def select(
    graph: nx.DiGraph,
    kind: str | Iterable[str] | None = None,
    where: Callable[[dict[str, Any]], Any] | None = None,
    among: Iterable[Any] | None = None,
    **filters: Any,
) -> Selection:
    """Tasks of ``graph`` of the given kind selector(s) for which ``where(attrs)`` is true and every filter holds.

    A filter ``attr=value`` matches: a regular expression (searched) for text attributes such as ``name``,
    ``layer``, ``op``, ``phase``; ``(low, high)`` an inclusive range, either end None for open; a list or set:
    membership; anything else: equality. ``class_=`` stands for ``class``. ``among``: only these tasks are tested
    (the candidates :func:`candidates` found), in graph order; by default every task.
    """
    kinds = kind_set(kind)
    tests = [_filter(name.rstrip("_"), value) for name, value in filters.items()]
    nodes = attrs_of(graph)
    if among is None and kinds is not None:
        among = _of_kinds(graph, kinds)
    pairs = nodes.items() if among is None else ((n, nodes[n]) for n in among)
    return Selection(
        node
        for node, attrs in pairs
        if (kinds is None or attrs["kind"] in kinds)
        and (where is None or where(attrs))
        and (not tests or all(t(attrs) for t in tests))
    )


# Attributes `candidates` cannot look up by value: derived from the durations, which change without the tasks.
_UNINDEXED = frozenset({"duration", "end"})
# Task starts compared as floats only where a float holds them exactly.
_EXACT_FLOAT = 2.0**53
# Attributes an insert changes on tasks already there (it splits its predecessor's gap): their index is made again
# after every change to the tasks; the others' grows with the tasks inserted (`_ValueIndex.grown`).
_CHANGED_BY_INSERTS = frozenset({"gap"})


class _ValueIndex:
    """The tasks of a graph (their positions in graph order) by one attribute's value (``attribute`` None: none);
    per value, on first use, those positions ordered by start, their starts, and the tasks whose start is not a real
    number."""

    __slots__ = ("attribute", "by_start", "by_value", "nodes", "starts")

    def __init__(self, graph: nx.DiGraph, attribute: str | None) -> None:
        self.attribute = attribute
        self.nodes: list[Any] = []
        self.by_value: dict[Any, list[int]] | None = {} if attribute is not None else None
        self.starts: list[Any] = []
        self.by_start: dict[Any, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._add(list(attrs_of(graph)), list(attrs_of(graph).values()))

    def _add(self, nodes: list[Any], attrs: list[dict[str, Any]]) -> None:
        """Index ``nodes`` (with their ``attrs``), the graph's next tasks in its order."""
        first = len(self.nodes)
        self.nodes.extend(nodes)
        self.starts.extend(map(dict.get, attrs, repeat("start")))
        self.by_start.clear()
        by_value = self.by_value
        if by_value is not None:
            try:
                for p, v in enumerate(map(dict.get, attrs, repeat(self.attribute)), first):
                    if v != v:  # NaN: equal to nothing, but a dict finds the same object
                        continue
                    by_value.setdefault(v, []).append(p)
            except TypeError:  # an unhashable value (a list): equality is not a lookup
                self.by_value = None

    def grown(self, graph: nx.DiGraph) -> bool:
        """Bring the index up to the graph's tasks where tasks were only added since (inserts append to the graph's
        order: the task just before the new ones is the last one indexed); False where any was removed (the index
        is then made again). What an insert changes on other tasks is only their gap (`_CHANGED_BY_INSERTS`)."""
        if not self.nodes:
            return False
        added = derived.added_since(graph, len(self.nodes), self.nodes[-1])
        if added is None:
            return False
        if added:
            node_attrs = attrs_of(graph)
            self._add(added, [node_attrs[u] for u in added])
        return True

    def in_start_order(self, value: Any, positions: list[int] | range) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        found = self.by_start.get(value)
        if found is None:
            starts = self.starts
            real = [p for p in positions if _real(starts[p])]
            others = np.asarray([p for p in positions if not _real(starts[p])], np.int64)
            keys = np.asarray([float(starts[p]) for p in real], np.float64)
            order = np.argsort(keys, kind="stable")
            found = self.by_start[value] = (np.asarray(real, np.int64)[order], keys[order], others)
        return found


def _real(v: Any) -> bool:
    return type(v) in (int, float) and -_EXACT_FLOAT < v < _EXACT_FLOAT


def _value_index(graph: nx.DiGraph, attribute: str | None) -> _ValueIndex:
    """The index of ``attribute`` (None: of the starts alone; a start is never set): kept until that attribute is
    set or a task removed, grown as tasks are inserted."""
    name = f"select_by:{attribute}"
    if attribute in _CHANGED_BY_INSERTS:
        depends_on: tuple[str, ...] = (derived.TASKS, derived.ATTRIBUTES)
    else:
        depends_on = () if attribute is None else (derived.attribute(attribute),)
    found = derived.cached(graph, name, depends_on)
    if found is None or not found.grown(graph):
        found = derived.keep(graph, name, _ValueIndex(graph, attribute), depends_on)
    return found


def candidates(
    graph: nx.DiGraph,
    equal: tuple[str, Any] | None = None,
    low: tuple[float, bool] | None = None,
    high: tuple[float, bool] | None = None,
) -> list[Any] | None:
    """The tasks, in graph order, that can pass a test beginning with ``ATTR == VALUE`` (``equal``) and start
    comparisons (``low``: start > or >= (inclusive) the number, ``high``: start < or <=), from indexes kept among
    the graph's derived values: the tasks for which those tests hold, and those whose start is not a real number
    (their comparison is the test's to judge). None where no index answers (an attribute derived from durations,
    values that are lists, a value that is not hashable or a NaN, a bound that is not a finite number): test
    every task."""
    attribute = None
    if equal is not None:
        attribute, value = equal
        if not _indexable(attribute, value):
            return None
    for bound in (low, high):
        if bound is not None and not is_real_number(bound[0]):
            return None
    index = _value_index(graph, attribute)
    if equal is not None:
        if index.by_value is None:
            return None
        positions: list[int] | range = index.by_value.get(equal[1], [])
    else:
        positions = range(len(index.nodes))
    if low is None and high is None:
        return [index.nodes[p] for p in positions]
    ordered, starts, others = index.in_start_order(equal[1] if equal is not None else (), positions)
    lo, hi = 0, len(starts)
    if low is not None:
        lo = int(np.searchsorted(starts, low[0], "left" if low[1] else "right"))
    if high is not None:
        hi = int(np.searchsorted(starts, high[0], "right" if high[1] else "left"))
    kept = np.sort(np.concatenate([ordered[lo : max(lo, hi)], others]))
    nodes = index.nodes
    return [nodes[p] for p in kept.tolist()]


def _of_kinds(graph: nx.DiGraph, kinds: frozenset[str]) -> list[Any] | None:
    """The tasks of ``kinds``, in graph order, from the index by kind (a kind is never set: the index outlives
    everything but removals); None where a task's kind is not hashable (then every task is tested)."""
    index = _value_index(graph, "kind")
    if index.by_value is None:
        return None
    nodes = index.nodes
    positions = [p for k in kinds for p in index.by_value.get(k, ())]
    if len(kinds) > 1:
        positions.sort()  # runs of positions in order: merged, not sorted from scratch
    return [nodes[p] for p in positions]


def count_equal(graph: nx.DiGraph, attribute: str, value: Any) -> int | None:
    """How many tasks ``candidates(graph, (attribute, value))`` returns (the tasks whose ``attribute`` equals
    ``value``), without listing them; None where the index does not answer (see :func:`candidates`)."""
    if not _indexable(attribute, value):
        return None
    index = _value_index(graph, attribute)
    return None if index.by_value is None else len(index.by_value.get(value, ()))


def thread_names(graph: nx.DiGraph) -> list[Any]:
    """The threads the graph's tasks run on, each once, from the index by thread (a large graph is asked at every
    insert ``on`` a stream number)."""
    index = _value_index(graph, "thread")
    if index.by_value is None:
        return list({a["thread"]: None for a in attrs_of(graph).values()})
    return list(index.by_value)


def count_of_kinds(graph: nx.DiGraph, kinds: frozenset[str]) -> int:
    """How many tasks of ``kinds`` the graph holds: ``len(select(graph, kinds))``, from the index by kind."""
    index = _value_index(graph, "kind")
    if index.by_value is None:
        return len(select(graph, kinds))
    return sum(len(index.by_value.get(k, ())) for k in kinds)


def _indexable(attribute: str, value: Any) -> bool:
    """Whether the index of ``attribute`` can look up the tasks equal to ``value``: not an attribute derived from the
    durations, a hashable value, not NaN (equal to nothing, but a dict would find the same object)."""
    return attribute not in _UNINDEXED and _is_hashable(value) and value == value


def is_real_number(x: Any) -> bool:
    """A finite int or float (not a bool, NaN or an infinity): a value the indexes can order."""
    return type(x) in (int, float) and math.isfinite(x)


def _is_hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _filter(name: str, value: Any) -> Callable[[dict[str, Any]], bool]:
    if isinstance(value, str) and name in _REGEX_ATTRIBUTES:
        pattern = re.compile(value)
        return lambda a: isinstance(v := a.get(name), str) and pattern.search(v) is not None
    if isinstance(value, tuple) and len(value) == 2:
        low, high = value

        def in_range(a: dict[str, Any]) -> bool:
            v = task_value(a, name)
            return isinstance(v, (int, float)) and (low is None or v >= low) and (high is None or v <= high)

        return in_range
    if isinstance(value, (list, set, frozenset)):
        members = set(value)
        return lambda a: task_value(a, name) in members
    return lambda a: task_value(a, name) == value


def in_time_order(graph: nx.DiGraph, selection: Iterable[Any]) -> list[Any]:
    """The tasks by traced start (inserted tasks carry their anchor's time), ties by id."""
    nodes = attrs_of(graph)
    return sorted(selection, key=lambda n: (_start_key(nodes[n]), _id_key(n)))


def _start_key(attrs: dict[str, Any]) -> float:
    s = attrs.get("start")
    return float("inf") if s is None else s


def _id_key(node: Any) -> tuple[int, Any]:
    return (0, node) if isinstance(node, int) else (1, repr(node))


def first(graph: nx.DiGraph, selection: Selection, n: int = 1) -> Selection:
    """The ``n`` tasks of ``selection`` that start first."""
    return Selection(in_time_order(graph, selection)[:n])


def last(graph: nx.DiGraph, selection: Selection, n: int = 1) -> Selection:
    """The ``n`` tasks of ``selection`` that start last."""
    ordered = in_time_order(graph, selection)
    return Selection(ordered[len(ordered) - n :] if n > 0 else [])


def launches(graph: nx.DiGraph, selection: Selection) -> Selection:
    """The CPU calls that launched the GPU tasks of ``selection``."""
    pred = predecessors_of(graph)
    return Selection(u for v in selection for u, e in pred[v].items() if e.get("kind") == "launch")


def kernels(graph: nx.DiGraph, selection: Selection) -> Selection:
    """The GPU tasks launched by the CPU calls of ``selection`` (or by calls made inside its CPU ops)."""
    succ = successors_of(graph)
    return Selection(v for u in selection for v, e in succ[u].items() if e.get("kind") == "launch")


def op_tasks(graph: nx.DiGraph, selection: Selection) -> Selection:
    """The CPU tasks of the op calls ``selection``'s tasks belong to (their ``top_op_id``: a kernel's launching op with
    every task under it), from an index of the graph's CPU tasks by op call kept while its tasks and attributes stay."""
    index = derived.cached(graph, "cpu tasks by op call", (derived.TASKS, derived.ATTRIBUTES))
    nodes = attrs_of(graph)
    if index is None:
        index = {}
        for v, a in nodes.items():
            if a["kind"] in CPU_KINDS and a.get("top_op_id") is not None:
                index.setdefault(a["top_op_id"], []).append(v)
        derived.keep(graph, "cpu tasks by op call", index, (derived.TASKS, derived.ATTRIBUTES))
    calls = dict.fromkeys(nodes[v].get("top_op_id") for v in selection if v in nodes)
    return Selection(u for c in calls if c is not None for u in index.get(c, ()))


def parents(graph: nx.DiGraph, selection: Selection) -> Selection:
    """Tasks with a dependency edge into ``selection`` (any kind: thread/stream order, launch, sync, comm)."""
    pred = predecessors_of(graph)
    return Selection(u for v in selection for u in pred[v])


def children(graph: nx.DiGraph, selection: Selection) -> Selection:
    """Tasks with a dependency edge from ``selection``."""
    succ = successors_of(graph)
    return Selection(v for u in selection for v in succ[u])


def group_by(graph: nx.DiGraph, selection: Selection, attribute: str) -> list[tuple[Any, Selection]]:
    """``selection`` split by the value of ``attribute``, groups in the order of their first task."""
    groups: dict[Any, list[Any]] = {}
    nodes = attrs_of(graph)
    for node in in_time_order(graph, selection):
        value = task_value(nodes[node], attribute)
        key = tuple(map(_hashable, value)) if isinstance(value, list) else value
        groups.setdefault(key, []).append(node)
    return [(key, Selection(members)) for key, members in groups.items()]


def runs(graph: nx.DiGraph, selection: Selection) -> list[Selection]:
    """``selection`` split into maximal runs of tasks that follow each other directly on their thread or stream
    (each task's order predecessor is the previous one), in time order: chains of back-to-back kernels."""
    nodes, pred = attrs_of(graph), predecessors_of(graph)
    out: list[list[Any]] = []
    where: dict[Any, int] = {}
    for node in in_time_order(graph, selection):
        prev = next((u for u, e in pred[node].items() if e.get("kind") in ORDER_KINDS), None)
        if prev is not None and prev in where and nodes[prev]["thread"] == nodes[node]["thread"]:
            out[where[prev]].append(node)
            where[node] = where[prev]
        else:
            where[node] = len(out)
            out.append([node])
    return [Selection(r) for r in out]


def repeats(graph: nx.DiGraph, selection: Selection) -> list[Selection]:
    """A model's blocks, found by structure where the trace names no layers: the stretch of ``selection`` from the
    first to the last occurrence of its repeated block of op calls, cut where each occurrence begins. A list of
    selections in time order; ``[]`` where no block repeats back to back.

    The tasks in time order form op calls (the tasks of one outermost op call: ``top_op_id``); a call is known by its
    outermost op (``top_op``; its tasks' names where it has none), not by its shapes or kernels (a CNN's blocks
    widen, and a GPU library picks other kernels for other sizes). A block is a sequence of calls that repeats back to
    back somewhere (a transformer's layers, a ResNet's blocks within a stage); of those, the one whose back-to-back
    occurrences cover the most calls (a part of a block recurs too, as a LLaMA layer's q, k and v projections or the
    head's projection, but not back to back throughout), then whose occurrences span the most, then the shortest
    (four blocks of AB, not two of ABAB). Where the block may begin at several calls of its back-to-back run alike (a
    run that begins and ends with part of a block: the embedding's last ``add`` before the first layer, the final
    norm after the last), it begins in the middle. The calls between two occurrences go with the one before (a
    ResNet's downsampling block, which its other blocks do not repeat). The stretch reaches out to the first
    back-to-back repeat of any sequence of two or more distinct calls and to the end of the last, where those lie
    beyond the block's occurrences: a model whose groups of blocks repeat more than its blocks (a ResNet-18's stages
    of a downsampling block and a block) gives the groups, and its first stage, whose two blocks repeat, with the
    first. A heuristic, for what the trace does not name. Blocks of at most ``MAX_REPEAT_CALLS`` calls."""
    nodes = attrs_of(graph)
    calls: list[list[Any]] = []
    previous: Any = None
    for node in in_time_order(graph, selection):
        call = nodes[node].get("top_op_id")
        if call is None or call != previous or not calls:
            calls.append([node])
        else:
            calls[-1].append(node)
        previous = call
    codes: dict[tuple[Any, ...], int] = {}
    seq = np.array([codes.setdefault(_call_key(nodes, c), len(codes)) for c in calls], dtype=np.int64)
    longest: list[
        tuple[int, int, int, int]
    ] = []  # per block length: (calls its longest back-to-back run covers, length, start, slack)
    repeating = (len(seq), -1)  # the calls from the first back-to-back repeat of a sequence to the end of the last
    for period in range(1, min(len(seq) // 2, MAX_REPEAT_CALLS) + 1):
        same = np.concatenate(([0], (seq[:-period] == seq[period:]).astype(np.int8), [0]))
        edges = np.flatnonzero(np.diff(same))
        starts, lengths = edges[::2], edges[1::2] - edges[::2] + period  # runs where call i equals call i + period
        cover = lengths // period * period
        i = int(np.argmax(cover)) if len(cover) else -1
        if i >= 0 and cover[i] >= 2 * period:
            longest.append((int(cover[i]), period, int(starts[i]), int(lengths[i] - cover[i])))
        whole = cover >= 2 * period
        for f, c in zip(
            (starts + (lengths - cover) // 2)[whole].tolist(), cover[whole].tolist()
        ):  # whole repeats, centred
            if len(set(seq[f : f + period].tolist())) >= 2:  # of a sequence, not of one call
                repeating = (min(repeating[0], f), max(repeating[1], f + c))
    candidates = sorted(longest, reverse=True)[:REPEAT_CANDIDATES]
    best: tuple[tuple[int, int, int, float], int, list[int]] | None = None
    weights = np.random.default_rng(0).integers(1, 2**63, size=MAX_REPEAT_CALLS, dtype=np.uint64)
    for _, period, start, slack in candidates:
        windows = np.lib.stride_tricks.sliding_window_view(seq, period)
        keys = (windows.astype(np.uint64) * weights[:period]).sum(axis=1, dtype=np.uint64)  # wraps: a hash per window
        for offset in range(slack + 1):
            first = start + offset
            hits = np.flatnonzero(keys == keys[first])
            hits = hits[(windows[hits] == windows[first]).all(axis=1)]
            occurrences: list[int] = []
            for i in hits.tolist():
                if not occurrences or i >= occurrences[-1] + period:
                    occurrences.append(i)
            # the calls its back-to-back occurrences cover: a part of a block recurs, but not back to back
            in_runs = sum(
                1
                for k, a in enumerate(occurrences)
                if (k and occurrences[k - 1] + period == a)
                or (k + 1 < len(occurrences) and occurrences[k + 1] == a + period)
            )
            span = occurrences[-1] + period - occurrences[0]
            score = (in_runs * period, span, -period, -abs(offset - slack / 2))
            if best is None or score > best[0]:
                best = (score, period, occurrences)
    if best is None:
        return []
    _, period, occurrences = best
    # the stretch that repeats holds the blocks: where it begins before the block's first occurrence (a first stage
    # whose blocks repeat on their own) that goes with the first piece, and where it ends after the last, with the last
    bounds = [min(occurrences[0], repeating[0]), *occurrences[1:], max(occurrences[-1] + period, repeating[1])]
    return [Selection(n for c in calls[a:b] for n in c) for a, b in zip(bounds, bounds[1:])]


def _call_key(nodes: Any, call: list[Any]) -> Any:
    """What an op call is known by in `repeats`: its outermost op (a GPU call's kernels differ with the shapes,
    as the libraries pick another kernel for another size), or its tasks' names where no op is known."""
    top = nodes[call[0]].get("top_op")
    return top if top is not None else tuple(nodes[n].get("name") for n in call)


def _hashable(value: Any) -> Any:
    return tuple(map(_hashable, value)) if isinstance(value, list) else value
