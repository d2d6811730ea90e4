"""A trace's events filed into the families the graph builder reads, from its columns
(:mod:`daydream.trace.columns`): what :class:`daydream.trace.load._Families` does event by event, done a field at a
time over a batch's events at once, with the same checks and the same result (``tests/test_event_columns.py``
compares the two traces on every shared trace). :func:`~daydream.trace.load.load_trace` reads a large trace so
(``COLUMNAR_MIN_TEXT_BYTES``).

The families are still lists of typed events, made here from the columns for the events kept (the builder reads
events), a batch at a time, then ordered as the loader orders them; the flow and metadata events the builder does
not read are never made.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from daydream.trace.columns import ARGS_FIELDS, EventColumns, column_batches
from daydream.trace.load import MAX_TIME_US, finish_families, read_document
from daydream.trace.model import FAMILIES, LAUNCH_FLOW_CATS, RANGE_CAT, Trace, is_annotation
from daydream.trace.schema import Event, EventArgs

_CPU_OPS, _ANNOTATIONS = 0, 1  # their places in FAMILIES


def load_filed(spath: str) -> Trace | None:
    """The trace file ``spath`` scanned a batch at a time (:func:`~daydream.trace.columns.column_batches`), each
    batch's events filed as it comes (a batch's columns are dropped once filed: memory grows with the events kept, as
    with the batched decoder); None where the scanner is not certain of the text."""
    trace = Trace(path=spath)
    families = ColumnFamilies(trace)
    document = column_batches(spath, families.add)
    if document is None:
        return None
    read_document(trace, document)
    families.finish()
    return trace


class ColumnFamilies:
    """Events filed into the trace's families from their columns (:meth:`add`, a batch at a time, in the file's
    order), then each family ordered (:meth:`finish`): :class:`daydream.trace.load._Families`' work, a field at a
    time."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.skipped = 0
        self.flows: list[tuple[list[Any], ...]] = []  # launch flows' pid, tid, ts and id, a batch at a time
        self.ids = _Ids()

    def add(self, columns: EventColumns) -> None:
        trace, strings, cols = self.trace, columns.strings, columns.columns
        trace.event_count += columns.count
        ids = self.ids
        ids.update(strings)
        ph, cat, name = cols["ph"].data, cols["cat"].data, cols["name"].data
        ts, dur = cols["ts"].data, cols["dur"].data
        family = np.where(np.isin(ph, ids("X")), ids.families[cat], -1)
        with np.errstate(invalid="ignore"):  # NaN (no ts or dur) compares False: invalid
            valid = (dur >= 0) & (dur <= MAX_TIME_US) & (ts >= -MAX_TIME_US) & (ts <= MAX_TIME_US)
        self.skipped += int(np.count_nonzero((family >= 0) & ~valid))
        family[~valid] = -1
        # a range filed as an op (2021-era ProfilerStep#N, Optimizer.step#..., the recorder's module ranges): an
        # annotation, in the category of one
        ops = family == _CPU_OPS
        range_names = [i for i in np.unique(name[ops]).tolist() if is_annotation(strings[i], "cpu_op")]
        ranges = ops & np.isin(name, range_names)
        family[ranges] = _ANNOTATIONS
        for k, (field, _) in enumerate(FAMILIES):
            rows = np.flatnonzero(family == k)
            getattr(trace, field).extend(_events(columns, rows, ranges[rows]))
        with np.errstate(invalid="ignore"):
            flows = np.isin(ph, ids("s", "f", "t")) & np.isin(cat, ids(*LAUNCH_FLOW_CATS)) & (np.abs(ts) <= MAX_TIME_US)
        if (rows := np.flatnonzero(flows)).size:
            self.flows.append(tuple(columns.field_values(f, rows) for f in ("pid", "tid", "ts", "id")))
        named = np.isin(ph, ids("M")) & np.isin(name, ids("thread_name")) & columns.has_args
        if (rows := np.flatnonzero(named)).size:
            for pid, tid, value in zip(*(columns.field_values(f, rows) for f in ("pid", "tid", "args.name"))):
                if isinstance(value, str):
                    trace.thread_names[(pid, tid)] = value

    def finish(self) -> None:
        """The families finished as the loader finishes them; the launch flows made events only where a call or a
        kernel lacks its correlation id (they bind it)."""
        trace = self.trace
        flows = []
        if any(e.args is None or e.args.correlation is None for e in (*trace.runtime, *trace.gpu)):
            flows = [
                Event(ph="f", pid=pid, tid=tid, ts=ts, id=ident) for batch in self.flows for pid, tid, ts, ident in zip(*batch)
            ]
        finish_families(trace, flows, self.skipped)


