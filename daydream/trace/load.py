"""Reading Kineto / Chrome-trace JSON files (plain or gzip) into a :class:`Trace`."""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import msgspec

from daydream._gc import paused_gc
from daydream.errors import TraceError
from daydream.trace.model import (
    ANNOTATION_CATS,
    CPU_OP_CATS,
    GPU_ANNOTATION_CATS,
    GPU_CATS,
    LAUNCH_FLOW_CATS,
    RUNTIME_CATS,
    SYNC_CATS,
    Trace,
    is_annotation,
)
from daydream.trace.recording import read_recording, recording_path
from daydream.trace.schema import EVENTS_DECODER, TRACE_DECODER, Event, EventArgs, TraceFile

GZIP_MAGIC = b"\x1f\x8b"


def read_trace_bytes(path: str | os.PathLike[str]) -> bytes:
    """The JSON text of a trace file, decompressed if it is gzip."""
    p = Path(path)
    if not p.exists():
        raise TraceError(f"{p}: no such file")
    if p.is_dir():
        raise TraceError(f"{p}: is a directory, expected a trace file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise TraceError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise TraceError(f"{p}: corrupt or truncated gzip data ({exc})") from None
    if not raw.strip():
        raise TraceError(f"{p}: empty file, expected Kineto trace JSON")
    return raw


def decode_trace(raw: bytes, path: str) -> TraceFile:
    """Decode JSON text into the typed schema, mapping decoder errors to one-line messages."""
    first = raw.lstrip()[:1]
    try:
        if first == b"[":  # Chrome trace "array format": a bare list of events
            return TraceFile(traceEvents=EVENTS_DECODER.decode(raw))
        if first != b"{":
            raise TraceError(f"{path}: not JSON (starts with {raw.lstrip()[:16]!r})")
        return TRACE_DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        if "missing required field `traceEvents`" in msg:
            raise TraceError(f"{path}: not a Kineto trace: the JSON object has no 'traceEvents'") from None
        raise TraceError(f"{path}: malformed trace: {_describe_validation(msg)}") from None
    except msgspec.DecodeError as exc:
        raise TraceError(f"{path}: not valid JSON: {exc}") from None


def _describe_validation(msg: str) -> str:
    # msgspec says "Expected `float`, got `str` - at `$.traceEvents[12].ts`"; keep it, named plainly.
    return msg.replace("$.traceEvents", "traceEvents")


@paused_gc()
def load_trace(path: str | os.PathLike[str], et: str | os.PathLike[str] | None = None) -> Trace:
    """Load a Kineto trace (and, optionally, the PyTorch execution trace recorded beside it).

    Raises :class:`TraceError` with a one-line message for any unreadable input.
    """
    spath = str(path)
    decoded = decode_trace(read_trace_bytes(path), spath)
    trace = Trace(path=spath, event_count=len(decoded.traceEvents))
    trace.devices = list(decoded.deviceProperties or [])
    trace.distributed = dict(decoded.distributedInfo or {})
    trace.schema_version = decoded.schemaVersion
    _sort_events(trace, decoded.traceEvents)
    from daydream.trace.et import attach_execution_trace

    sidecar = recording_path(spath)
    if Path(sidecar).is_file():
        try:
            trace.recording = read_recording(sidecar)
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


def _sort_events(trace: Trace, events: list[Event]) -> None:
    families = {
        **dict.fromkeys(CPU_OP_CATS, trace.cpu_ops),
        **dict.fromkeys(ANNOTATION_CATS, trace.annotations),
        **dict.fromkeys(RUNTIME_CATS, trace.runtime),
        **dict.fromkeys(GPU_CATS, trace.gpu),
        **dict.fromkeys(GPU_ANNOTATION_CATS, trace.gpu_annotations),
        **dict.fromkeys(SYNC_CATS, trace.syncs),
    }
    launch_flows: list[Event] = []
    skipped = 0
    names: dict[str, str] = {}  # one string object per distinct name: a 1M-event trace repeats a few thousand
    for ev in events:
        ph = ev.ph
        if ph == "X":
            family = families.get(ev.cat)  # type: ignore[arg-type]
            if family is None:
                continue
            if ev.ts is None or ev.dur is None or ev.dur < 0:
                skipped += 1
                continue
            ev.name = names.setdefault(ev.name, ev.name)
            if family is trace.cpu_ops and is_annotation(ev.name, ev.cat):
                # a range filed as an op (2021-era ProfilerStep#N, Optimizer.step#..., the recorder's module ranges):
                # an annotation from here on, for the step finder and the graph builder alike
                family, ev.cat = trace.annotations, "user_annotation"
            family.append(ev)
        elif ph in ("s", "f", "t"):
            if ev.cat in LAUNCH_FLOW_CATS and ev.ts is not None:
                launch_flows.append(ev)
        elif ph == "M" and ev.name == "thread_name" and ev.args is not None and isinstance(ev.args.name, str):
            trace.thread_names[(ev.pid, ev.tid)] = ev.args.name
    _correlate_by_flows(trace, launch_flows)
    for family_list in (trace.cpu_ops, trace.annotations, trace.runtime, trace.gpu, trace.gpu_annotations, trace.syncs):
        family_list.sort(key=_start_then_longest)
    trace.skipped = skipped
    if skipped:
        trace.warnings.append(f"{trace.path}: skipped {skipped} complete events without a valid ts/dur")
    if trace.event_count and not (trace.cpu_ops or trace.runtime or trace.gpu or trace.annotations):
        raise TraceError(f"{trace.path}: no profiler events (no CPU ops, runtime calls or GPU activity) in the trace")


def _correlate_by_flows(trace: Trace, flows: list[Event]) -> None:
    """Give runtime calls and GPU events without ``args.correlation`` the id of the launch flow
    ('s' on the call, 'f' on the kernel) that binds them, as some exporters record only the flow."""
    lacking = [e for e in (*trace.runtime, *trace.gpu) if e.args is None or e.args.correlation is None]
    if not lacking or not flows:
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


def _start_then_longest(ev: Event) -> tuple[float, float]:
    return (ev.ts, -ev.dur)  # type: ignore[operator]


def find_execution_trace(path: str) -> str | None:
    """An execution trace recorded next to a Kineto trace, by the naming conventions in use.

    ``resnet_kineto.json.gz`` -> ``resnet_et.json.gz``; ``dlrm8/rank0.json.gz`` -> ``dlrm8_et/rank0.et.json.gz``;
    ``X.json`` -> ``X.et.json`` (the recorder's own convention).
    """
    p = Path(path).absolute()  # a bare file name has the parent "." (no name to derive "<dir>_et" from)
    name = p.name
    stem = name[: -len(".json.gz")] if name.endswith(".json.gz") else name[: -len(".json")] if name.endswith(".json") else None
    if stem is None:
        return None
    candidates = [p.with_name(stem + ".et.json"), p.with_name(stem + ".et.json.gz")]
    if stem.endswith("_kineto"):
        base = stem[: -len("_kineto")]
        candidates += [p.with_name(base + "_et.json.gz"), p.with_name(base + "_et.json")]
    if stem.endswith("_trace"):
        base = stem[: -len("_trace")]
        candidates += [p.with_name(base + "_et.json.gz"), p.with_name(base + "_et.json")]
    candidates += [p.parent.with_name(p.parent.name + "_et") / (stem + ".et.json.gz")]
    for c in candidates:
        if c.is_file():
            return str(c)
    return None
