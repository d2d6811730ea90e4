"""The recording sidecar as typed structs (daydream.trace.recording): old sidecars load, unknown fields are ignored,
a malformed one leaves the trace standing with a warning that names the file and the field."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import msgspec
import pytest

from daydream.errors import TraceError
from daydream.graph import build_graph
from daydream.perf.cpu.host import recorded_host
from daydream.trace import load_trace
from daydream.trace.recording import Recording, as_recording, encode_recording, read_recording

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "daydream" / "examples" / "mlp_cpu.json.gz"
EVENTS = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": {}}]


def _trace_with_sidecar(tmp_path: Path, sidecar: object) -> Path:
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": EVENTS}))
    (tmp_path / "rank0.daydream.json").write_text(json.dumps(sidecar))
    return path


def _without_nulls(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _sidecars() -> list[Path]:
    return sorted({*REPO.glob("daydream/examples/*.daydream.json"), *REPO.glob("validation/**/*.daydream.json")})


@pytest.mark.parametrize("path", _sidecars(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_sidecar_in_the_repository_loads(path: Path) -> None:
    rec = read_recording(path)
    assert rec.format == "daydream.recording/1" and rec.steps is not None and rec.device is not None
    # nothing the file holds is lost: the struct writes back every value it was read from (and nulls for the rest)
    assert _without_nulls(json.loads(encode_recording(rec))) == _without_nulls(json.loads(path.read_text()))


def test_the_bundled_sidecar_reaches_the_graph_as_a_struct(tmp_path: Path) -> None:
    graph = build_graph(load_trace(EXAMPLE))
    rec = graph.graph["recording"]
    assert isinstance(rec, Recording) and rec.host is None  # recorded before the sidecar had `host`
    assert rec["format"] == rec.format and rec.get("device") is rec.device and rec.get("nope", 1) == 1
    assert recorded_host(rec) == (rec.device.threads, None) == recorded_host(msgspec.to_builtins(rec))
    with pytest.raises(KeyError):
        rec["nope"]  # noqa: B018


def test_missing_fields_default_and_unknown_ones_are_ignored(tmp_path: Path) -> None:
    sidecar = {"format": "daydream.recording/1", "host": {"threads": 4, "cores": 8, "numa": 2}, "from_the_future": [1]}
    trace = load_trace(_trace_with_sidecar(tmp_path, sidecar))
    assert not trace.warnings
    rec = trace.recording
    assert rec is not None and rec.modules == [] and rec.steps is None and rec.embeddings is None
    assert recorded_host(rec) == (4, 8)


@pytest.mark.parametrize(
    "sidecar, field, expected",
    [
        ({"host": {"threads": "x"}}, "host.threads", "Expected `int | null`, got `str`"),
        ({"steps": {"wall_ms": [1.0, "slow"]}}, "steps.wall_ms[1]", "Expected `float`, got `str`"),
        (
            {"modules": [{"path": "m", "parameters": [{"name": "w", "shape": {}}]}]},
            "modules[0].parameters[0].shape",
            "Expected `array`, got `object`",
        ),
        ({"device": "cuda"}, "device", "Expected `object | null`, got `str`"),
    ],
)
def test_a_malformed_sidecar_is_named_with_its_field(
    tmp_path: Path, sidecar: dict[str, object], field: str, expected: str
) -> None:
    path = _trace_with_sidecar(tmp_path, {"format": "daydream.recording/1", **sidecar})
    trace = load_trace(path)  # the trace stands without its sidecar
    assert trace.recording is None and trace.cpu_ops
    sidecar_file = tmp_path / "rank0.daydream.json"
    assert trace.warnings == [
        f"recording metadata next to the trace not used: {sidecar_file}: malformed recording metadata at {field}:"
        f" {expected}"
    ]
    with pytest.raises(TraceError, match=re.escape(f"malformed recording metadata at {field}: ")):
        read_recording(sidecar_file)


def test_not_a_sidecar_and_not_json(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="not a daydream recording sidecar"):
        as_recording({"format": "something else"}, "x.daydream.json")
    with pytest.raises(TraceError, match="not a daydream recording sidecar"):
        as_recording([1, 2], "x.daydream.json")
    bad = tmp_path / "x.daydream.json"
    bad.write_text("{not json")
    with pytest.raises(TraceError, match="x.daydream.json: cannot read recording metadata"):
        read_recording(bad)


def test_what_the_recorder_writes_reads_back(tmp_path: Path) -> None:
    copy = tmp_path / "rank0.json.gz"
    shutil.copy(EXAMPLE, copy)
    rec = read_recording(EXAMPLE.with_name("mlp_cpu.daydream.json"))
    (tmp_path / "rank0.daydream.json").write_bytes(encode_recording(rec))
    assert load_trace(copy).recording == rec
    text = (tmp_path / "rank0.daydream.json").read_text()
    assert text.startswith('{\n "format": "daydream.recording/1",\n "command": [') and text.endswith("}\n")
