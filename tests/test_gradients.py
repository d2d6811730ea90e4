"""Gradients and DDP buckets (daydream.graph.gradients) on a hand-built backward pass."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from daydream.dsl import Session
from daydream.errors import DaydreamError
from daydream.graph import add_dependency, add_task, build_graph
from daydream.graph.gradients import bucket_ready, ddp_buckets, gradients
from daydream.trace import find_execution_trace, load_trace

CPU, GPU = "cpu:1/2", "gpu:0/7"
ACC = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"


def backward() -> tuple[nx.DiGraph, dict[str, int]]:
    """Autograd thread: a weight-grad GEMM launch, its AccumulateGrad (launching an add: 512x1024 fp32 = 2 MiB),
    another GEMM, an AccumulateGrad that launches nothing (1024 = 4 KiB), a third of 3x256x256 (768 KiB)."""
    g = nx.DiGraph()
    g.graph.update(delays={"launch_latency_us": 2.0, "stream_gap_us": 0.0})
    ids: dict[str, int] = {}
    prev = None

    def cpu(name: str, start: float, **attrs: object) -> int:
        nonlocal prev
        v = add_task(g, name, "cpu", CPU, 10, start=start, step="s", phase="backward", **attrs)
        if prev is not None:
            add_dependency(g, prev, v, "thread")
        prev = v
        return v

    def kernel(name: str, call: int, start: float) -> int:
        k = add_task(g, name, "gpu", GPU, 50, start=start, step="s", phase="backward", **{"class": "gemm"})
        add_dependency(g, call, k, "launch", lag=2)
        return k

    ids["L1"] = cpu("cudaLaunchKernel", 0, op="aten::mm", top_op="MmBackward0", top_op_id=1)
    ids["K1"] = kernel("gemm_wgrad_1", ids["L1"], 12)
    ids["A1"] = cpu("cudaLaunchKernel", 10, op="aten::add_", top_op=ACC, top_op_id=2, shapes=[[512, 1024], [512, 1024], []])
    ids["KA1"] = kernel("add_kernel", ids["A1"], 62)
    ids["L2"] = cpu("cudaLaunchKernel", 20, op="aten::mm", top_op="MmBackward0", top_op_id=3)
    ids["K2"] = kernel("gemm_wgrad_2", ids["L2"], 112)
    ids["A2"] = cpu(ACC, 30, op=ACC, top_op=None, top_op_id=4, shapes=[[1024]])
    ids["A3"] = cpu(ACC, 40, op=ACC, top_op=None, top_op_id=5, shapes=[[3, 256, 256]])
    for a, b in [("K1", "KA1"), ("KA1", "K2")]:
        add_dependency(g, ids[a], ids[b], "stream")
    return g, ids


def test_gradients_sizes_and_ready_tasks() -> None:
    g, ids = backward()
    grads = gradients(g)
    assert [(x.nbytes, x.ready) for x in grads] == [(2 * 2**20, ids["KA1"]), (4096, ids["K2"]), (786432, ids["K2"])]
    assert [x.nbytes for x in gradients(g, element_bytes=2)] == [2**20, 2048, 393216]


def test_ddp_buckets_close_at_their_limits() -> None:
    g, ids = backward()
    grads = gradients(g)
    # the first bucket closes at >= 1 MiB (the 2 MiB gradient alone), the next at >= 25 MiB: never, so it holds the rest
    buckets = ddp_buckets(grads)
    assert [[x.nbytes for x in b] for b in buckets] == [[2 * 2**20], [4096, 786432]]
    assert [bucket_ready(g, b) for b in buckets] == [ids["KA1"], ids["K2"]]
    assert [[x.nbytes for x in b] for b in ddp_buckets(grads, cap=4096, first_cap=2 * 2**20 + 1)] == [[2 * 2**20, 4096], [786432]]
    with pytest.raises(DaydreamError, match="bucket sizes must be > 0"):
        ddp_buckets(grads, cap=0)


def test_gradient_buckets_from_a_script() -> None:
    g, ids = backward()
    s = Session(g)
    s.execute("let b = gradient_buckets()\nprint count(b), b[0][1], b[1][1], b[1][0].name[0]\nprint count(gradient_buckets(first = 4MiB))")
    assert s.printed == ["2 2097152 790528 gemm_wgrad_2", "1"]


def test_missing_sizes_and_missing_gradients_are_clear_errors() -> None:
    g, ids = backward()
    g.nodes[ids["A2"]]["shapes"] = None
    with pytest.raises(DaydreamError, match=r"^1 of 3 gradients have no recorded size: record the trace with shapes"):
        gradients(g)
    g.remove_nodes_from([ids["A1"], ids["KA1"], ids["A2"], ids["A3"]])
    with pytest.raises(DaydreamError, match="the graph has no gradients"):
        gradients(g)


def test_gradients_of_a_real_trace_with_its_execution_trace(shared_traces: Path) -> None:
    path = shared_traces / "param" / "linear_kineto.json.gz"
    g = build_graph(load_trace(path, et=find_execution_trace(path)), 1)  # the step the execution trace covers
    grads = gradients(g)
    # 21 Linear(1024, 1024) layers: a 4 MiB weight and a 4 KiB bias each
    assert len(grads) == 42 and sorted({x.nbytes for x in grads}) == [4096, 4 * 2**20]
    buckets = ddp_buckets(grads)
    assert sum(len(b) for b in buckets) == 42 and len(buckets) == 4
    with pytest.raises(DaydreamError, match="of 62 gradients have no recorded size"):
        gradients(build_graph(load_trace(shared_traces / "param" / "resnet_kineto.json.gz")))  # no shapes, no ET of its own
