"""A trace's events as typed columns, one array per field of :class:`~daydream.trace.schema.Event` and
:class:`~daydream.trace.schema.EventArgs`, read by the compiled scanner (:mod:`daydream.trace.json_scan`) a batch at
a time: no Python object per event, and memory that grows with the events, not with the text.

The columns hold what the typed events hold, field for field (``tests/test_event_columns.py`` holds the two to that on
every shared trace): a string field as ids into ``strings`` (each distinct string decoded once), a time as a double
(NaN where absent), an integer, id or number field as a kind and a value, a list or free-form field as an index into
``values`` (each distinct value decoded once). The fields of ``args`` are held for the events that have them only.

The file is read as :func:`~daydream.trace.load.load_trace` reads it, within the same limits (docs/graph.md,
"Limits"); text the scanner is not certain of (a key written with escapes, invalid UTF-8, nesting deeper than the
limit, a value of the wrong type, malformed JSON) is read by the reference decoder instead, whose messages say what
is wrong where, and its events put into columns: the columns are the same either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec
import numpy as np

from daydream._gc import paused_gc
from daydream.errors import TraceError
from daydream.trace import json_scan
from daydream.trace.batches import Unsplittable
from daydream.trace.json_scan import (
    ABSENT,
    ARRAY,
    FALSE,
    FLOAT,
    INT,
    NULL,
    NUMBER_TEXT,
    OBJECT,
    STRING,
    STRING_ESCAPED,
    TRUE,
)
from daydream.trace.reading import (
    MAX_EVENTS,
    MAX_JSON_VALUES,
    MAX_NESTING,
    decode_in_batches,
    decode_trace,
    read_trace_bytes,
    values_in,
)
from daydream.trace.schema import Event, EventArgs, TraceFile

# how a column stores its field
STR = "str"  # int32 ids into EventColumns.strings, -1 for None
FLOAT_COLUMN = "float"  # float64, NaN for None (JSON has no NaN)
SCALAR = "scalar"  # a kind per event (below) and an int64: the integer, a string's id, or a value's index
ANY = "any"  # int32 indexes into EventColumns.values, -1 for None
# a scalar's kinds
K_NONE, K_INT, K_STR, K_FLOAT, K_OBJECT = 0, 1, 2, 3, 4  # K_FLOAT: the int64 holds the double's bits; K_OBJECT: an
# integer beyond int64, its index in values

_NO_INT = np.iinfo(np.int64).min


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field as the columns hold it: its name on the struct, its key in the JSON, its storage, the value tags
    it takes (others are the reference decoder's to refuse), and its value where absent."""

    name: str
    key: str
    storage: str
    allowed: np.ndarray  # bool per tag
    default: Any = None
    in_args: bool = False

    @property
    def column(self) -> str:
        """The column's name: the field's, ``args.`` before an args field's (``name`` is both)."""
        return f"args.{self.name}" if self.in_args else self.name


def _spec(f: msgspec.structs.FieldInfo, in_args: bool) -> FieldSpec:
    tp = f.type
    strings = (STRING, STRING_ESCAPED)
    none = (ABSENT, NULL) if f.default is None else (ABSENT,)
    if tp is str or tp == str | None:
        storage, tags = STR, (*strings, *none)
    elif tp == float | None:
        storage, tags = FLOAT_COLUMN, (INT, FLOAT, NUMBER_TEXT, *none)
    elif tp == int | None:
        storage, tags = SCALAR, (INT, NUMBER_TEXT, *none)
    elif tp == int | str | None:
        storage, tags = SCALAR, (INT, NUMBER_TEXT, *strings, NULL, ABSENT)
    elif tp == int | float | str | None:
        storage, tags = SCALAR, (INT, FLOAT, NUMBER_TEXT, *strings, NULL, ABSENT)
    elif tp == list[Any] | None:
        storage, tags = ANY, (ARRAY, NULL, ABSENT)
    elif tp is Any:
        storage, tags = ANY, tuple(range(len(json_scan.TAG_NAMES)))
    elif tp == EventArgs | None:
        storage, tags = "args", (OBJECT, NULL, ABSENT)
    else:  # pragma: no cover - a field added to the schema without a storage here
        raise TypeError(f"no column storage for {f.name}: {tp}")
    allowed = np.zeros(len(json_scan.TAG_NAMES), bool)
    allowed[list(tags)] = True
    default = f.default if f.default is not msgspec.NODEFAULT else None
    return FieldSpec(f.name, f.encode_name, storage, allowed, default, in_args)


