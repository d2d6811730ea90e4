"""Reading Kineto / Chrome-trace JSON files (plain or gzip) into a :class:`Trace`.

Whatever a file holds, loading it either succeeds or raises :class:`TraceError` with a one-line message naming the
file (and the event, field or byte offset where known): never a traceback, a hang, or memory without bound. The
limits that guarantee it, and the reading and decoding of the text within them, are :mod:`daydream.trace.reading`'s
(docs/graph.md, "Limits"). The events are filed into the trace's families here, event by event as they are decoded
(:class:`_Families`), or a field at a time from columns for a large trace (:mod:`daydream.trace.filing`); what both
filers do last is :mod:`daydream.trace.finish`'s.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from daydream import progress
from daydream._gc import paused_gc
from daydream.errors import TraceError
from daydream.trace.finish import finish_families, read_document
from daydream.trace.job import TRACE_SUFFIXES, trace_stem
from daydream.trace.model import (
    FAMILIES,
    LAUNCH_FLOW_CATS,
    MEMORY_EVENT,
    RANGE_CAT,
    MemoryEvents,
    Trace,
    is_annotation,
    memory_row,
)
from daydream.trace.reading import (
    MAX_EVENTS,
    MAX_NESTING,
    MAX_TIME_US,
    decode_batch,
    decode_in_batches,
    decode_trace,
    nesting_exceeds,
    read_trace_bytes,
)
from daydream.trace.recording import read_sidecar, recording_path
from daydream.trace.schema import Event, TraceFile

# Traces of this much text or more (about 150k events) are read into columns by compiled code: importing numba costs
# about 0.5 s, what the decoder saves on some 500k events; from this size on the simulation imports it too
# (simulation.engine.COMPILED_MIN_TASKS)
COLUMNAR_MIN_TEXT_BYTES = 32 << 20
GZIP_TEXT_RATIO = 12  # the text of a gzip trace, in times its file's size (real traces: 10-20)
XZ_OVER_GZIP = 1.9  # a trace's gzip file, in times its xz file (the validation corpus: 70.9 MB against 37.3)


@paused_gc()
def load_trace(path: str | os.PathLike[str], et: str | os.PathLike[str] | None = None) -> Trace:
    """Load a Kineto trace (and, optionally, the PyTorch execution trace recorded beside it).

    Parameters
    ----------
    path : str or os.PathLike
        A Kineto trace: Chrome-trace JSON, ``.json``, ``.json.gz`` or ``.json.xz``.
    et : str or os.PathLike, optional
        The PyTorch execution trace of the same run (default: the one found next to ``path`` by its name, if any).

    Returns
    -------
    Trace
        The trace's events by family (``cpu_ops``, ``kernels``, ``runtime``, ``annotations``, ...), its devices
        and ``warnings``; :func:`~daydream.graph.build_graph` makes the graph of a step of it.

    Raises
    ------
    TraceError
        For any unreadable input (the module's limits), with a one-line message naming the file and the place, and
        the place as fields (``path``, ``event``, ``offset``).

    Notes
    -----
    An execution trace or recording sidecar found next to the trace by its name, not asked for, that cannot be used
    is a warning: the trace stands without it.

    Examples
    --------
    >>> from daydream import bundled_example, load_trace
    >>> trace = load_trace(bundled_example())
    >>> len(trace.cpu_ops), trace.warnings
    (3099, [])
    """
    spath = str(path)
    try:
        trace = _load_columnar(spath) if _text_estimate(spath) >= COLUMNAR_MIN_TEXT_BYTES else None
        if trace is None:
            trace = _load_in_batches(spath)
        if trace is None:
            trace = _load_whole(spath)
    except MemoryError:  # past every limit, still more than this machine holds
        raise TraceError(f"{spath}: out of memory decoding the trace", path=spath) from None
    from daydream.trace.et import attach_execution_trace

    sidecar = recording_path(spath)
    if Path(sidecar).is_file():
        try:
            trace.recording = read_sidecar(sidecar, trace.warnings)
        except TraceError as exc:  # found by its name, not asked for: the trace stands without it
            trace.warnings.append(f"recording metadata next to the trace not used: {exc}")
    if et is not None:
        attach_execution_trace(trace, et)
    elif (found := find_execution_trace(spath)) is not None:
        try:
            attach_execution_trace(trace, found)
        except TraceError as exc:  # found by its name, not asked for: the Kineto trace stands without it
            trace.warnings.append(f"execution trace next to the trace not used: {exc}")
    return trace


def _text_estimate(spath: str) -> int:
    """About how many bytes of text the file holds, from its size (a compressed file's by its name: nothing is
    opened)."""
    try:
        size = size_as_gzip(spath)
    except (OSError, ValueError):
        return 0  # the loader says why
    return size * GZIP_TEXT_RATIO if spath.endswith((".gz", ".xz")) else size


def size_as_gzip(path: str | os.PathLike[str]) -> int:
    """A trace file's size on disk, an xz file's as the gzip file of the same text would be (XZ_OVER_GZIP times
    it): the unit the job's thresholds were measured in (daydream.api.job), so that a job's traces recompressed
    as xz are simulated as they were. OSError where the file cannot be read."""
    size = os.stat(path).st_size
    return int(size * XZ_OVER_GZIP) if os.fspath(path).endswith(".xz") else size


def _load_columnar(spath: str) -> Trace | None:
    """The trace, its text scanned into columns by compiled code (:mod:`daydream.trace.columns`) and its families
    filed from them (:mod:`daydream.trace.filing`); None where the scanner is not certain of the text, or numba does
    not import: the batched decoder then reads it."""
    try:
        from daydream.trace.filing import load_filed
    except Exception:  # noqa: BLE001 - numba missing or broken: not an error, only slower
        return None
    return load_filed(spath)


def _load_in_batches(spath: str) -> Trace | None:
    """The trace, its events decoded a batch at a time as the text is read (:func:`decode_in_batches`). None where
    the text cannot be cut into batches that decode: :func:`_load_whole` then reads it whole and says what is wrong
    where."""
    trace = Trace(path=spath)
    families = _Families(trace)
    document = decode_in_batches(spath, decode_batch, families.add)
    if document is None:
        return None
    _finish(trace, document, families)
    return trace


def _load_whole(spath: str) -> Trace:
    """The trace, its text read whole and decoded at once: what :func:`_load_in_batches` cannot cut, with the
    decoder's messages for what is wrong where."""
    warnings: list[str] = []
    raw = read_trace_bytes(spath)
    with progress.task(f"decoding {spath}"):
        decoded = decode_trace(raw, spath, warnings)
        del raw  # as when it was passed straight through: the text is not held while the events are sorted
    trace = Trace(path=spath)
    trace.warnings.extend(warnings)
    families = _Families(trace)
    families.add(decoded.traceEvents)
    decoded.traceEvents = []
    _finish(trace, decoded, families)
    return trace


def _finish(trace: Trace, document: TraceFile, families: _Families) -> None:
    """The trace's metadata from its document, and its event families sorted."""
    read_document(trace, document)
    families.finish()


class _Families:
    """Events sorted into the trace's families as they are decoded (:meth:`add`, a batch at a time, in the file's
    order), then each family ordered (:meth:`finish`)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        # category -> (its family, one object for the category's name)
        self.families: dict[str | None, tuple[list[Event], str]] = {
            cat: (getattr(trace, field), cat) for field, cats in FAMILIES for cat in cats
        }
        self.launch_flows: list[Event] = []
        self.skipped = 0
        # One object per distinct string and id: a 1M-event trace repeats a few thousand names, a handful of
        # categories, processes and threads; the decoder makes a new object for each event.
        self.strings: dict[Any, Any] = {}
        self.too_deep: str | None = None  # the first event whose shapes nest too deeply (said once the text decoded)
        self.too_deep_event: int | None = None  # its index
        self.memory: list[tuple[Any, ...]] = []  # the allocator's events (model.memory_row), in the file's order

    def add(self, events: list[Event]) -> None:
        first = self.trace.event_count
        self.trace.event_count += len(events)
        if self.trace.event_count > MAX_EVENTS:
            raise TraceError(
                f"{self.trace.path}: holds more than {MAX_EVENTS:,} events; daydream reads traces of at most that many",
                path=self.trace.path,
            )
        trace, families, strings = self.trace, self.families, self.strings
        thread_names, cpu_ops = trace.thread_names, trace.cpu_ops
        for ev in events:
            ph = ev.ph
            if ph == "X":
                found = families.get(ev.cat)
                if found is None:
                    continue
                family, ev.cat = found
                ts, dur = ev.ts, ev.dur
                if ts is None or dur is None or not (0 <= dur <= MAX_TIME_US and -MAX_TIME_US <= ts <= MAX_TIME_US):
                    self.skipped += 1
                    continue
                args = ev.args
                if args is not None and not (args.input_dims is args.input_dims_2021 is args.input_type is None):
                    self._check_nesting(events, ev, first)
                ev.ph = "X"
                ev.name = strings.setdefault(ev.name, ev.name)
                ev.pid = strings.setdefault(ev.pid, ev.pid)
                ev.tid = strings.setdefault(ev.tid, ev.tid)
                if family is cpu_ops and is_annotation(ev.name, ev.cat):
                    # a range filed as an op (2021-era ProfilerStep#N, Optimizer.step#..., the recorder's module
                    # ranges): an annotation from here on, for the step finder and the graph builder alike
                    family, ev.cat = trace.annotations, RANGE_CAT
                family.append(ev)
            elif ph in ("s", "f", "t"):
                if ev.cat in LAUNCH_FLOW_CATS and ev.ts is not None and -MAX_TIME_US <= ev.ts <= MAX_TIME_US:
                    self.launch_flows.append(ev)
            elif ph == "M" and ev.name == "thread_name" and ev.args is not None and isinstance(ev.args.name, str):
                thread_names[(ev.pid, ev.tid)] = ev.args.name
            elif ph == "i" and ev.name == MEMORY_EVENT:
                row = memory_row(ev.ts, strings.setdefault(ev.pid, ev.pid), strings.setdefault(ev.tid, ev.tid), ev.args)
                if row is not None:
                    self.memory.append(row)

    def _check_nesting(self, events: list[Event], ev: Event, first: int) -> None:
        """Note an event whose shapes (``Input Dims``, ``Input type``) nest more than ``MAX_NESTING`` levels."""
        args = ev.args
        assert args is not None
        for key, value in (
            ("Input Dims", args.input_dims),
            ("Input dims", args.input_dims_2021),
            ("Input type", args.input_type),
        ):
            if value is not None and nesting_exceeds(value) and self.too_deep is None:
                at = first + next(i for i, e in enumerate(events) if e is ev)
                where = f"traceEvents[{at}] ({ev.name[:100]!r})"
                self.too_deep = f"{self.trace.path}: {where}: args '{key}' nests more than {MAX_NESTING} levels"
                self.too_deep_event = at

    def finish(self) -> None:
        """Refuse an event whose shapes nest too deeply; launch flows bind their calls and kernels; each family
        ordered by start, the longest first."""
        if self.too_deep is not None:
            raise TraceError(self.too_deep, path=self.trace.path, event=self.too_deep_event)
        if self.memory:
            self.trace.memory = MemoryEvents.of(self.memory)
        finish_families(self.trace, self.launch_flows, self.skipped)


def find_execution_trace(path: str) -> str | None:
    """An execution trace recorded next to a Kineto trace, by the naming conventions in use.

    ``resnet_kineto.json.gz`` -> ``resnet_et.json.gz``; ``dlrm8/rank0.json.gz`` -> ``dlrm8_et/rank0.et.json.gz``;
    ``X.json`` -> ``X.et.json`` (the recorder's own convention).
    """
    p = Path(path).absolute()  # a bare file name has the parent "." (no name to derive "<dir>_et" from)
    name = p.name
    stem = trace_stem(name)
    if stem is None:
        return None
    candidates = [p.with_name(stem + ".et" + s) for s in TRACE_SUFFIXES]
    for kineto in ("_kineto", "_trace"):
        if stem.endswith(kineto):
            candidates += [p.with_name(stem[: -len(kineto)] + "_et" + s) for s in TRACE_SUFFIXES]
    candidates += [p.parent.with_name(p.parent.name + "_et") / (stem + ".et" + s) for s in TRACE_SUFFIXES]
    for c in candidates:
        if c.is_file():
            return str(c)
    return None
