"""2021-era Kineto traces (PyTorch 1.8-1.10): ranges recorded as `Operator` events, autograd nodes without the
`evaluate_function:` wrapper on the engine's thread."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from synth import BWD, MAIN, PID, make_trace, write_trace

from daydream import build_graph, load_trace
from daydream.graph.context import layer_part, range_phase
from daydream.trace.model import RECORDER_RANGE_PREFIX, is_annotation

MAIN_THREAD, ENGINE_THREAD = f"cpu:{PID}/{MAIN}", f"cpu:{PID}/{BWD}"
STEPS = ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]


def _legacy_path(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "t.json", make_trace("2021", legacy=True))


@pytest.fixture
def legacy_graph(tmp_path: Path) -> nx.DiGraph:
    return build_graph(load_trace(_legacy_path(tmp_path)), step="all")


def _tasks(g: nx.DiGraph, **match: object) -> list[int]:
    return [v for v, a in g.nodes(data=True) if all(a[k] == want for k, want in match.items())]


@pytest.mark.parametrize(
    ("name", "cat", "expected"),
    [
        ("ProfilerStep#7", "Operator", True),
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "Operator", True),
        ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "cpu_op", True),
        ("Optimizer.step#SGD.step", "Operator", True),
        ("Optimizer.zero_grad#SGD.zero_grad", "Operator", True),
        ("## forward ##", "Operator", True),
        ("nn.Module: Linear_0", "Operator", True),
        (RECORDER_RANGE_PREFIX + "net.fc1", "cpu_op", True),
        ("my_region", "user_annotation", True),
        ("aten::addmm", "Operator", False),
        ("aten::addmm", "cpu_op", False),
        ("AddmmBackward", "Operator", False),
        ("ProfilerStep#7", "Kernel", False),  # only ops are refiled: a GPU event named so stays what it is
    ],
)
def test_is_annotation(name: str, cat: str, expected: bool) -> None:
    assert is_annotation(name, cat) is expected


def test_loader_files_operator_ranges_as_annotations(tmp_path: Path) -> None:
    tr = load_trace(_legacy_path(tmp_path))
    assert [s.name for s in tr.step_annotations()] == STEPS
    ranges = {e.name for e in tr.annotations}
    assert {"Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad"} <= ranges
    assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in ranges
    assert all(e.cat == "user_annotation" for e in tr.annotations if e.name != "nn.Module: Linear_0")
    assert not [e.name for e in tr.cpu_ops if is_annotation(e.name, e.cat)]
    assert {"aten::stack", "aten::zero_", "AddmmBackward", "torch::autograd::AccumulateGrad"} <= {
        e.name for e in tr.cpu_ops
    }


def test_recorder_module_ranges_still_set_the_layer(tmp_path: Path) -> None:
    doc = make_trace()
    for ev in doc["traceEvents"]:
        if ev.get("name") == "nn.Module: Linear_0":
            ev.update(cat="cpu_op", name=RECORDER_RANGE_PREFIX + "net.fc1")
    tr = load_trace(write_trace(tmp_path / "t.json", doc))
    assert [e.cat for e in tr.annotations if e.name.startswith(RECORDER_RANGE_PREFIX)] == ["user_annotation"] * 3
    g = build_graph(tr, step="all")
    assert {a["layer"] for v, a in g.nodes(data=True) if a["op"] == "aten::addmm"} == {"net.fc1"}


def test_steps_are_the_profiler_steps(legacy_graph: nx.DiGraph) -> None:
    assert [s.name for s in legacy_graph.graph["steps"]] == STEPS


def test_dataloader_range_is_one_task_per_step(legacy_graph: nx.DiGraph) -> None:
    loads = _tasks(legacy_graph, kind="dataloader")
    assert len(loads) == 3
    for v in loads:
        a = legacy_graph.nodes[v]
        assert a["phase"] == "dataloader" and a["thread"] == MAIN_THREAD
        assert a["name"] == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    assert not [v for v, a in legacy_graph.nodes(data=True) if a["op"] == "aten::stack"]  # folded into the load


def test_optimizer_ranges_set_the_optimizer_phase(legacy_graph: nx.DiGraph) -> None:
    opt = _tasks(legacy_graph, phase="optimizer")
    regions = {(legacy_graph.nodes[v]["kind"], legacy_graph.nodes[v]["region"]) for v in opt}
    assert regions == {
        ("cpu", "Optimizer.step#SGD.step"),
        ("gpu", "Optimizer.step#SGD.step"),
        ("cpu", "Optimizer.zero_grad#SGD.zero_grad"),
    }
    assert len(opt) == 9
    kernels = [v for v in opt if legacy_graph.nodes[v]["kind"] == "gpu"]
    assert {legacy_graph.nodes[v]["name"] for v in kernels} == {"void at::native::multi_tensor_apply_kernel<sgd>"}


def test_autograd_nodes_set_the_backward_phase(legacy_graph: nx.DiGraph) -> None:
    engine = _tasks(legacy_graph, thread=ENGINE_THREAD)
    assert len(engine) == 6  # per step: AddmmBackward's launch, AccumulateGrad's launch
    assert {legacy_graph.nodes[v]["phase"] for v in engine} == {"backward"}
    assert {legacy_graph.nodes[v]["region"] for v in engine} == {"AddmmBackward", "torch::autograd::AccumulateGrad"}
    assert {legacy_graph.nodes[v]["kind"] for v in engine} == {"cpu"}
    launched = [w for v in engine for w in legacy_graph.successors(v) if legacy_graph.edges[v, w]["kind"] == "launch"]
    assert len(launched) == 6
    assert {legacy_graph.nodes[w]["phase"] for w in launched} == {"backward"}
    assert {legacy_graph.nodes[w]["name"] for w in launched} == {
        "volta_sgemm_64x64_nt",
        "void at::native::vectorized_elementwise_kernel<add>",
    }
    # a backward node takes the layer of the forward op with its sequence number
    assert {legacy_graph.nodes[v]["layer"] for v in engine if legacy_graph.nodes[v]["region"] == "AddmmBackward"} == {
        "Linear_0"
    }
    # nothing else is backward: the forward's tasks and kernels keep their phase
    assert len(_tasks(legacy_graph, phase="backward")) == 12
    assert {legacy_graph.nodes[v]["phase"] for v in _tasks(legacy_graph, name="volta_sgemm_128x64_nn")} == {"forward"}


@pytest.mark.parametrize(
    "name",
    ["AddmmBackward", "MulBackward0", "CudnnConvolutionBackward", "torch::autograd::AccumulateGrad", "AccumulateGrad"],
)
@pytest.mark.parametrize("cat", ["Operator", "cpu_op"])
def test_autograd_node_names_declare_backward(name: str, cat: str) -> None:
    assert range_phase(name, cat) == "backward"


@pytest.mark.parametrize(
    "name", ["aten::convolution_backward", "aten::mm", "Optimizer.step#SGD.step", "ProfilerStep#1"]
)
def test_ops_declare_no_other_phase(name: str) -> None:
    # an op declares no phase but the backward's; ranges refiled as annotations do (the loader passes them so)
    assert range_phase(name, "Operator") is None
    assert layer_part(name, "Operator").part is None


def test_backward_call_and_return_are_sync_edges(legacy_graph: nx.DiGraph) -> None:
    g = legacy_graph
    for step in STEPS:
        engine = sorted(_tasks(g, thread=ENGINE_THREAD, step=step), key=lambda v: g.nodes[v]["start"])
        assert len(engine) >= 2 and {g.nodes[v]["phase"] for v in engine} == {"backward"}
        first, last = engine[0], engine[-1]
        # the main thread's loss.backward() woke the engine thread
        callers = [u for u, _, d in g.in_edges(first, data=True) if d["kind"] == "sync"]
        assert [g.nodes[u]["thread"] for u in callers] == [MAIN_THREAD]
        # and returned when the engine's last backward task ended: the main thread's next task waits for it
        main = sorted(_tasks(g, thread=MAIN_THREAD, step=step), key=lambda v: g.nodes[v]["start"])
        after = next(v for v in main if g.nodes[v]["start"] >= g.nodes[last]["start"] + g.nodes[last]["duration"])
        assert g.nodes[after]["phase"] == "optimizer"
        assert (last, "sync") in [(u, d["kind"]) for u, _, d in g.in_edges(after, data=True)]