class _Ids:
    """The ids of strings in the scanner's table of them (a string written two ways has two), kept up to date as
    the table grows batch by batch: each string is looked at once, however many batches there are."""

    def __init__(self) -> None:
        self.seen = 0  # strings of the table looked at
        self.of: dict[str, list[int]] = {}
        self.families = np.full(1, -1, np.int8)  # a category's id -> its family; the last entry: None

    def update(self, strings: list[str]) -> None:
        if len(strings) == self.seen:
            return
        family = {cat: k for k, (_, cats) in enumerate(FAMILIES) for cat in cats}
        grown = np.full(len(strings) + 1, -1, np.int8)
        grown[: self.seen] = self.families[: self.seen]
        for i in range(self.seen, len(strings)):
            self.of.setdefault(strings[i], []).append(i)
            grown[i] = family.get(strings[i], -1)
        self.families, self.seen = grown, len(strings)

    def __call__(self, *values: str) -> list[int]:
        return [i for v in values for i in self.of.get(v, ())]


def _events(columns: EventColumns, rows: np.ndarray, ranges: np.ndarray | None) -> list[Event]:
    """The typed events of ``rows``, made _CHUNK at a time (the fields' values held for one chunk only); ``ranges``
    marks those filed as annotations from an op's category (their category becomes RANGE_CAT); None: the events as
    they are (flows)."""
    out: list[Event] = []
    for at in range(0, len(rows), _CHUNK):
        chunk = rows[at : at + _CHUNK]
        cat = columns.field_values("cat", chunk)
        if ranges is not None and (marked := ranges[at : at + _CHUNK]).any():
            cat = [RANGE_CAT if r else c for c, r in zip(cat, marked.tolist())]
        ph, name, pid, tid, ts, dur, ident, bp = (columns.field_values(f, chunk) for f in _EVENT_COLUMNS)
        out += map(Event, ph, cat, name, pid, tid, ts, dur, ident, bp, _args(columns, chunk))
    return out


_CHUNK = 1 << 16
_EVENT_COLUMNS = ("ph", "name", "pid", "tid", "ts", "dur", "id", "bp")


def _args(columns: EventColumns, rows: np.ndarray) -> list[EventArgs | None]:
    """The ``args`` of the events ``rows`` (None where an event has none). An event's args are made from the fields
    up to the last it has (the rest are their defaults): events of one kind have the same few, near the front."""
    n = len(rows)
    last = np.full(n, -1, np.int64)  # per event, its last args field present (-1: none)
    for k, f in enumerate(ARGS_FIELDS):
        present = columns.columns[f.column].rows
        if present is not None and len(present):
            at = np.minimum(np.searchsorted(present, rows), len(present) - 1)
            last[present[at] == rows] = k
    out = np.full(n, None, object)
    has_args = columns.has_args[rows]
    for k in np.unique(last[has_args]).tolist():
        group = np.flatnonzero(has_args & (last == k))
        fields = [columns.field_values(f.column, rows[group]) for f in ARGS_FIELDS[: k + 1]]
        made = list(map(EventArgs, *fields)) if fields else [EventArgs() for _ in group]  # args {}: every default
        out[group] = np.fromiter(made, object, len(made))
    return out.tolist()
