"""A :class:`TraceError` says where it is in fields as well as in its text: ``path``, and ``event`` (the index of the
event) or ``offset`` (the byte) where known; the text is the one printed, unchanged."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pytest

from daydream import TraceError, load_trace
from daydream.api.demo import bundled_example
from daydream.graph.chakra import read_chakra
from daydream.trace.et import load_execution_trace


def _refusal(load, path: Path) -> TraceError:  # type: ignore[no-untyped-def]
    with pytest.raises(TraceError) as info:
        load(str(path))
    return info.value


def _events() -> dict:  # type: ignore[type-arg]
    return json.loads(gzip.decompress(Path(bundled_example()).read_bytes()))


def test_a_truncated_gzip_names_its_path(tmp_path: Path) -> None:
    path = tmp_path / "cut.json.gz"
    path.write_bytes(Path(bundled_example()).read_bytes()[:5000])
    exc = _refusal(load_trace, path)
    assert str(exc).startswith(f"{path}: corrupt or truncated gzip data")
    assert (exc.path, exc.event, exc.offset) == (str(path), None, None)


def test_json_that_is_not_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"lr": 0.1}')
    exc = _refusal(load_trace, path)
    assert str(exc) == f"{path}: not a Kineto trace: the JSON object has no 'traceEvents'"
    assert exc.path == str(path) and exc.event is None


def test_an_event_with_a_bad_field_names_the_event(tmp_path: Path) -> None:
    doc = _events()
    doc["traceEvents"][5]["ts"] = "soon"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    exc = _refusal(load_trace, path)
    assert str(exc) == f"{path}: malformed trace: Expected `float | null`, got `str` - at `traceEvents[5].ts`"
    assert (exc.path, exc.event) == (str(path), 5)


def test_malformed_json_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "comma.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "a",}]}')
    exc = _refusal(load_trace, path)
    assert str(exc).endswith("(byte 41)") and (exc.path, exc.offset) == (str(path), 41)


def test_a_refused_file_names_its_path(tmp_path: Path) -> None:
    exc = _refusal(load_trace, tmp_path)  # a folder with no rank traces, given as a trace
    assert exc.path == str(tmp_path)
    exc = _refusal(load_trace, tmp_path / "absent.json")
    assert str(exc) == f"{tmp_path / 'absent.json'}: no such file" and exc.path == str(tmp_path / "absent.json")


def test_an_execution_trace_node_names_its_index(tmp_path: Path) -> None:
    path = tmp_path / "et.json"
    path.write_text(json.dumps({"nodes": [{"id": 1, "name": "a"}, {"id": "two", "name": "b"}]}))
    exc = _refusal(load_execution_trace, path)
    assert str(exc).startswith(f"{path}: nodes[1]") and (exc.path, exc.event) == (str(path), 1)


def test_a_chakra_file_that_is_not_one_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "x.0.et"
    path.write_bytes(b"\x05abc")  # a message of 5 bytes holding 3
    exc = _refusal(read_chakra, path)
    assert str(exc) == f"{path}: truncated: the message at byte 1 holds 3 of its 5 bytes"
    assert (exc.path, exc.offset) == (str(path), 1)


def test_the_fields_cross_a_process_boundary() -> None:
    exc = TraceError("t.json: malformed trace", "t.json", event=3, offset=None)
    back = pickle.loads(pickle.dumps(exc))
    assert (str(back), back.path, back.event, back.offset) == ("t.json: malformed trace", "t.json", 3, None)
    assert str(TraceError("only a message")) == "only a message" and TraceError("m").path is None
