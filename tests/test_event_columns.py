"""The columnar loader (daydream.trace.columns): its columns hold what the typed decoder's events hold, field for
field, on every shared trace and on text written every way JSON allows; what the scanner is not certain of goes to
the reference decoder, whose messages a hostile file gets."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import msgspec
import numpy as np
import pytest

from daydream.errors import TraceError
from daydream.trace import load as loader
from daydream.trace import reading
from daydream.trace.columns import EventColumns, load_columns
from daydream.trace.load import load_trace
from daydream.trace.reading import decode_trace, read_trace_bytes

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "daydream" / "examples" / "mlp_cpu.json.gz"


def reference_events(path: Path) -> list[bytes]:
    """The typed decoder's events of a file, each as JSON (which tells 1 from 1.0 and -0.0 from 0.0)."""
    return [msgspec.json.encode(e) for e in decode_trace(read_trace_bytes(str(path)), str(path)).traceEvents]


def column_events(columns: EventColumns) -> list[bytes]:
    return [msgspec.json.encode(columns.event(i)) for i in range(columns.count)]


def assert_same(path: Path, scanned: bool = True) -> EventColumns:
    columns = load_columns(str(path))
    assert columns.scanned is scanned
    assert column_events(columns) == reference_events(path)
    return columns


def write(tmp_path: Path, text: str | bytes, name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def trace_text(events: list[str], head: str = '"schemaVersion": 1, ') -> str:
    return "{" + head + '"traceEvents": [' + ", ".join(events) + "]}"


def shared_trace_files() -> list[Path]:
    from tests.conftest import SHARED_TRACES

    found = sorted(p for p in SHARED_TRACES.rglob("*.json.gz") if "_et" not in p.parent.name and "_et." not in p.name)
    return found


@pytest.mark.parametrize("path", [EXAMPLE, *shared_trace_files()], ids=lambda p: p.name)
def test_columns_hold_the_typed_events_of_every_shared_trace(path: Path) -> None:
    columns = assert_same(path)
    assert columns.document is not None and columns.document.traceEvents == []


@pytest.mark.slow
def test_columns_of_validation_traces() -> None:
    """A trace of each validation program (H200, H100, CPU; recorded by daydream record and by torch.profiler)."""
    seen: set[str] = set()
    for path in sorted((ROOT / "validation" / "traces").rglob("rank0.json.xz")):
        case = path.relative_to(ROOT / "validation" / "traces").parts[0]
        if case not in seen:
            seen.add(case)
            assert_same(path)
    assert len(seen) >= 10


def test_the_document_around_the_events_is_the_loaders(shared_traces: Path) -> None:
    path = shared_traces / "param" / "dlrm8" / "rank3.json.gz"
    columns = load_columns(str(path))
    trace = load_trace(path)
    assert columns.document is not None
    assert columns.document.distributedInfo == trace.distributed
    assert list(columns.document.deviceProperties or []) == trace.devices
    assert columns.count == trace.event_count


EVENTS = [
    (
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 4472205470991.068, "dur": 12.5,'
        ' "args": {"External id": 7, "Input Dims": [[128, 256], [256, 512], []], "Input type": ["float", "float", ""],'
        ' "Sequence number": 3, "Fwd thread id": 0, "Record function id": 0}}'
    ),
    (
        '{"ph":"X","cat":"kernel","name":"sm90_xmma \\"gemm\\" \\u00e9\\ud83d\\ude00","pid":0,"tid":7,"ts":1.5,"dur":0,'
        '"args":{"correlation":99,"stream":7,"device":0,"bytes":1.5e3,"kind":"memcpy","grid":[1,2,3]}}'
    ),
    '{"ph": "f", "id": 99, "pid": 0, "tid": 7, "ts": 1.5, "cat": "ac2g", "name": "ac2g", "bp": "e"}',
    (
        '{"ph": "M", "name": "thread_name", "pid": "Spans", "tid": "stream 7", "args": {"name": "日本 ü 😀", "labels":'
        " null}}"
    ),
    '{"ph": "i", "name": "a\\u0062", "s": "t", "ts": -0, "args": null}',
    '{"ph": "i", "name": "ab", "ts": -0.0, "dur": 1E-7, "args": {}}',
    '{"name": "no ph", "ts": 0.1, "dur": 123456789.123456789, "pid": 12345678901234567890}',
    (
        '{"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "ts": 5e-324, "dur": 1.7976931348623157e308, "args":'
        ' {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": "1024", "Group size": 2.0, "Process'
        ' Group Name": "0", "Process Group Description": {"desc": [true, false, null, 1.5]}, "Process Group Ranks":'
        ' "[0, 1]", "dtype": "Float", "wait_on_stream": 3, "cuda_sync_kind": "event",'
        ' "wait_on_cuda_event_record_corr_id": 18446744073709551615000, "external id": 5, "Input dims": [[[1, 2]],'
        " []]}}"
    ),
    "{}",
    '{"ph": "X", "name": "deep but kept", "ts": 1, "dur": 2, "args": {"Input Dims": [[[[[[[[[[1]]]]]]]]]]}}',
]


def test_every_way_of_writing_values_reads_as_the_decoder_reads_it(tmp_path: Path) -> None:
    """Escapes (a string written two ways is one string), UTF-8, integers beyond 64 bits, decimals beyond 53 bits of
    digits, -0, subnormals, strings, lists and objects in free-form fields, args null or empty, absent defaults."""
    columns = assert_same(write(tmp_path, trace_text(EVENTS)))
    assert columns.strings.count("ab") == 1 or {columns.value("name", 4), columns.value("name", 5)} == {"ab"}
    assert columns.value("pid", 6) == 12345678901234567890 and columns.value("pid", 8) == 0  # absent: the default
    assert columns.value("ts", 4) == 0.0 and np.signbit(columns.value("ts", 5))
    # compact, and spread with every kind of whitespace; the array format
    compact = json.dumps(json.loads(trace_text(EVENTS)), separators=(",", ":"), ensure_ascii=False)
    assert_same(write(tmp_path, compact, "compact.json"))
    spread = json.dumps(json.loads(trace_text(EVENTS)), indent="\t").replace("\n", "\r\n")
    assert_same(write(tmp_path, spread, "spread.json"))
    assert_same(write(tmp_path, "[" + ",\n".join(EVENTS) + "]", "array.json"))
    assert_same(write(tmp_path, gzip.compress(trace_text(EVENTS).encode()), "t.json.gz"))


def random_event(rng: random.Random, names: list[str]) -> dict[str, object]:
    """An event with a random choice of the fields the loader reads, each of a type it takes."""

    def number() -> object:
        return rng.choice(
            [
                rng.randint(-(10**6), 10**6),
                rng.random() * 10 ** rng.randint(-8, 15),
                rng.randint(0, 2**70),
                round(rng.uniform(0, 1e13), 3),
                0,
                -0.0,
            ]
        )

    def ident() -> object:
        return rng.choice([rng.randint(0, 2**40), rng.choice(names), None])

    event: dict[str, object] = {}
    for key, make in (
        ("ph", lambda: rng.choice("XsftMiBE")),
        ("cat", lambda: rng.choice(["cpu_op", "kernel", "cuda_runtime", "ac2g", None])),
        ("name", lambda: rng.choice(names)),
        ("pid", ident),
        ("tid", ident),
        ("ts", lambda: rng.choice([number(), None])),
        ("dur", lambda: rng.choice([number(), None])),
        ("id", ident),
        ("bp", lambda: rng.choice(["e", None])),
    ):
        if rng.random() < 0.8:
            event[key] = make()
    ts = event.get("ts")
    if isinstance(ts, int) and abs(ts) > 2**63:
        event["ts"] = float(ts)  # msgspec reads such an integer as a float with its own rounding: not this test's
    if rng.random() < 0.8:
        args: dict[str, object] = {}
        for key, make in (
            ("correlation", lambda: rng.choice([rng.randint(0, 2**62), None])),
            ("External id", lambda: rng.randint(0, 2**31)),
            (
                "Input Dims",
                lambda: [[rng.randint(1, 4096) for _ in range(rng.randint(0, 4))] for _ in range(rng.randint(0, 3))],
            ),
            ("stream", ident),
            ("bytes", lambda: rng.choice([number(), rng.choice(names)])),
            ("Process Group Ranks", lambda: rng.choice([[0, 1], "[0, 1]", {"a": [None, True]}, 3, 2.5, False])),
            ("name", lambda: rng.choice(names)),
            ("unknown", lambda: {"x": [1, {"y": "}, {"}, 2]}),  # a cut proposed inside it is refused
        ):
            if rng.random() < 0.5:
                args[key] = make()
        event["args"] = args if rng.random() < 0.9 else None
    return event


def test_random_events_read_as_the_decoder_reads_them(tmp_path: Path) -> None:
    """Thousands of random events, over several batches (the string table grown on the way): the same events."""
    rng = random.Random(55)
    names = [f"name {i} {chr(0xE9 + i % 50)}" for i in range(3000)] + ['with "quotes"', "tab\there", "}, {", ""]
    events = [random_event(rng, names) for _ in range(40_000)]
    text = json.dumps({"traceEvents": events}, ensure_ascii=rng.random() < 0.5)
    assert len(text) > 2 * reading.BATCH_BYTES
    columns = assert_same(write(tmp_path, text))
    assert len(columns.strings) > 2048  # past the table's first size


@pytest.mark.parametrize(
    "text",
    [
        trace_text(['{"ph": "X", "t\\u0073": 1}']),  # a key written with escapes
        trace_text(['{"ph": "X", "ts": 1, "ts": 2}']),  # a key twice
        trace_text(['{"ph": "X", "args": {"other": ' + "[" * 80 + "]" * 80 + "}}"]),  # nested past the limit
        trace_text(['{"ph": "X", "name": "x"}', '{"ph": "X", "name": "\xff"}']),  # invalid UTF-8 (below: as bytes)
    ],
)
def test_what_the_scanner_is_unsure_of_is_the_reference_decoders(tmp_path: Path, text: str) -> None:
    raw = text.encode().replace("\xff".encode(), b"\xff")
    columns = assert_same(write(tmp_path, raw), scanned=False)
    if b"\xff" in raw:
        assert columns.warnings and "invalid UTF-8" in columns.warnings[0]


@pytest.mark.parametrize(
    "text",
    [
        trace_text(['{"ph": "X", "ts": "1"}']),
        trace_text(['{"ph": "X", "args": {"correlation": 1.5}}']),
        trace_text(['{"ph": "X", "pid": true}']),
        trace_text(['{"ph": "X", "args": {"Input Dims": {"a": 1}}}']),
        trace_text(['{"ph": null}']),
        trace_text(["[1, 2]"]),
        trace_text(['{"ph": "X", "ts": 1}'])[:-3],
        trace_text(['{"ph": "X", "ts": 01}']),
        trace_text(['{"ph": "X", "name": "a\\qb"}']),
        trace_text(['{"ph": "X", "ts": NaN}']),
        trace_text(['{"ph": "X", "args": {"other": nulx}}']),  # a literal misspelled, in a field not read
        trace_text(['{"ph": "X", "dur": 1e999}']),  # beyond a double: "Number out of range"
        trace_text(['{"ph": "X", "args": {"bytes": -1e400}}']),
        trace_text(['{"ph": "X", "args": {"name": 1' + "0" * 400 + ".5}}"]),
        trace_text([]),
        "",
    ],
)
def test_a_file_that_is_no_trace_is_refused_as_the_loader_refuses_it(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as refused:
        load_trace(path)
    with pytest.raises(TraceError) as also:
        load_columns(str(path))
    assert str(also.value) == str(refused.value)


FAMILIES = ("cpu_ops", "annotations", "runtime", "gpu", "gpu_annotations", "syncs")


def load_both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    """The trace as load_trace reads it through the columns (every size) and through the batched decoder."""
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", 0)
    columnar = load_trace(path)
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", float("inf"))
    return columnar, load_trace(path)


def assert_same_trace(a: object, b: object) -> None:
    for family in FAMILIES:
        assert [msgspec.json.encode(e) for e in getattr(a, family)] == [
            msgspec.json.encode(e) for e in getattr(b, family)
        ], family
    for field in (
        "thread_names",
        "devices",
        "distributed",
        "schema_version",
        "event_count",
        "skipped",
        "warnings",
        "et_ops",
    ):
        assert getattr(a, field) == getattr(b, field), field


@pytest.mark.parametrize("path", [EXAMPLE, *shared_trace_files()], ids=lambda p: p.name)
def test_the_trace_filed_from_columns_is_the_decoders(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_same_trace(*load_both(path, monkeypatch))


def test_filing_skips_files_names_and_correlates_as_the_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Events without a valid time skipped (and counted), ranges recorded as ops filed as annotations, the last name
    of a thread kept, a kernel bound to its launch by the flow alone, ties ordered the longest first then as written,
    categories no family takes left out."""
    events = [
        '{"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0, "dur": 100}',
        '{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5}',
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 10, "dur": 7}',
        '{"ph": "X", "cat": "cpu_op", "name": "aten::sub", "pid": 1, "tid": 1, "ts": 10, "dur": 7}',
        '{"ph": "X", "cat": "cpu_op", "name": "no dur", "pid": 1, "tid": 1, "ts": 11}',
        '{"ph": "X", "cat": "cpu_op", "name": "negative", "pid": 1, "tid": 1, "ts": 11, "dur": -1}',
        '{"ph": "X", "cat": "cpu_op", "name": "far", "pid": 1, "tid": 1, "ts": 2e18, "dur": 1}',
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 3}',
        '{"ph": "s", "cat": "ac2g", "id": 42, "pid": 1, "tid": 1, "ts": 20, "name": "ac2g"}',
        '{"ph": "f", "cat": "ac2g", "id": 42, "pid": 0, "tid": 7, "ts": 30, "name": "ac2g", "bp": "e"}',
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 30, "dur": 4, "args": {"stream": 7}}',
        '{"ph": "X", "cat": "python_function", "name": "f", "pid": 1, "tid": 1, "ts": 1, "dur": 1}',
        '{"ph": "X", "cat": "something else", "name": "g", "pid": 1, "tid": 1, "ts": 1, "dur": 1}',
        '{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}',
        '{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main thread"}}',
        '{"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": 7}}',
    ]
    columnar, decoded = load_both(write(tmp_path, trace_text(events)), monkeypatch)
    assert_same_trace(columnar, decoded)
    assert columnar.skipped == 3 and [e.name for e in columnar.cpu_ops] == ["aten::mul", "aten::sub", "aten::add"]
    assert columnar.gpu[0].args.correlation == 42 and columnar.thread_names == {(1, 1): "main thread"}
    assert [e.cat for e in columnar.annotations] == ["user_annotation", "python_function"]


def test_large_traces_are_filed_from_columns_small_ones_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_trace takes the columns from COLUMNAR_MIN_TEXT_BYTES of text on (a gzip file's estimated from its size):
    below, numba is not imported for a small trace."""
    import daydream.trace.filing as filing

    calls: list[str] = []
    real = filing.load_filed
    monkeypatch.setattr(filing, "load_filed", lambda p: calls.append(p) or real(p))
    plain = write(tmp_path, trace_text(EVENTS[:1]))
    packed = write(tmp_path, gzip.compress(trace_text(EVENTS[:1]).encode()), "t.json.gz")
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", plain.stat().st_size + 1)
    load_trace(plain)
    assert calls == []
    load_trace(packed)  # its estimate: GZIP_TEXT_RATIO times its size
    assert calls == ([str(packed)] if packed.stat().st_size * loader.GZIP_TEXT_RATIO > plain.stat().st_size else [])
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", plain.stat().st_size)
    load_trace(plain)
    assert calls[-1] == str(plain)


def hostile(tmp_path: Path, kind: str) -> Path:
    import os
    import socket

    p = tmp_path / f"{kind}.json"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(p))
    elif kind == "directory":
        p.mkdir()
    elif kind == "loop":
        p.symlink_to(p)
    elif kind == "whitespace":
        p.write_bytes(b" \n\t" * 1000)
    elif kind == "truncated gzip":
        p = tmp_path / "t.json.gz"
        p.write_bytes(gzip.compress(trace_text(EVENTS).encode())[:-20])
    elif kind == "number out of range":
        p.write_text(trace_text(['{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1e999}']))
    elif kind == "gzip bomb":
        p = tmp_path / "bomb.json.gz"
        p.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (80 << 20) + b"]}"))
    return p


@pytest.mark.parametrize(
    "kind",
    [
        "missing",
        "fifo",
        "socket",
        "directory",
        "loop",
        "whitespace",
        "truncated gzip",
        "gzip bomb",
        "number out of range",
    ],
)
def test_hostile_files_get_the_same_message_through_the_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    path = hostile(tmp_path, kind)
    messages = []
    for threshold in (0, float("inf")):
        monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", threshold)
        with pytest.raises(TraceError) as refused:
            load_trace(path)
        messages.append(str(refused.value))
    assert messages[0] == messages[1]
