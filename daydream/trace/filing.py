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

from collections import namedtuple
from dataclasses import dataclass
from typing import Any

import numpy as np

from daydream._arrays import order_by_start, unique_ints
from daydream.trace.columns import ARGS_FIELDS, K_INT, K_NONE, EventColumns, column_batches
from daydream.trace.finish import finish_families, read_document, sort_by_start
from daydream.trace.model import (
    FAMILIES,
    LAUNCH_FLOW_CATS,
    MEMORY_EVENT,
    RANGE_CAT,
    CpuColumns,
    MemoryEvents,
    Trace,
    is_annotation,
    memory_row,
)
from daydream.trace.reading import MAX_TIME_US
from daydream.trace.schema import Event, EventArgs

_CPU_OPS, _ANNOTATIONS = 0, 1  # their places in FAMILIES
CPU_FAMILIES = ("annotations", "cpu_ops", "runtime")  # the families the CPU sweep reads, in the order it reads them
PENDING_FAMILIES = ("cpu_ops", "runtime", "gpu")  # kept as columns, read by the builder there, made as events when read


# an allocator event's args, as memory_row reads them (the typed events' field names)
_MEMORY_ARGS = ("alloc_bytes", "addr", "total_allocated", "total_reserved", "device_type", "device_id")
_MemoryArgs = namedtuple("_MemoryArgs", _MEMORY_ARGS)


@dataclass(frozen=True, slots=True)
class PendingFamily:
    """A family the columnar loader keeps as columns (a batch's events of the family at a time, in the file's order):
    how many events it holds; :meth:`make` makes them, in the family's order."""

    count: int
    batches: list[EventColumns]

    def make(self) -> list[Event]:
        return family_events(self.batches)

    def span(self) -> tuple[float, float]:
        """The first start and the last end of its events, read from the columns."""
        return family_span(self.batches)


