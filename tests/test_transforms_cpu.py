"""The library on CPU recordings, where the optimization exists on the CPU too (the bundled example: examples/mlp.py
recorded on a CPU with the recorder's module ranges)."""

from __future__ import annotations

from pathlib import Path

import pytest

from daydream import build_graph, load_trace
from daydream.api.whatif import run_whatif
from daydream.errors import DaydreamError

EXAMPLE = Path(__file__).resolve().parents[1] / "daydream" / "examples" / "mlp_cpu.json.gz"


@pytest.fixture(scope="module")
def graph():  # type: ignore[no-untyped-def]
    return build_graph(load_trace(EXAMPLE), context=False)


def test_a_host_half_as_fast_doubles_a_cpu_step(graph) -> None:  # type: ignore[no-untyped-def]
    result = run_whatif(graph, ["device"], {"cpu_speedup": 0.5})
    assert result.predicted.period_us == pytest.approx(2 * result.baseline.period_us)
    assert run_whatif(graph, ["device"], {"cpu_speedup": 1}).predicted.period_us == result.baseline.period_us


def test_checkpointing_reruns_the_forward_ops_on_a_cpu_recording(graph) -> None:  # type: ignore[no-untyped-def]
    forward = [
        a
        for _, a in graph.nodes(data=True)
        if a["phase"] == "forward" and a["kind"] == "cpu" and a["op"] is not None and a["layer"] is not None
    ]
    rerun = sum(a["duration"] + a["gap"] for a in forward)
    assert forward and rerun > 0
    result = run_whatif(graph, ["activation_checkpointing"], {"segment_cpu": 0, "op_cpu": 0})
    added = [a for _, a in result.graph.nodes(data=True) if a.get("recomputed")]
    assert len(added) == len(forward)
    assert all(a["thread"] != forward[0]["thread"] or a["phase"] == "backward" for a in added)
    # the step is one CPU thread's work: it grows by exactly the re-run ops and their framework time
    assert result.predicted.period_us - result.baseline.period_us == pytest.approx(rerun, rel=1e-6)


def test_checkpointing_costs_its_machinery_per_checkpoint_call(graph) -> None:  # type: ignore[no-untyped-def]
    bare = run_whatif(graph, ["activation_checkpointing"], {"segment_cpu": 0, "op_cpu": 0}).predicted.period_us
    layers = {
        a["layer"] for _, a in graph.nodes(data=True) if a["phase"] == "forward" and a["kind"] == "cpu" and a["layer"]
    }
    # one call per checkpointed layer by default; `segments` calls per step when the program wraps several layers
    per_layer = run_whatif(graph, ["activation_checkpointing"], {"segment_cpu": 100, "op_cpu": 0})
    assert per_layer.predicted.period_us - bare == pytest.approx(100 * len(layers))
    fewer = run_whatif(graph, ["activation_checkpointing"], {"segment_cpu": 100, "op_cpu": 0, "segments": 3})
    assert fewer.predicted.period_us - bare == pytest.approx(300)
    machinery = [a for _, a in fewer.graph.nodes(data=True) if a.get("checkpoint_machinery")]
    assert len(machinery) == len(layers) and all(a["phase"] == "backward" for a in machinery)
    # and per op each checkpointed layer re-runs (its saved-tensor hooks): a layer of many ops costs more
    ops = [
        a
        for _, a in graph.nodes(data=True)
        if a["phase"] == "forward" and a["kind"] == "cpu" and a["op"] and a["layer"]
    ]
    per_op = run_whatif(graph, ["activation_checkpointing"], {"segment_cpu": 0, "op_cpu": 40})
    assert per_op.predicted.period_us - bare == pytest.approx(40 * len(ops))
    costs = {
        a["checkpoint_machinery"]: a["duration"]
        for _, a in per_op.graph.nodes(data=True)
        if a.get("checkpoint_machinery")
    }
    assert costs == {layer: 40 * sum(a["layer"] == layer for a in ops) for layer in layers}


