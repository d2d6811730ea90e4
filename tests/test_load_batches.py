"""Decoding a trace a batch of events at a time (daydream.trace.batches) gives what decoding its text whole gives,
for every layout of the JSON text; what cannot be cut is read whole, with the whole-text messages."""

from __future__ import annotations

import gzip
import io
import json
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from synth import make_trace

import daydream.trace.load as loader
import daydream.trace.reading as reading
from daydream import TraceError
from daydream.trace.model import Trace
from daydream.workers import read_ahead

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
FAMILIES = ("cpu_ops", "annotations", "runtime", "gpu", "gpu_annotations", "syncs")


def _same(batched: Trace, whole: Trace) -> None:
    for family in FAMILIES:
        assert getattr(batched, family) == getattr(whole, family), family
    for field in ("event_count", "skipped", "thread_names", "devices", "distributed", "schema_version", "warnings"):
        assert getattr(batched, field) == getattr(whole, field), field


def _check(path: Path, monkeypatch: pytest.MonkeyPatch, batch_bytes: int = 2048) -> Trace:
    """The batched load of ``path`` equals the whole-text load, and it decoded batches of about ``batch_bytes``."""
    monkeypatch.setattr(reading, "BATCH_BYTES", batch_bytes)
    monkeypatch.setattr(reading, "_READ_CHUNK", 997)  # chunks that cut events, keys and numbers anywhere
    decoded: list[int] = []  # the length of each batch that decoded
    decode = loader.decode_batch

    def counted(text: Any, *args: Any) -> Any:
        result = decode(text, *args)
        if result is not None and not args:
            decoded.append(len(text))
        return result

    monkeypatch.setattr(loader, "decode_batch", counted)
    batched = loader._load_in_batches(str(path))
    assert batched is not None, "the text was read whole"
    _same(batched, loader._load_whole(str(path)))
    text_bytes = sum(len(c) for c in reading._text_chunks(str(path), 1 << 40, b"{[", ""))
    assert len(decoded) >= text_bytes // (batch_bytes + 997 + 8192)  # batches, not one at the end
    assert max(decoded) <= batch_bytes + 997 + 8192  # an event or two past the batch's size, and a chunk
    return batched


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    data = text.encode() if isinstance(text, str) else text
    p.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return p


SHARED_TRACES = [
    "param/dlrm8/rank0.json.gz",
    "param/resnet_kineto.json.gz",
    "hta/nccl_parser_config_nccl_data.json.gz",
    "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/triton_example_triton_example.json.gz",
]


@pytest.mark.parametrize("name", SHARED_TRACES)
def test_real_traces_decode_in_batches_as_whole(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"{path} not found (../shared/traces is not checked out here)")
    _check(path, monkeypatch, batch_bytes=1 << 16)


def test_the_bundled_example_decodes_in_batches() -> None:
    path = Path(loader.__file__).parents[1] / "examples" / "mlp_cpu.json.gz"
    batched = loader._load_in_batches(str(path))
    assert batched is not None
    _same(batched, loader._load_whole(str(path)))


def _doc(**extra: Any) -> dict[str, Any]:
    trace = make_trace()
    return {
        "schemaVersion": 1,
        "deviceProperties": trace["deviceProperties"],
        **extra,
        "traceEvents": trace["traceEvents"],
        "distributedInfo": {"rank": 0, "world_size": 1},
        "traceName": "t",
    }