class _Kept:
    """A family kept as columns while filing: its batches' columns and how many events they hold."""

    def __init__(self) -> None:
        self.batches: list[EventColumns] = []
        self.count = 0


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
        # the CPU families' columns, a batch at a time (None once a value is one the columns cannot hold)
        self.cpu: dict[str, list[dict[str, np.ndarray]]] | None = {f: [] for f in CPU_FAMILIES}
        self.threads: dict[tuple[Any, Any], int] = {}  # (pid, tid) -> its number, in order of filing
        self.strings: list[str] = []
        self.values: list[Any] = []
        # the families kept as columns (a batch at a time: the trace's pending families), and the runtime calls and
        # GPU tasks among them without a correlation id
        self.kept = {field: _Kept() for field in PENDING_FAMILIES}
        self.unbound = 0
        self.memory: list[tuple[Any, ...]] = []  # the allocator's events (model.memory_row), in the file's order

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
        range_names = [i for i in unique_ints(name[ops]).tolist() if is_annotation(strings[i], "cpu_op")]
        ranges = ops & np.isin(name, range_names)
        family[ranges] = _ANNOTATIONS
        for k, (field, _) in enumerate(FAMILIES):
            rows = np.flatnonzero(family == k)
            made: list[Event] | None = None
            if field in PENDING_FAMILIES:  # kept as columns, their events made when read (Trace.pending): never,
                kept = self.kept[field]  # for a plain replay, which reads the columns
                source = np.arange(kept.count, kept.count + len(rows))
                if len(rows):
                    kept.batches.append(columns.take(rows))
                    kept.count += len(rows)
                if field in ("runtime", "gpu"):  # calls and kernels a launch flow may bind (finish)
                    self.unbound += int(np.count_nonzero(_column_at(columns, "args.correlation", rows)[1] != K_INT))
            else:
                made = _events(columns, rows, ranges[rows])
                getattr(trace, field).extend(made)
                source = np.full(len(rows), -1, np.int64)
            if field in CPU_FAMILIES and self.cpu is not None:
                self.cpu[field].append(self._cpu_columns(columns, rows, ranges[rows], made, source))
        with np.errstate(invalid="ignore"):
            flows = np.isin(ph, ids("s", "f", "t")) & np.isin(cat, ids(*LAUNCH_FLOW_CATS)) & (np.abs(ts) <= MAX_TIME_US)
        if (rows := np.flatnonzero(flows)).size:
            self.flows.append(tuple(columns.field_values(f, rows) for f in ("pid", "tid", "ts", "id")))
        memory = np.isin(ph, ids("i")) & np.isin(name, ids(MEMORY_EVENT)) & columns.has_args
        if (rows := np.flatnonzero(memory)).size:  # the allocator's events: their rows, as the loader keeps them
            fields = [columns.field_values(f, rows) for f in ("ts", "pid", "tid", *(f"args.{a}" for a in _MEMORY_ARGS))]
            for ts, pid, tid, *args in zip(*fields):
                row = memory_row(ts, pid, tid, _MemoryArgs(*args))
                if row is not None:
                    self.memory.append(row)
        named = np.isin(ph, ids("M")) & np.isin(name, ids("thread_name")) & columns.has_args
        if (rows := np.flatnonzero(named)).size:
            for pid, tid, value in zip(*(columns.field_values(f, rows) for f in ("pid", "tid", "args.name"))):
                if isinstance(value, str):
                    trace.thread_names[(pid, tid)] = value

    def finish(self) -> None:
        """The families finished as the loader finishes them; the launch flows made events only where a call or a
        kernel lacks its correlation id (they bind it)."""
        trace = self.trace
        for field, kept in self.kept.items():
            if kept.count:
                trace.pending[field] = PendingFamily(kept.count, kept.batches)
        flows = []
        if self.unbound:
            flows = [  # binding them changes the calls' and kernels' events: made then (reading trace.runtime, .gpu)
                Event(ph="f", pid=pid, tid=tid, ts=ts, id=ident)
                for batch in self.flows
                for pid, tid, ts, ident in zip(*batch)
            ]
        if self.memory:
            trace.memory = MemoryEvents.of(self.memory)
        finish_families(trace, flows, self.skipped)
        if self.cpu is not None and not flows:  # flows change the events' correlation ids: no columns then
            trace.cpu_columns = self._cpu_finished()

    def _cpu_columns(
        self, columns: EventColumns, rows: np.ndarray, ranges: np.ndarray, made: list[Event] | None, source: np.ndarray
    ) -> dict[str, np.ndarray]:
        """The CPU columns of a batch's events ``rows`` of one family (the events ``made`` of them; None: a family
        kept as columns, ``source`` their numbers in it)."""
        self.strings, self.values = columns.strings, columns.values  # the scanner's tables: shared by its batches
        ids = np.zeros(len(rows), np.int64) if made is None else np.fromiter(map(id, made), np.int64, len(made))
        out = {"ids": ids, "source": source}
        out["ts"], _ = _column_at(columns, "ts", rows)
        out["dur"], _ = _column_at(columns, "dur", rows)
        name, _ = _column_at(columns, "name", rows)
        cat, _ = _column_at(columns, "cat", rows)
        out["name"], out["cat"] = name.astype(np.int32), np.where(ranges, -1, cat).astype(np.int32)
        for key, column in (("seq", "args.sequence_number"), ("corr", "args.correlation")):
            data, kind = _column_at(columns, column, rows)
            if (kind > K_INT).any():  # an integer beyond int64 (K_NONE and K_INT come first)
                self.cpu = None
            out[key], out[f"has_{key}"] = np.where(kind == K_INT, data, 0), kind == K_INT
        out["has_collective"] = _column_at(columns, "args.collective_name", rows)[0] >= 0
        dims, _ = _column_at(columns, "args.input_dims", rows)
        dims_2021, _ = _column_at(columns, "args.input_dims_2021", rows)
        out["shapes"] = np.where(dims >= 0, dims, dims_2021).astype(np.int32)
        # threads: (pid, tid) as the events hold them, looked up once per distinct pair of the batch
        (pid, pid_kind), (tid, tid_kind) = _column_at(columns, "pid", rows), _column_at(columns, "tid", rows)
        pid_codes, pid_count = _codes(pid_kind, pid)
        tid_codes, tid_count = _codes(tid_kind, tid)
        distinct, first, inverse = unique_ints(
            pid_codes * tid_count + tid_codes, return_index=True, return_inverse=True
        )
        keys = zip(columns.field_values("pid", rows[first]), columns.field_values("tid", rows[first]))
        number = np.array([self.threads.setdefault(key, len(self.threads)) for key in keys], np.int32)
        out["thread"] = number[inverse.reshape(-1)] if len(distinct) else np.zeros(0, np.int32)
        return out

    def _cpu_finished(self) -> CpuColumns | None:
        """The CPU columns in the order the families were finished in (annotations, CPU ops, runtime calls)."""
        trace, parts = self.trace, self.cpu
        assert parts is not None
        batches = [p for field in CPU_FAMILIES for p in parts[field]]
        sizes = [trace.family_size(f) for f in CPU_FAMILIES]
        if not batches or [sum(len(p["ids"]) for p in parts[f]) for f in CPU_FAMILIES] != sizes:
            return None
        cols = {k: np.concatenate([p[k] for p in batches]) for k in batches[0]}
        # each family sorted as finish_families sorts it (sort_by_start: by start, the longest first, then in the
        # order filed); the builder finds out if not (the events' ids)
        order, at = [], 0
        for size in sizes:
            order.append(at + order_by_start(cols["ts"][at : at + size], cols["dur"][at : at + size]))
            at += size
        cols = {k: v[np.concatenate(order)] for k, v in cols.items()}
        # threads numbered in order of first appearance, as the Python sweep meets them
        filed_keys = list(self.threads)
        _, first = unique_ints(cols["thread"], return_index=True)
        met = cols["thread"][np.sort(first)]
        renumber = np.zeros(len(filed_keys), np.int32)
        renumber[met] = np.arange(len(met))
        return CpuColumns(
            thread=renumber[cols.pop("thread")],
            threads=[filed_keys[k] for k in met.tolist()],
            strings=self.strings,
            values=self.values,
            sizes=tuple(sizes),
            **cols,
        )  # type: ignore[arg-type]


