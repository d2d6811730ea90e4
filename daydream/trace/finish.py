"""What both filers do once a trace's events are filed (event by event, :class:`daydream.trace.load._Families`; a field
at a time, :class:`daydream.trace.filing.ColumnFamilies`): the document's metadata read and checked, the launch flows
bound to their calls and kernels, each family ordered by start (:func:`sort_by_start`, which the graph builder orders
by too), the events skipped said and a trace with nothing to simulate refused.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

import numpy as np

from daydream.errors import TraceError
from daydream.trace.job import MAX_RANKS
from daydream.trace.model import FAMILIES, Trace
from daydream.trace.reading import MAX_NESTING, MAX_TIME_US, nesting_exceeds
from daydream.trace.schema import Event, EventArgs, TraceFile


def _check_distributed(trace: Trace) -> None:
    """``rank`` and ``world_size`` bounded before anything sizes a list by them (a job of 1e11 ranks would build one
    entry per rank): whole numbers, 0 <= rank < world_size <= MAX_RANKS. A value out of range is dropped with a
    warning (the file name gives a job's rank, its files its size); one that is no whole number is ignored, as before.
    """
    info = trace.distributed
    size, rank = info.get("world_size"), info.get("rank")
    if _whole(size) and not 1 <= size <= MAX_RANKS:
        trace.warnings.append(
            f"{trace.path}: distributedInfo.world_size = {size} ignored: a job has 1 to {MAX_RANKS:,} ranks"
        )
        del info["world_size"]
        size = None
    if _whole(rank) and not 0 <= rank < (size if _whole(size) else MAX_RANKS):
        bound = f"below its world_size {size}" if _whole(size) else f"0 to {MAX_RANKS - 1:,}"
        trace.warnings.append(f"{trace.path}: distributedInfo.rank = {rank} ignored: a rank is {bound}")
        del info["rank"]


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_document(trace: Trace, document: TraceFile) -> None:
    """The trace's metadata from the rest of its document (its devices, its rank), checked."""
    if not trace.event_count:
        raise TraceError(f"{trace.path}: no events (the trace's 'traceEvents' list is empty)", path=trace.path)
    trace.devices = list(document.deviceProperties or [])
    if document.distributedInfo and nesting_exceeds(document.distributedInfo):
        raise TraceError(f"{trace.path}: 'distributedInfo' nests more than {MAX_NESTING} levels", path=trace.path)
    trace.distributed = dict(document.distributedInfo or {})
    _check_distributed(trace)
    trace.schema_version = document.schemaVersion


def finish_families(trace: Trace, launch_flows: list[Event], skipped: int) -> None:
    """Once the events are filed (``skipped`` complete events without a valid time): the launch flows bind their
    calls and kernels, each family ordered by start, the longest first; a warning for the events skipped, and a
    trace with nothing to simulate refused."""
    _correlate_by_flows(trace, launch_flows)
    for field, _ in FAMILIES:
        if field not in trace.pending:  # a pending family is ordered as its events are made (filing.family_events)
            sort_by_start(getattr(trace, field))
    trace.skipped = skipped
    if skipped:
        trace.warnings.append(
            f"{trace.path}: skipped {skipped} complete events without a valid ts/dur (missing, negative, or beyond"
            f" {MAX_TIME_US:g} us)"
        )
    if trace.event_count and not any(trace.family_size(f) for f in ("cpu_ops", "runtime", "gpu", "annotations")):
        why = f"; {skipped} complete events skipped without a valid ts/dur" if skipped else ""
        raise TraceError(
            f"{trace.path}: no profiler events (no CPU ops, runtime calls or GPU activity) in the trace{why}",
            path=trace.path,
        )


def _correlate_by_flows(trace: Trace, flows: list[Event]) -> None:
    """Give runtime calls and GPU events without ``args.correlation`` the id of the launch flow
    ('s' on the call, 'f' on the kernel) that binds them, as some exporters record only the flow."""
    if not flows:
        return
    lacking = [e for e in (*trace.runtime, *trace.gpu) if e.args is None or e.args.correlation is None]
    if not lacking:
        return
    at = {(f.pid, f.tid, f.ts): f.id for f in flows if isinstance(f.id, int)}
    for ev in lacking:
        fid = at.get((ev.pid, ev.tid, ev.ts))
        if fid is None:
            continue
        if ev.args is None:
            ev.args = EventArgs(correlation=fid)  # type: ignore[arg-type]
        else:
            ev.args.correlation = fid  # type: ignore[assignment]


def sort_by_start(events: list[Event], ties: Callable[[Event], Any] | None = None) -> None:
    """Sort in place by start; events that start together by ``ties`` (default: the longest first, an enclosing
    range before what it encloses), then in the order given. One stable sort by start, then each run of equal starts
    (few, and short) by ``ties``: events come almost in order of start, which the sort finds in linear time, where
    a key built per event, or a first sort by length, would cost a full sort; the runs are found over an array of
    the starts."""
    events.sort(key=_TS)
    if len(events) < 2:
        return
    starts = np.fromiter(map(_TS, events), np.float64, len(events))
    tied = np.flatnonzero(starts[1:] == starts[:-1])  # i: events i and i + 1 start together
    if not len(tied):
        return
    # a run of equal starts is a run of consecutive such i: from its first i to one past its last
    breaks = np.flatnonzero(np.diff(tied) != 1)
    firsts = np.concatenate((tied[:1], tied[breaks + 1])).tolist()
    lasts = (np.concatenate((tied[breaks], tied[-1:])) + 2).tolist()
    tie_key = _LONGER_FIRST if ties is None else ties
    for i, j in zip(firsts, lasts):
        events[i:j] = sorted(events[i:j], key=tie_key)


def _LONGER_FIRST(ev: Event) -> float:
    return -ev.dur  # type: ignore[operator]


_TS = attrgetter("ts")
