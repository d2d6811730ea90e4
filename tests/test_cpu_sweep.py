"""The CPU sweep compiled with numba (daydream.graph.build.cpu_sweep), over the columns the columnar loader keeps, makes
the
tasks the Python sweep makes (daydream.graph.build.cpu), attribute for attribute, with the same findings beside them,
on every shared trace and a trace of each validation program; and the CPU ops kept as columns are made as events,
the loader's, when something reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from synth import make_trace, write_trace

from daydream.graph.build import build_graph
from daydream.graph.build import cpu as build_cpu
from daydream.graph.build.table import TaskTable
from daydream.trace import load as loader
from daydream.trace.load import load_trace
from daydream.trace.steps import whole_trace

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "daydream" / "examples" / "mlp_cpu.json.gz"


def _shared() -> list[Path]:
    from tests.conftest import SHARED_TRACES

    return sorted(p for p in SHARED_TRACES.rglob("*.json.gz") if "_et" not in p.parent.name and "_et." not in p.name)


def _validation() -> list[Path]:
    """rank0 of the first case of each validation program."""
    seen: dict[str, Path] = {}
    for path in sorted((ROOT / "validation" / "traces").rglob("rank0.json.xz")):
        seen.setdefault("/".join(path.relative_to(ROOT / "validation" / "traces").parts[:2]), path)
    return list(seen.values())


def _sweep(path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[TaskTable, Any, bool]:
    """The CPU tasks of ``path`` read by the columnar loader, swept compiled or in Python; whether compiled ran."""
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", 0)
    monkeypatch.setattr(build_cpu, "COMPILED_MIN_CPU_EVENTS", 0 if compiled else float("inf"))
    ran: list[bool] = []
    compiled_sweep = build_cpu._compiled_sweep

    def spy(*args: Any) -> Any:
        out = compiled_sweep(*args)
        ran.append(out is not None)
        return out

    monkeypatch.setattr(build_cpu, "_compiled_sweep", spy)
    table = TaskTable()
    calls = build_cpu.cpu_tasks(load_trace(path), table)
    return table, calls, any(ran)


def assert_same_sweep(path: Path, monkeypatch: pytest.MonkeyPatch) -> bool:
    """The two sweeps' tasks and findings are the same; returns whether the compiled one ran (an execution trace read
    beside a Kineto trace makes the ops' events: the Python sweep runs)."""
    python, found, _ = _sweep(path, False, monkeypatch)
    compiled, found_compiled, ran = _sweep(path, True, monkeypatch)
    made, expected = (t.attrs_of(list(range(len(t)))) for t in (compiled, python))
    assert made == expected and [list(a) for a in made] == [list(a) for a in expected]  # the keys in the same order
    assert (compiled.ts, compiled.end, compiled.launch_ts) == (python.ts, python.end, python.launch_ts)
    for name in ("corr_task", "bwd_seq", "fwd_seq", "loader_ranges", "long_calls"):
        assert getattr(found_compiled, name) == getattr(found, name), name
        assert list(getattr(found_compiled, name)) == list(getattr(found, name)), name  # in the same order
    encode = msgspec.json.encode
    assert {k: encode(v) for k, v in found_compiled.comm_ev.items()} == {k: encode(v) for k, v in found.comm_ev.items()}
    # one event per collective's op or range, as the Python sweep hands them over
    assert len({id(v) for v in found_compiled.comm_ev.values()}) == len({id(v) for v in found.comm_ev.values()})
    return ran