EVENT_FIELDS = tuple(_spec(f, False) for f in msgspec.structs.fields(Event))
ARGS_FIELDS = tuple(_spec(f, True) for f in msgspec.structs.fields(EventArgs))
FIELDS = EVENT_FIELDS + ARGS_FIELDS  # slot s of the scanner: FIELDS[s]
_ARGS_SLOT = next(i for i, f in enumerate(EVENT_FIELDS) if f.storage == "args")
_EVENT_KEYS = json_scan.key_table(tuple(f.key for f in EVENT_FIELDS))
_ARGS_KEYS = json_scan.key_table(tuple(f.key for f in ARGS_FIELDS))
_MAX_DEPTH = MAX_NESTING + 3  # the batch's array, an event, its args: a value inside nests at most MAX_NESTING
_ALLOWED = np.stack([f.allowed for f in FIELDS])  # [slot, tag]: the tags each slot takes
_SCHEMA = (_EVENT_KEYS, _ARGS_KEYS, _ARGS_SLOT, _ALLOWED, _MAX_DEPTH)  # what json_scan.scan reads, as it reads it
_MIN_EVENT_BYTES = 24  # rows given to the scanner per byte of text: more events than that go to the reference decoder


@dataclass(slots=True)
class Column:
    """One field of the events: ``rows`` the events that have it (None: every event), ``data`` (and ``kind``, for a
    scalar) its values for those rows, stored as the field's ``storage`` says."""

    storage: str
    data: np.ndarray
    kind: np.ndarray | None = None
    rows: np.ndarray | None = None
    # a batch's column of some events: each event's place among the column's (-1: it lacks the field), made by
    # :meth:`index` for the filing, which asks where every family's events are, field by field
    at: np.ndarray | None = field(default=None, repr=False, compare=False)

    def find(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For a column of some events (``self.rows``): which of the events ``rows`` have the field, and where each
        is among the column's (meaningful where it has it)."""
        assert self.rows is not None
        if self.at is not None:
            at = self.at[rows]
            present = at >= 0
            return present, np.where(present, at, 0)
        if not len(self.rows):
            return np.zeros(len(rows), bool), np.zeros(len(rows), np.int64)
        at = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
        return self.rows[at] == rows, at

    def index(self, count: int) -> None:
        """Where each of ``count`` events is among the column's, kept for :meth:`find` (a batch's: 8 bytes an event,
        dropped with the batch)."""
        if self.rows is not None:
            self.at = np.full(count, -1, np.int64)
            self.at[self.rows] = np.arange(len(self.rows))


@dataclass(slots=True)
class EventColumns:
    """The events of a trace's ``traceEvents``, in the file's order, as columns; and the rest of the document."""

    path: str
    count: int
    columns: dict[str, Column]
    has_args: np.ndarray  # bool per event: its args is an object (False: none, or null)
    strings: list[str] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    document: TraceFile | None = None  # the rest of the file: traceEvents empty
    warnings: list[str] = field(default_factory=list)
    scanned: bool = True  # read by the scanner (False: by the reference decoder)

    def value(self, column: str, row: int) -> Any:
        """The field of event ``row`` in ``column`` (``ts``, ``args.correlation``), as the typed event holds it."""
        col = self.columns[column]
        i: Any = row
        if col.rows is not None:
            at = int(np.searchsorted(col.rows, row))
            if at == len(col.rows) or col.rows[at] != row:
                return None
            i = at
        if col.storage == STR:
            j = int(col.data[i])
            return None if j < 0 else self.strings[j]
        if col.storage == FLOAT_COLUMN:
            x = float(col.data[i])
            return None if x != x else x
        if col.storage == ANY:
            j = int(col.data[i])
            return None if j < 0 else self.values[j]
        assert col.kind is not None
        k, v = int(col.kind[i]), col.data[i]
        if k == K_NONE:
            return None
        if k == K_INT:
            return int(v)
        if k == K_STR:
            return self.strings[int(v)]
        if k == K_FLOAT:
            return float(col.data[i : i + 1].view(np.float64)[0])
        return self.values[int(v)]

    def field_values(self, column: str, rows: np.ndarray) -> list[Any]:
        """The field in ``column`` of the events ``rows`` (sorted or not), as the typed events hold it: one pass of
        numpy per field rather than one call per event."""
        col = self.columns[column]
        if col.rows is None:
            return self._objects(col, rows).tolist()
        out = np.full(len(rows), None, object)
        present, at = col.find(rows)
        out[present] = self._objects(col, at[present])
        return out.tolist()

    def _objects(self, col: Column, at: np.ndarray) -> np.ndarray:
        """The values of ``col`` at its positions ``at``, as Python objects."""
        if col.storage == STR:
            return _with_none(self.strings)[col.data[at]]
        if col.storage == ANY:
            return _with_none(self.values)[col.data[at]]
        data = col.data[at]
        if col.storage == FLOAT_COLUMN:
            out = data.astype(object)
            out[np.isnan(data)] = None
            return out
        assert col.kind is not None
        kind = col.kind[at]
        out = data.astype(object)  # the integers as Python's
        for k, table in ((K_STR, self.strings), (K_OBJECT, self.values)):
            if (is_k := kind == k).any():
                out[is_k] = _with_none(table)[data[is_k]]
        if (is_float := kind == K_FLOAT).any():
            out[is_float] = data[is_float].view(np.float64).astype(object)
        out[kind == K_NONE] = None
        return out

    def take(self, rows: np.ndarray) -> EventColumns:
        """The events ``rows`` (in order) alone, as columns of their own (the tables of strings and values shared)."""
        out: dict[str, Column] = {}
        for name, col in self.columns.items():
            if col.rows is None:
                out[name] = Column(col.storage, col.data[rows], None if col.kind is None else col.kind[rows])
                continue
            present, at = col.find(rows)
            at = at[present]
            out[name] = Column(
                col.storage, col.data[at], None if col.kind is None else col.kind[at], np.flatnonzero(present)
            )
        return EventColumns(self.path, len(rows), out, self.has_args[rows], self.strings, self.values)

    def event(self, row: int) -> Event:
        """Event ``row`` as the typed decoder makes it (for checks and for code not yet reading columns)."""
        args = None
        if self.has_args[row]:
            args = EventArgs(**{f.name: self.value(f.column, row) for f in ARGS_FIELDS})
        fields = {f.name: self.value(f.name, row) for f in EVENT_FIELDS if f.storage != "args"}
        return Event(**fields, args=args)


def _number_texts(
    raw: memoryview, tags: np.ndarray, starts: np.ndarray, ends: np.ndarray, rows: Any, s: int, count: int
) -> Iterator[tuple[int, memoryview]]:
    """The numbers slot ``s`` holds as text (``count`` of them) at the events ``rows``: each one's place among them
    and its text."""
    if not count:
        return
    first, last = starts[rows, s], ends[rows, s]
    for i in np.flatnonzero(tags[rows, s] == NUMBER_TEXT).tolist():
        yield i, raw[first[i] : last[i]]


def _finite(text: bytes | memoryview) -> float:
    """A number's text as a double; beyond a double's range, the reference decoder's to refuse ("Number out of
    range")."""
    value = float(bytes(text))
    if value in (math.inf, -math.inf):
        raise Unsplittable("a number out of range")
    return value


def _with_none(items: list[Any]) -> np.ndarray:
    """``items`` as an object array with None after them: index -1, the columns' None, gives None."""
    return np.fromiter([*items, None], object, len(items) + 1)  # not np.array: a list in items is one object


class _Interned:
    """Strings and values decoded once each, numbered in order of first appearance; and the scanner's table of the
    strings' raw texts (:func:`~daydream.trace.json_scan._intern`), whose ids are the strings' numbers."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.string_id: dict[str, int] = {}
        self.values: list[Any] = []
        self.value_id: dict[bytes, int] = {}  # a value's JSON text -> its index
        self.table = np.full((1 << 12, 2), -1, np.int64)
        self.raw = np.empty(1 << 16, np.uint8)
        self.raw_at = np.zeros(1 << 11, np.int64)
        self.counts = np.zeros(2, np.int64)  # strings in the table, bytes of raw used
        # "" first, in the table too: the default of ph and name, given where the scanner finds none
        self.table[json_scan.string_hash(b"") & (len(self.table) - 1)] = (json_scan.string_hash(b""), 0)
        self.counts[0] = 1
        self.strings.append("")
        self.string_id[""] = 0

    def scanned(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.table, self.raw, self.raw_at, self.counts

    def grow(self) -> None:
        """Twice the room for the scanner's strings (the table rehashed)."""
        n = int(self.counts[0])
        self.raw = np.concatenate((self.raw, np.empty(len(self.raw), np.uint8)))
        self.raw_at = np.concatenate((self.raw_at, np.zeros(len(self.raw_at), np.int64)))
        old = self.table[self.table[:, 1] >= 0]
        self.table = np.full((2 * len(self.table), 2), -1, np.int64)
        mask = len(self.table) - 1
        for h, sid in old.tolist():
            k = h & mask
            while self.table[k, 1] >= 0:
                k = (k + 1) & mask
            self.table[k] = (h, sid)
        assert n == len(old)

    def decode_new(self) -> None:
        """The strings the scanner added since the last call, decoded. A string written two ways (``"a\\u0062"``,
        ``"ab"``) has two ids, both naming it."""
        for sid in range(len(self.strings), int(self.counts[0])):
            text = self.raw[self.raw_at[sid] : self.raw_at[sid + 1]].tobytes()
            try:
                value = msgspec.json.decode(b'"' + text + b'"') if b"\\" in text else text.decode()
            except (msgspec.DecodeError, UnicodeDecodeError):
                raise Unsplittable("a string the scanner does not read") from None
            self.strings.append(value)
            self.string_id.setdefault(value, sid)

    def string(self, s: str) -> int:
        """The id of a string (of typed events: the scanner's ids come from its table)."""
        i = self.string_id.get(s)
        if i is None:
            i = self.string_id[s] = len(self.strings)
            self.strings.append(s)
        return i

    def value(self, key: bytes, decoded: Any) -> int:
        i = self.value_id.get(key)
        if i is None:
            i = self.value_id[key] = len(self.values)
            self.values.append(decoded)
        return i


class _Parts:
    """The columns' data a batch at a time, joined at the end."""

    def __init__(self) -> None:
        self.count = 0
        self.data: dict[str, list[np.ndarray]] = {f.column: [] for f in FIELDS}
        self.kind: dict[str, list[np.ndarray]] = {f.column: [] for f in FIELDS if f.storage == SCALAR}
        self.rows: dict[str, list[np.ndarray]] = {f.column: [] for f in ARGS_FIELDS}
        self.has_args: list[np.ndarray] = []

    def columns(self) -> dict[str, Column]:
        out = {}
        for f in FIELDS:
            if f.storage == "args":
                continue
            dtype = _DTYPES[f.storage]
            data = np.concatenate(self.data[f.column]) if self.data[f.column] else np.empty(0, dtype)
            kind = None
            if f.storage == SCALAR:
                kind = np.concatenate(self.kind[f.column]) if self.kind[f.column] else np.empty(0, np.int8)
            rows = None
            if f.in_args:
                rows = np.concatenate(self.rows[f.column]) if self.rows[f.column] else np.empty(0, np.int64)
            out[f.column] = Column(f.storage, data, kind, rows)
        return out


_DTYPES = {STR: np.int32, FLOAT_COLUMN: np.float64, SCALAR: np.int64, ANY: np.int32}


def _slot_storage(f: FieldSpec) -> tuple[int, int]:
    """How json_scan.slot_columns stores a field's slot, and its value where absent there (-1: none)."""
    how = {
        "args": json_scan.SKIP,
        STR: json_scan.STRING_IDS,
        FLOAT_COLUMN: json_scan.DOUBLES,
        SCALAR: json_scan.SCALARS,
        ANY: json_scan.FREE,
    }[f.storage]
    if f.default is None or how in (json_scan.SKIP, json_scan.DOUBLES, json_scan.FREE):
        return how, -1
    # the defaults the schema has: "" (the scanner's string 0) for a string, 0 for pid and tid
    if (f.default, how) not in (("", json_scan.STRING_IDS), (0, json_scan.SCALARS)):  # pragma: no cover
        raise TypeError(f"no slot default for {f.name}: {f.default!r}")
    return how, 0


_STORAGE = np.array([_slot_storage(f)[0] for f in FIELDS], np.int8)
_DEFAULT = np.array([_slot_storage(f)[1] for f in FIELDS], np.int64)
_IN_ARGS = np.array([f.in_args for f in FIELDS], np.bool_)
_KIND_OF_TAG = np.full(len(json_scan.TAG_NAMES), K_NONE, np.int8)  # a scalar's kind by its value's tag
_KIND_OF_TAG[[INT, STRING, STRING_ESCAPED, FLOAT]] = (K_INT, K_STR, K_STR, K_FLOAT)


class _Scanned(NamedTuple):
    """A batch as the scanner left it: its text and, per event and slot, each value's tag, number and span."""

    text: bytes
    count: int
    tags: np.ndarray
    ints: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


class _Scanner:
    """The decoder :class:`EventBatches` calls a batch at a time: the batch scanned into slots, the slots checked
    against the fields' types and turned into the batch's columns."""

    def __init__(self, interned: _Interned) -> None:
        self.interned = interned
        self.events = 0  # in the batches scanned so far

    def __call__(self, batch: memoryview) -> Any:
        if len(batch) > MAX_JSON_VALUES and values_in(batch) > MAX_JSON_VALUES:
            raise Unsplittable("too many values")
        text = np.frombuffer(batch, np.uint8)
        rows = min(int(np.count_nonzero(text == 123)), len(text) // _MIN_EVENT_BYTES + 1)
        slots = len(FIELDS)
        tags = np.empty((rows, slots), np.int8)
        ints = np.empty((rows, slots), np.int64)
        starts = np.empty((rows, slots), np.int64)
        ends = np.empty((rows, slots), np.int64)
        interned = self.interned
        while True:
            count, _ = json_scan.scan(
                text, _SCHEMA, interned.scanned(), (tags, ints, ints.view(np.float64), starts, ends)
            )
            if count != json_scan.FULL:
                break
            interned.grow()
        if count == json_scan.NOT_JSON:
            return None  # a cut inside an event: EventBatches tries one further on
        if count < 0:
            raise Unsplittable("not read by the scanner")
        interned.decode_new()
        if self.events + count > MAX_EVENTS:
            raise Unsplittable("too many events")  # the reference decoder says so
        self.events += count
        # the slots made columns by the taker (:meth:`columns`), on its thread, while this one scans the next batch;
        # the text copied: a value left to Python is read from it, and the batcher reuses its buffer
        return _Scanned(bytes(batch), count, tags[:count], ints[:count], starts[:count], ends[:count])

    def columns(self, scanned: _Scanned) -> EventColumns:
        """A scanned batch's columns (their strings' and values' tables shared by every batch)."""
        parts = _Parts()
        with memoryview(scanned.text) as raw:
            self._add(parts, raw, scanned.tags, scanned.ints, scanned.starts, scanned.ends)
        has_args = parts.has_args[0]
        columns = parts.columns()
        for col in columns.values():
            col.index(scanned.count)
        return EventColumns("", scanned.count, columns, has_args, self.interned.strings, self.interned.values)

    def _add(
        self, parts: _Parts, raw: memoryview, tags: np.ndarray, ints: np.ndarray, starts: np.ndarray, ends: np.ndarray
    ) -> None:
        n = len(tags)
        first = parts.count
        parts.has_args.append(tags[:, _ARGS_SLOT] == OBJECT)
        # every slot's column in one compiled pass over the rows; what it leaves (numbers kept as text, free-form
        # values) read here from the text
        present, counts, texts, at, ids, doubles, kinds, integers = json_scan.slot_columns(
            tags, ints, ints.view(np.float64), _STORAGE, _IN_ARGS, _DEFAULT, _KIND_OF_TAG
        )
        for s, f in enumerate(FIELDS):
            if f.storage == "args" or (f.in_args and not present[s]):
                continue
            m = int(counts[s])
            rows: Any = slice(None)
            if f.in_args:
                rows = at[s, :m]
                parts.rows[f.column].append(rows + first)
            if f.storage == STR:
                data = ids[s, :m]
            elif f.storage == FLOAT_COLUMN:
                data = doubles[s, :m]
                for i, text in _number_texts(raw, tags, starts, ends, rows, s, texts[s]):
                    data[i] = _finite(text)
            elif f.storage == SCALAR:
                data, kind = integers[s, :m], kinds[s, :m]
                for i, text in _number_texts(raw, tags, starts, ends, rows, s, texts[s]):
                    kind[i], data[i] = self._number_text(f, bytes(text))
                parts.kind[f.column].append(kind)
            else:
                data = self._any(raw, tags[rows, s], ints[rows, s], starts[rows, s], ends[rows, s])
            parts.data[f.column].append(data)
        parts.count += n

    def _number_text(self, f: FieldSpec, text: bytes) -> tuple[int, int]:
        """A number the scanner left to Python, as the field holds it."""
        if b"." in text or b"e" in text or b"E" in text:
            if not f.allowed[FLOAT]:
                raise Unsplittable(f"a decimal in {f.key!r}")  # the reference decoder refuses it
            return K_FLOAT, int(np.float64(_finite(text)).view(np.int64))
        value = int(text)
        if -(1 << 63) < value < 1 << 63:
            return K_INT, value
        return K_OBJECT, self.interned.value(b"int:" + text, value)

    def _any(self, raw: memoryview, t: np.ndarray, ids: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """A free-form field's values (their strings' ids already in ``ids``) as indexes into the values."""
        out = np.full(len(t), -1, np.int32)
        interned = self.interned
        for i in np.flatnonzero(t != ABSENT).tolist():
            tag = int(t[i])
            if tag == NULL:
                continue
            if tag in (STRING, STRING_ESCAPED):
                string = interned.strings[int(ids[i])]
                out[i] = interned.value(b'"' + string.encode("utf-8", "surrogatepass") + b'"', string)
                continue
            text = bytes(raw[starts[i] : ends[i]])
            if tag in (TRUE, FALSE):
                out[i] = interned.value(b"true" if tag == TRUE else b"false", tag == TRUE)
                continue
            if tag in (INT, FLOAT, NUMBER_TEXT):
                number = (
                    int(text) if tag == INT or not (b"." in text or b"e" in text or b"E" in text) else _finite(text)
                )
                out[i] = interned.value(b"int:" + text if isinstance(number, int) else text, number)
                continue
            key = bytes(text)
            j = interned.value_id.get(key)
            if j is None:
                try:
                    j = interned.value(key, msgspec.json.decode(key))
                except msgspec.DecodeError:
                    raise Unsplittable("a value the scanner does not read") from None
            out[i] = j
        return out


@paused_gc()
def load_columns(path: str) -> EventColumns:
    """The events of the trace file ``path`` as columns (:class:`EventColumns`), within the loader's limits;
    :class:`~daydream.errors.TraceError` for anything that is not a trace, as :func:`~daydream.trace.load.load_trace`
    says it."""
    spath = str(path)
    try:
        columns = scan_columns(spath)
        if columns is None:
            columns = _reference(spath)
    except MemoryError:
        raise TraceError(f"{spath}: out of memory decoding the trace", path=spath) from None
    if not columns.count:
        raise TraceError(f"{spath}: no events (the trace's 'traceEvents' list is empty)", path=spath)
    return columns


def column_batches(spath: str, take: Callable[[EventColumns], None]) -> TraceFile | None:
    """Scan the trace file ``spath`` a batch at a time as its text is read (:func:`~daydream.trace.reading.
    decode_in_batches`), each batch's columns (:class:`EventColumns` of its events, their rows numbered from the
    batch's first, sharing one table of strings and one of values) given to ``take``. Returns the rest of the
    document; None where the scanner is not certain of the text (the reference decoder then reads it)."""
    scanner = _Scanner(_Interned())
    return decode_in_batches(spath, scanner, lambda scanned: take(scanner.columns(scanned)))


def scan_columns(spath: str) -> EventColumns | None:
    """The columns of the trace file ``spath``, scanned; None where the scanner is not certain of the text."""
    pieces: list[EventColumns] = []
    document = column_batches(spath, pieces.append)
    if document is None:
        return None
    return join_columns(spath, pieces, document)


def join_columns(path: str, pieces: list[EventColumns], document: TraceFile | None) -> EventColumns:
    """One trace's columns from its batches' (:func:`column_batches`), in order."""
    parts = _Parts()
    for piece in pieces:
        for name, col in piece.columns.items():
            parts.data[name].append(col.data)
            if col.kind is not None:
                parts.kind[name].append(col.kind)
            if col.rows is not None:
                parts.rows[name].append(col.rows + parts.count)
        parts.has_args.append(piece.has_args)
        parts.count += piece.count
    has_args = np.concatenate(parts.has_args) if parts.has_args else np.empty(0, bool)
    strings, values = (pieces[0].strings, pieces[0].values) if pieces else ([], [])
    return EventColumns(path, parts.count, parts.columns(), has_args, strings, values, document)


def _reference(spath: str) -> EventColumns:
    """The columns of a text the scanner left: decoded whole by the reference decoder (whose messages say what is
    wrong where), its events then put into columns."""
    warnings: list[str] = []
    document = decode_trace(read_trace_bytes(spath), spath, warnings)
    events, document.traceEvents = document.traceEvents, []
    if len(events) > MAX_EVENTS:
        raise TraceError(
            f"{spath}: holds more than {MAX_EVENTS:,} events; daydream reads traces of at most that many", path=spath
        )
    columns = columns_from_events(spath, events)
    columns.document, columns.warnings, columns.scanned = document, warnings, False
    return columns


def columns_from_events(path: str, events: list[Event]) -> EventColumns:
    """Typed events as columns: the columns the scanner makes of the text they were decoded from."""
    interned, parts = _Interned(), _Parts()
    n = len(events)
    for f in FIELDS:
        if f.storage == "args":
            continue
        rows = [i for i, ev in enumerate(events) if ev.args is not None] if f.in_args else range(n)
        got = [getattr(events[i].args if f.in_args else events[i], f.name) for i in rows]
        if f.in_args:
            keep = [j for j, v in enumerate(got) if v is not None]
            rows, got = [rows[j] for j in keep], [got[j] for j in keep]
            parts.rows[f.column].append(np.array(rows, np.int64))
        if f.storage == SCALAR:
            kinds, data = zip(*(_scalar(interned, v) for v in got)) if got else ((), ())
            parts.kind[f.column].append(np.array(kinds, np.int8))
            parts.data[f.column].append(np.array(data, np.int64))
        elif f.storage == STR:
            parts.data[f.column].append(np.array([-1 if v is None else interned.string(v) for v in got], np.int32))
        elif f.storage == FLOAT_COLUMN:
            parts.data[f.column].append(np.array([np.nan if v is None else v for v in got], np.float64))
        else:
            parts.data[f.column].append(
                np.array([-1 if v is None else interned.value(msgspec.json.encode(v), v) for v in got], np.int32)
            )
    parts.count = n
    has_args = np.array([ev.args is not None for ev in events], bool)
    return EventColumns(path, n, parts.columns(), has_args, interned.strings, interned.values)


def _scalar(interned: _Interned, v: Any) -> tuple[int, int]:
    if v is None:
        return K_NONE, 0
    if isinstance(v, str):
        return K_STR, interned.string(v)
    if isinstance(v, float):
        return K_FLOAT, int(np.float64(v).view(np.int64))
    if -(1 << 63) < v < 1 << 63:
        return K_INT, v
    return K_OBJECT, interned.value(b"int:" + str(v).encode(), v)
