"""Trace loading: both schemas, gzip, and a clear one-line error for every kind of bad input."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from synth import make_trace, write_trace

from daydream import TraceError, build_graph, load_trace
from daydream.api.replay import edges_by_kind


def test_current_schema_gzip(tmp_path: Path) -> None:
    tr = load_trace(write_trace(tmp_path / "t.json.gz", make_trace(), gz=True))
    assert len(tr.gpu) == 15 and len(tr.runtime) == 18 and len(tr.syncs) == 3
    assert tr.device_name == "NVIDIA H100 80GB HBM3"
    assert [s.name for s in tr.step_annotations()] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]


def test_2021_schema(tmp_path: Path) -> None:
    tr = load_trace(write_trace(tmp_path / "t.json", make_trace("2021")))
    assert len(tr.cpu_ops) == 15 and len(tr.runtime) == 18 and len(tr.gpu) == 15
    assert tr.cpu_ops[1].args.input_dims_2021 == [[8], [4, 8], [8, 8]]


def test_bare_event_list(tmp_path: Path) -> None:
    tr = load_trace(write_trace(tmp_path / "t.json", make_trace()["traceEvents"]))
    assert len(tr.gpu) == 15


@pytest.mark.parametrize("schema", ["current", "2021"])
def test_launch_flows_bind_calls_and_kernels_without_correlation_ids(tmp_path: Path, schema: str) -> None:
    """An exporter that records only the flow ('s' on the call, 'f' on the kernel) and no ``correlation`` argument:
    each call and its kernel take the flow's id, and the graph launches each kernel from its call."""
    doc = make_trace(schema)
    with_ids = build_graph(load_trace(write_trace(tmp_path / "ids.json", doc)), "all")
    for ev in doc["traceEvents"]:
        ev.get("args", {}).pop("correlation", None)
    # a flow of another kind, and one without an integer id, bind nothing
    doc["traceEvents"] += [
        {"ph": "s", "cat": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": 1030.0},
        {"ph": "f", "cat": "ac2g", "id": "x", "pid": 0, "tid": 7, "ts": 1045.0},
    ]
    tr = load_trace(write_trace(tmp_path / "flows.json", doc))
    kernels = [e for e in tr.gpu if e.args is not None]
    assert kernels and all(isinstance(e.args.correlation, int) for e in kernels)
    calls = {e.args.correlation for e in tr.runtime if e.args is not None and e.args.correlation is not None}
    assert {e.args.correlation for e in kernels} <= calls
    graph = build_graph(tr, "all")
    assert edges_by_kind(graph)["launch"] == edges_by_kind(with_ids)["launch"] == len(kernels)


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.json", b"", "empty file"),
        ("blank.json", b"  \n", "empty file"),
        ("text.json", b"hello", "not JSON"),
        ("broken.json", b'{"traceEvents": [', "not valid JSON"),
        ("noevents.json", b'{"foo": 1}', "has no 'traceEvents'"),
        (
            "badtype.json",
            b'{"traceEvents": [{"ph": "X", "name": "k", "ts": "soon", "dur": 1}]}',
            r"traceEvents\[0\]\.ts",
        ),
        ("badevents.json", b'{"traceEvents": 3}', "malformed trace"),
        ("nothing.json", b'{"traceEvents": [{"ph": "M", "name": "process_name"}]}', "no profiler events"),
    ],
)
def test_bad_input_gets_a_clear_error(tmp_path: Path, name: str, data: bytes, message: str) -> None:
    path = _write(tmp_path, name, data)
    with pytest.raises(TraceError, match=message) as info:
        load_trace(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_truncated_gzip(tmp_path: Path) -> None:
    data = gzip.compress(json.dumps(make_trace()).encode())
    path = _write(tmp_path, "cut.json.gz", data[: len(data) // 2])
    with pytest.raises(TraceError, match="truncated gzip"):
        load_trace(path)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "absent.json")
    with pytest.raises(TraceError, match="is a directory"):
        load_trace(tmp_path)


def test_a_missing_trace_names_what_its_folder_holds(tmp_path: Path) -> None:
    write_trace(tmp_path / "model_trace.json.gz", make_trace(), gz=True)
    with pytest.raises(TraceError, match=r"model_trace\.json: no such file; did you mean 'model_trace\.json\.gz'\?$"):
        load_trace(tmp_path / "model_trace.json")
    job = tmp_path / "job"
    job.mkdir()
    for r in range(4):
        write_trace(job / f"rank{r}.json", make_trace())
    said = f"{job} holds the traces of ranks 0-3 (rank0.json ... rank3.json): give the folder to simulate the job"
    with pytest.raises(TraceError, match=re.escape(f"rnk2.json: no such file; did you mean 'rank2.json'?; {said}")):
        load_trace(job / "rnk2.json")  # the file of the rank its name says
    with pytest.raises(TraceError, match=re.escape(f"rank9.json: no such file; {said}")):
        load_trace(job / "rank9.json")  # a rank the job lacks: no file is "close" to it


def test_input_is_not_modified(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", make_trace())
    before = path.read_bytes()
    from daydream import build_graph, simulate

    simulate(build_graph(load_trace(path)))
    assert path.read_bytes() == before


def test_events_are_ordered_by_start_then_longest_first_ties_as_given(tmp_path: Path) -> None:
    # what the graph builder's sweep relies on: a range that starts with an op it encloses comes before it
    ops = [
        {"ph": "X", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 10, "dur": 20},
        {"ph": "X", "cat": "cpu_op", "name": "first", "pid": 1, "tid": 1, "ts": 2, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "twin_a", "pid": 1, "tid": 1, "ts": 40, "dur": 3},
        {"ph": "X", "cat": "cpu_op", "name": "twin_b", "pid": 1, "tid": 1, "ts": 40, "dur": 3},
    ]
    path = tmp_path / "order.json"
    path.write_text(json.dumps({"traceEvents": ops}))
    assert [e.name for e in load_trace(path).cpu_ops] == ["first", "outer", "inner", "twin_a", "twin_b"]