def events_at(batches: list[EventColumns], numbers: np.ndarray) -> list[Event]:
    """The events numbered ``numbers`` (their places in the order filed, across ``batches``) of a family kept as
    columns, in the order given."""
    first = np.cumsum([0, *(b.count for b in batches)])
    batch = np.searchsorted(first, numbers, "right") - 1
    out: list[Event | None] = [None] * len(numbers)
    for b in np.unique(batch).tolist():
        at = np.flatnonzero(batch == b)
        for k, ev in zip(at.tolist(), _events(batches[b], numbers[at] - first[b], None)):
            out[k] = ev
    return out  # type: ignore[return-value]


def family_events(batches: list[EventColumns]) -> list[Event]:
    """The events of a family kept as columns (PendingFamily), in the family's order, as the loader orders it."""
    events = [ev for columns in batches for ev in _events(columns, np.arange(columns.count), None)]
    sort_by_start(events)
    return events


def family_column(batches: list[EventColumns], column: str) -> tuple[np.ndarray, np.ndarray]:
    """A column of every event of a family kept as columns, in the order filed: its data and kinds as stored
    (:func:`_column_at`)."""
    parts = [_column_at(b, column, np.arange(b.count)) for b in batches]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def family_span(batches: list[EventColumns]) -> tuple[float, float]:
    """The first start and the last end of the events of a family kept as columns (as their events hold them)."""
    ts, _ = family_column(batches, "ts")
    dur, _ = family_column(batches, "dur")
    return float(ts.min()), float((ts + dur).max())


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


def _codes(kind: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, int]:
    """A scalar column's values (kind and data) numbered: (the numbers, how many distinct)."""
    if not len(data):
        return np.zeros(0, np.int64), 0
    if (kind == kind[0]).all():  # one kind (ints, most often): the data alone tell values apart
        distinct, inverse = unique_ints(data, return_inverse=True)
    else:
        distinct, inverse = np.unique(np.rec.fromarrays([kind, data]), return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), len(distinct)


def _column_at(columns: EventColumns, column: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A column's data at the events ``rows`` and its kinds (a scalar's; K_INT otherwise), as stored: where an event
    lacks the field (an args field), data -1 (NaN for a float) and kind K_NONE."""
    col = columns.columns[column]
    if col.rows is None:
        data, kind = col.data[rows], (col.kind[rows] if col.kind is not None else None)
    else:
        data = np.full(len(rows), np.nan if col.data.dtype.kind == "f" else -1, col.data.dtype)
        kind = np.full(len(rows), K_NONE, np.int8) if col.kind is not None else None
        present, at = col.find(rows)
        data[present] = col.data[at[present]]
        if kind is not None:
            kind[present] = col.kind[at[present]]  # type: ignore[index]
    return data, (kind if kind is not None else np.full(len(rows), K_INT, np.int8))


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
        col = columns.columns[f.column]
        if col.rows is not None:
            last[col.find(rows)[0]] = k
    out = np.full(n, None, object)
    has_args = columns.has_args[rows]
    for k in np.unique(last[has_args]).tolist():
        group = np.flatnonzero(has_args & (last == k))
        fields = [columns.field_values(f.column, rows[group]) for f in ARGS_FIELDS[: k + 1]]
        made = list(map(EventArgs, *fields)) if fields else [EventArgs() for _ in group]  # args {}: every default
        out[group] = np.fromiter(made, object, len(made))
    return out.tolist()