@pytest.mark.parametrize("path", [pytest.param(EXAMPLE, marks=pytest.mark.slow), *_shared()], ids=lambda p: p.name)
def test_the_compiled_sweep_makes_the_python_sweeps_tasks(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = assert_same_sweep(path, monkeypatch)
    et = loader.find_execution_trace(str(path)) is not None
    assert ran is not et


@pytest.mark.slow
def test_the_compiled_sweep_on_each_validation_program(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _validation()
    if not paths:
        pytest.skip("no validation traces")
    assert all(assert_same_sweep(path, monkeypatch) for path in paths)


def test_cpu_ops_are_made_when_read_as_the_loader_makes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace read by the columnar loader keeps its CPU ops as columns: counted without being made, made (equal to
    the batched decoder's, in the same order) the first time they are read, released without being made."""
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", 0)
    trace = load_trace(EXAMPLE)
    assert "cpu_ops" in trace.pending and trace.family_size("cpu_ops") == trace.pending["cpu_ops"].count > 0
    assert "CPU ops" in repr(trace) and "cpu_ops" in trace.pending  # repr counts them without making them
    made = trace.cpu_ops
    assert "cpu_ops" not in trace.pending and trace.cpu_ops is made
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", float("inf"))
    decoded = load_trace(EXAMPLE)
    assert [msgspec.json.encode(e) for e in made] == [msgspec.json.encode(e) for e in decoded.cpu_ops]
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", 0)
    released = load_trace(EXAMPLE)
    released.release("cpu_ops", "runtime")
    assert not released.pending and released.cpu_ops == [] and released.runtime == []


def test_changed_events_are_swept_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """The columns describe the events as loaded: a trace whose annotations were replaced since (by equal ones, even),
    or whose CPU ops were made (and could have been changed), is swept from its events."""
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", 0)
    monkeypatch.setattr(build_cpu, "COMPILED_MIN_CPU_EVENTS", 0)
    replaced = load_trace(EXAMPLE)
    replaced.annotations[0] = msgspec.structs.replace(replaced.annotations[0])
    assert build_cpu._compiled_sweep(build_cpu._Sweep(TaskTable(), 0, {}), replaced) is None
    changed = load_trace(EXAMPLE)
    assert build_cpu._compiled_sweep(build_cpu._Sweep(TaskTable(), 0, {}), changed) is not None
    for op in changed.cpu_ops:
        if op.name == "aten::linear":
            op.name = "aten::renamed"
    assert build_cpu._compiled_sweep(build_cpu._Sweep(TaskTable(), 0, {}), changed) is None
    table = TaskTable()
    build_cpu.cpu_tasks(changed, table)
    assert "aten::renamed" in set(table.column("op"))


def test_gpu_tasks_are_made_when_read_as_the_loader_makes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU tasks kept as columns: counted, spanned and built from without being made; made when read, equal to
    the batched decoder's and in its order (kernels that start together: the longest first, then as filed), and the
    graph built from the columns is the one built from the events (a collective's args read from its event)."""
    doc = make_trace()
    events = doc["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    # ties in start: a shorter kernel filed first, and two alike filed apart, on other streams
    first = kernels[0]
    events.insert(0, {**first, "dur": first["dur"] / 2, "args": {**first["args"], "stream": 9}})
    events += [
        {**first, "args": {**first["args"], "stream": 8}},
        {
            **first,
            "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            "args": {
                "correlation": 999_999,
                "stream": 7,
                "device": 0,
                "In msg nelems": 1024,
                "Out msg nelems": 1024,
                "Group size": 2,
                "dtype": "Float",
            },
        },
    ]
    gpu_events = sum(e.get("cat") in ("kernel", "gpu_memcpy") for e in events)
    path = write_trace(tmp_path / "t.json", doc)
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", 0)
    trace = load_trace(path)
    assert "gpu" in trace.pending and trace.has_gpu_activity and trace.family_size("gpu") == gpu_events
    assert "GPU tasks" in repr(trace) and whole_trace(trace) and "gpu" in trace.pending  # none made
    graph = build_graph(trace, "all")
    assert "gpu" in trace.pending
    made = trace.gpu
    assert "gpu" not in trace.pending and trace.gpu is made
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", float("inf"))
    decoded = load_trace(path)
    assert [msgspec.json.encode(e) for e in made] == [msgspec.json.encode(e) for e in decoded.gpu]
    assert whole_trace(decoded) == whole_trace(load_trace(path))
    again = build_graph(decoded, "all")
    assert list(graph.nodes(data=True)) == list(again.nodes(data=True))
    assert list(graph.edges(data=True)) == list(again.edges(data=True))
    assert any(a.get("collective") == "allreduce" and a.get("bytes") for _, a in graph.nodes(data=True))
    # a kernel without its correlation id, bound to its launch by the flow alone: the events are made to bind it
    del kernels[1]["args"]["correlation"]
    write_trace(path, doc)
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", 0)
    bound = build_graph(load_trace(path), "all")
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", float("inf"))
    assert list(bound.edges(data=True)) == list(build_graph(load_trace(path), "all").edges(data=True))
    assert len(bound.edges) == len(graph.edges)


@pytest.mark.parametrize(
    "odd",
    [
        {"bytes": 4096.0},  # a copy's size written as a decimal
        {"bytes": 2**70},  # beyond int64
        {"bytes": "4096"},  # not a number: no size
        {"stream": None},  # none: the event's tid stands for the stream
        {"stream": "7"},
        {"device": "0"},  # not an integer: the GPU events are made and read (the events path)
        {"correlation": 2**70},
    ],
    ids=repr,
)
def test_gpu_columns_read_odd_values_as_the_events_do(
    odd: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU tasks read from columns hold what the events would give them, for values of every type a field
    takes: the graph is the one built from the events."""
    doc = make_trace()
    cat = "gpu_memcpy" if "bytes" in odd else "kernel"
    event = next(e for e in doc["traceEvents"] if e.get("cat") == cat)
    if "correlation" in odd:  # the call that launched it too: the two still match (and no flow to bind either)
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") not in ("s", "f")]
        call = next(
            e
            for e in doc["traceEvents"]
            if e.get("cat") == "cuda_runtime" and e["args"]["correlation"] == event["args"]["correlation"]
        )
        call["args"].update(odd)
    event["args"].update(odd)
    path = write_trace(tmp_path / "t.json", doc)
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", 0)
    columnar = build_graph(load_trace(path), "all")
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", float("inf"))
    decoded = build_graph(load_trace(path), "all")
    assert list(columnar.nodes(data=True)) == list(decoded.nodes(data=True))
    assert list(columnar.edges(data=True)) == list(decoded.edges(data=True))


@pytest.mark.parametrize(
    "name",
    [
        "hta/nccl_parser_config_nccl_data.json.gz",
        "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
        "tracelens/mi300_train_resnet18.json.gz",
    ],
)
def test_a_plain_build_never_makes_the_ops_calls_and_kernels_events(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built from a trace the columnar loader read, the graph reads the CPU ops and runtime calls from their columns
    (the sweep, the sync edges, whether stream waits are inferred), and the GPU tasks from theirs: their events are
    never made (but a collective's, whose args are read), and the graph is the one built from the events."""
    from tests.conftest import SHARED_TRACES

    path = SHARED_TRACES / name
    if not path.is_file():
        pytest.skip(f"{path} not found")
    monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", 0)
    monkeypatch.setattr(build_cpu, "COMPILED_MIN_CPU_EVENTS", 0)
    trace = load_trace(path)
    assert set(trace.pending) == {"cpu_ops", "runtime", "gpu"}
    graph = build_graph(trace, "all")
    assert set(trace.pending) == {"cpu_ops", "runtime", "gpu"}, "events made"
    made = load_trace(path)
    made.runtime, made.cpu_ops, made.gpu  # noqa: B018 - read: made now
    assert not made.pending
    again = build_graph(made, "all")
    assert list(graph.nodes(data=True)) == list(again.nodes(data=True))
    assert list(graph.edges(data=True)) == list(again.edges(data=True))
    # as a run builds it: each family released once read (the runtime calls' rows found among the columns all the same)
    released = build_graph(load_trace(path), "all", release_events=True)
    assert list(released.nodes(data=True)) == list(again.nodes(data=True))
    assert list(released.edges(data=True)) == list(again.edges(data=True))