LAYOUTS = {
    "pretty": lambda d: json.dumps(d, indent=2),
    "minified": lambda d: json.dumps(d, separators=(",", ":")),
    "events last": lambda d: json.dumps({k: d[k] for k in (*[k for k in d if k != "traceEvents"], "traceEvents")}),
    "events first": lambda d: json.dumps({k: d[k] for k in ("traceEvents", *[k for k in d if k != "traceEvents"])}),
    "array": lambda d: json.dumps(d["traceEvents"], indent=1) + "\n\n",
    "crlf and tabs": lambda d: json.dumps(d, indent="\t").replace("\n", "\r\n"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("gz", [False, True])
def test_every_layout_decodes_in_batches_as_whole(
    layout: str, gz: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "t.json.gz" if gz else "t.json", LAYOUTS[layout](_doc()))
    trace = _check(path, monkeypatch, batch_bytes=512)
    assert len(trace.gpu) == 15 and len(trace.runtime) == 18


def test_braces_and_keys_inside_strings_do_not_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Names holding '}, {', '"traceEvents": [' and '}]' (escaped quotes), and arguments holding lists of objects:
    a cut there does not decode, and a cut further on is taken."""
    doc = _doc(meta={"note": 'a "traceEvents": [ in a string}, {'})
    for i, ev in enumerate(doc["traceEvents"]):
        if ev.get("ph") == "X" and i % 3 == 0:
            ev["name"] = ev["name"] + '}, {"x": 1}] "traceEvents": ['
        if ev.get("ph") == "X" and i % 5 == 0:
            ev.setdefault("args", {})["labels"] = [{"a": 1}, {"b": [{"c": 2}, {"d": 3}]}]
    path = _write(tmp_path, "t.json", json.dumps(doc, indent=1))
    for batch_bytes in (64, 300, 4096):
        _check(path, monkeypatch, batch_bytes)


def test_a_second_traceevents_inside_another_key_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """'traceEvents' as the key of a nested object before the real one: the cut document holds the real array, so
    the text is read whole, which reads the top level's."""
    doc = _doc()
    text = json.dumps({"meta": {"traceEvents": []}, **doc})
    path = _write(tmp_path, "t.json", text)
    monkeypatch.setattr(reading, "BATCH_BYTES", 512)
    assert loader._load_in_batches(str(path)) is None
    assert len(loader.load_trace(path).gpu) == 15


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            (
                '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}, {"ph": "X", "ts":'
                ' "soon"}]}'
            ),
            r"traceEvents\[1\]\.ts",
        ),
        ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1},', "not valid JSON"),
        (
            '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}], "deviceProperties": 3}',
            "malformed trace",
        ),
        ('[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}] trailing', "not valid JSON"),
        ('{"traceEvents": []}', "no events"),
    ],
)
def test_what_cannot_be_cut_gets_the_whole_text_message(text: str, message: str, tmp_path: Path) -> None:
    path = _write(tmp_path, "t.json", text)
    with pytest.raises(TraceError, match=message):
        loader.load_trace(path)


def test_invalid_utf8_is_read_whole_with_its_warning(tmp_path: Path) -> None:
    doc = _doc()
    doc["traceEvents"][5]["name"] = "bad\udcff"
    path = _write(tmp_path, "t.json", json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogateescape"))
    assert loader._load_in_batches(str(path)) is None
    trace = loader.load_trace(path)
    assert any("invalid UTF-8" in w for w in trace.warnings)


def test_a_batch_without_an_event_boundary_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An event longer than the text the batching may hold unconfirmed: the text is read whole."""
    doc = _doc()
    doc["traceEvents"][3].setdefault("args", {})["Input type"] = ["x" * 100] * 200
    path = _write(tmp_path, "t.json", json.dumps(doc))
    monkeypatch.setattr(reading, "BATCH_BYTES", 256)
    monkeypatch.setattr(reading, "MAX_PENDING_BYTES", 4096)
    monkeypatch.setattr(reading, "_READ_CHUNK", 8192)
    assert loader._load_in_batches(str(path)) is None
    assert len(loader.load_trace(path).gpu) == 15


def test_the_events_kept_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, "t.json", json.dumps(_doc()))
    monkeypatch.setattr(loader, "MAX_EVENTS", 20)
    with pytest.raises(
        TraceError, match=r"t.json: holds more than 20 events; daydream reads traces of at most that many"
    ):
        loader.load_trace(path)


def test_shapes_nested_too_deeply_are_named_by_their_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _doc()
    deep: Any = []
    for _ in range(70):
        deep = [deep]
    i = next(i for i, ev in enumerate(doc["traceEvents"]) if ev.get("cat") == "cpu_op" and i > 20)
    doc["traceEvents"][i].setdefault("args", {})["Input Dims"] = deep
    path = _write(tmp_path, "t.json", json.dumps(doc))
    monkeypatch.setattr(reading, "BATCH_BYTES", 512)
    with pytest.raises(TraceError, match=rf"traceEvents\[{i}\] \(.*\): args 'Input Dims' nests more than 64 levels"):
        loader.load_trace(path)


def _inflaters() -> list[Any]:
    """The inflaters the loader may run on: ISA-L's where isal is installed (its wheels' platforms), zlib's."""
    try:
        from isal import isal_zlib
    except ImportError:
        return [zlib]
    return [isal_zlib, zlib]