def test_checkpointing_recomputes_in_every_step_of_a_multi_step_graph() -> None:
    """Each step's backward pass recomputes that step's own forward: a graph of four steps gets four re-runs."""
    trace = Path(__file__).resolve().parents[1] / "validation" / "traces" / "base" / "run1" / "rank0.json.xz"
    graph = build_graph(load_trace(trace), "all")
    result = run_whatif(graph, ["activation_checkpointing"], {"layers": "^MLP\\.body\\."})
    added = [a for _, a in result.graph.nodes(data=True) if a.get("recomputed")]
    per_step: dict[str, int] = {}
    for a in added:
        per_step[a["step"]] = per_step.get(a["step"], 0) + 1
    assert len(per_step) == 4 and set(per_step.values()) == {len(added) // 4}
    after = list(result.timeline.step_periods().values())
    before = list(result.baseline_timeline.step_periods().values())
    assert len(after) == 4 and all(a > b + 1000 for a, b in zip(after, before))  # every step pays its re-run


def test_checkpointing_a_recording_without_layer_names() -> None:
    """torch.profiler alone records no module ranges: with the default `layers` the segments are the blocks the
    forward pass repeats (the ConvNet's three conv blocks, each with the pooling after it), re-run before the first
    backward op; the data, the classifier and the loss are not re-run. With other `layers` nothing matches, and the
    script says why."""
    trace = (
        Path(__file__).resolve().parents[1] / "validation" / "traces" / "convnet" / "base" / "run1" / "rank0.json.xz"
    )
    graph = build_graph(load_trace(trace), context=False)
    forward = [
        a for _, a in graph.nodes(data=True) if a["phase"] == "forward" and a["kind"] == "cpu" and a["op"] is not None
    ]
    assert forward and all(a["layer"] is None for _, a in graph.nodes(data=True))
    result = run_whatif(graph, ["activation_checkpointing"], {"segment_cpu": 0, "op_cpu": 0})
    block = ["aten::conv2d", "aten::add_", "aten::batch_norm", "aten::relu_"] * 2 + ["aten::max_pool2d"]
    rerun = [
        a for a in sorted(forward, key=lambda a: a["start"]) if a["name"] in block[1:] or a["name"] == "aten::conv2d"
    ]
    assert [a["name"] for a in rerun] == block * 3
    assert sorted(a["name"] for _, a in result.graph.nodes(data=True) if a.get("recomputed")) == sorted(block * 3)
    expected = sum(a["duration"] + a["gap"] for a in rerun)
    assert result.predicted.period_us - result.baseline.period_us == pytest.approx(expected, rel=1e-6)
    # a share of the forward time the blocks do not reach: the whole forward pass, one segment
    whole = run_whatif(graph, ["activation_checkpointing"], {"segment_cpu": 0, "op_cpu": 0, "repeat_share": 0.99})
    everything = sum(a["duration"] + a["gap"] for a in forward)
    assert (
        whole.predicted.period_us - whole.baseline.period_us == pytest.approx(everything, rel=1e-6)
        and everything > expected
    )
    # one checkpoint call per block: `segments` of them over the three blocks, as many as without it
    calls = run_whatif(graph, ["activation_checkpointing"], {"segment_cpu": 100, "op_cpu": 0, "segments": 3})
    assert calls.predicted.period_us - result.predicted.period_us == pytest.approx(300.0, rel=1e-6)
    six = run_whatif(graph, ["activation_checkpointing"], {"segment_cpu": 100, "op_cpu": 0, "segments": 6})
    assert six.predicted.period_us - result.predicted.period_us == pytest.approx(600.0, rel=1e-6)
    with pytest.raises(DaydreamError, match="no forward ops with layer names"):
        run_whatif(graph, ["activation_checkpointing"], {"layers": "^blocks"})
