"""Launch calls that waited for room in CUDA's launch queue (graph.build.edges.queue_waits): measured on an H200,
the batch-32 transformer of the validation corpus is GPU-bound, its CPU runs ahead until the queue fills, and some
40 cudaLaunchKernel calls a step then return only when a queued kernel ends, each taking 1-1.4 ms."""

from __future__ import annotations

from pathlib import Path

import pytest

from daydream import build_graph, load_trace
from daydream.api.replay import replay_graph
from daydream.api.whatif import run_whatif

TRACES = Path(__file__).resolve().parent.parent / "validation" / "traces" / "gpu" / "transformer"


def _queue_waits(graph) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    """The launch calls that wait for a GPU task."""
    return [
        (u, v)
        for u, v, kind in graph.edges(data="kind")
        if kind == "sync" and graph.nodes[u]["kind"] == "gpu" and "Launch" in graph.nodes[v]["name"]
    ]


def _steps(trace: Path) -> tuple[dict, dict]:
    graph = build_graph(load_trace(str(trace)), "all")
    result = run_whatif(graph, ["batch_size"], {"factor": 0.5}, on_print=lambda _line: None)
    return graph, result.timeline.step_periods()


def test_a_launch_that_waited_for_the_queue_waits_for_the_kernel_that_freed_a_slot() -> None:
    graph = build_graph(load_trace(str(TRACES / "batch32" / "run1" / "rank0.json.xz")), "all")
    waited = _queue_waits(graph)
    assert len(waited) >= 60  # ~40 a step in the later two; the first waits on kernels issued before the recording
    for _u, v in waited:
        assert graph.nodes[v]["duration"] < 50.0  # the call keeps its own cost after the wait
    # replay stays exact (the first step, as before: work issued before the recording held it back, 0.06%)
    for step in replay_graph(graph).report.steps[1:]:
        assert step.baseline_us == step.measured_us
    # the blocked calls of a later step are waits now, not a slow host: no warning about them; the first step's
    # waits on work issued before the recording began are
    load = lambda: load_trace(str(TRACES / "batch32" / "run1" / "rank0.json.xz"))  # noqa: E731
    assert not build_graph(load(), 4).graph["warnings"]
    assert "runtime calls of the step took" in build_graph(load(), 3).graph["warnings"][0]


def test_a_faster_gpu_lets_the_launches_go_sooner() -> None:
    # half the batch: the measured batch-16 steps took 35.7 ms (validation/cases.toml); with the waits kept as CPU
    # time the later steps were predicted at 64-68 ms
    _, periods = _steps(TRACES / "batch32" / "run2" / "rank0.json.xz")
    for step in ("ProfilerStep#4", "ProfilerStep#5"):
        assert periods[step] == pytest.approx(35_700, rel=0.03)


def test_a_trace_whose_queue_never_filled_has_no_such_waits() -> None:
    graph = build_graph(load_trace(str(TRACES / "fused" / "run1" / "rank0.json.xz")), "all")
    assert not _queue_waits(graph)