@pytest.mark.parametrize("inflater", _inflaters(), ids=lambda m: m.__name__)
def test_gzip_members_padding_and_truncation(inflater: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "_inflate_module", inflater)
    monkeypatch.setattr(reading, "_INFLATE_ERRORS", (zlib.error, inflater.error))
    data = json.dumps(_doc()).encode()
    cut = len(data) // 3
    padded = gzip.compress(data[:cut]) + b"\0" * 10 + gzip.compress(data[cut:]) + b"\0" * 100
    assert b"".join(reading._gunzip_chunks(io.BytesIO(padded))) == data
    path = _write(tmp_path, "t.json", padded)
    assert len(loader.load_trace(path).gpu) == 15
    whole = gzip.compress(data)
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0xFF  # a byte of the deflate stream: its check fails, or the stream is invalid
    for bad in (whole[:-50], bytes(flipped), whole[:-8] + b"\0\0\0\0" + whole[-4:], whole + b"not gzip"):
        path.write_bytes(bad)
        with pytest.raises(TraceError, match="corrupt or truncated gzip data"):
            loader.load_trace(path)


def test_isal_inflates_where_installed() -> None:
    """Where isal is installed (a dependency on the platforms it has wheels for), the loader inflates with it: a
    fallback to zlib by mistake would cost a 10M-event trace's load seconds."""
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    assert reading._inflate_module is isal_zlib
    assert isal_zlib.error in reading._INFLATE_ERRORS


def test_read_ahead_hands_over_items_errors_and_stops_its_producer() -> None:
    assert list(read_ahead(iter(range(100)))) == list(range(100))

    def failing() -> Iterator[int]:
        yield 1
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for x in read_ahead(failing()):
            got.append(x)
    assert got == [1]
    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            closed.set()

    ahead = read_ahead(endless())
    assert next(ahead) == 0
    ahead.close()
    assert closed.is_set()  # the producer stopped and closed its source before close() returned


def test_a_decoder_that_keeps_views_of_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A decoder may hold a view of the text it was given after it returns (numba holds its arguments in reference
    cycles while it compiles the scanner, on a first run): the pending text, which cannot be resized then, is
    copied instead - the same trace, not 'Existing exports of data: object cannot be re-sized'."""
    kept: list[memoryview] = []
    decode = loader.decode_batch

    def keeping(text: Any, *args: Any) -> Any:
        if isinstance(text, memoryview):
            kept.append(memoryview(text.obj))  # a view of the whole pending text, kept
        return decode(text, *args)

    monkeypatch.setattr(loader, "decode_batch", keeping)
    example = Path(loader.__file__).resolve().parents[1] / "examples" / "mlp_cpu.json.gz"
    _check(example, monkeypatch)
    assert kept, "the decoder saw no batch"
    for view in kept:
        view.release()


def test_batches_are_decoded_ahead_of_their_taker_on_a_thread_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next batch is decoded (the compiled scanner releases the GIL) while the one before is taken: decoded off
    the taker's thread, taken in order; a taker that fails ends the reading with its own error, the decoding thread
    stopped and the file closed, not a hang."""
    monkeypatch.setattr(reading, "BATCH_BYTES", 2048)
    path = _write(tmp_path, "t.json", LAYOUTS["pretty"](_doc()))
    decoders: set[int] = set()

    def decode(text: Any) -> Any:
        decoders.add(threading.get_ident())
        return loader.decode_batch(text)

    taken: list[Any] = []
    assert loader.decode_in_batches(str(path), decode, taken.extend) is not None
    assert decoders and threading.get_ident() not in decoders
    whole = loader._load_whole(str(path))
    assert len(taken) == whole.event_count and len(taken) > 20  # every event, in the batches' order
    assert [e.name for e in taken] == [e["name"] for e in _doc()["traceEvents"]]

    def failing(events: Any) -> None:
        if taken:
            raise RuntimeError("taker failed")
        taken.append(events)

    taken.clear()
    with pytest.raises(RuntimeError, match="taker failed"):
        loader.decode_in_batches(str(path), decode, failing)
    assert not [t for t in threading.enumerate() if t.name == "daydream-read-ahead"]
