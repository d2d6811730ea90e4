"""The library on CPU recordings, where the optimization exists on the CPU too (the bundled example: examples/mlp.py
recorded on a CPU with the recorder's module ranges)."""

from __future__ import annotations

from pathlib import Path

import pytest

from daydream import build_graph, load_trace
from daydream.whatif import run_whatif

EXAMPLE = Path(__file__).resolve().parents[1] / "daydream" / "examples" / "mlp_cpu.json.gz"


@pytest.fixture(scope="module")
def graph():  # type: ignore[no-untyped-def]
    return build_graph(load_trace(EXAMPLE))


def test_a_host_half_as_fast_doubles_a_cpu_step(graph) -> None:  # type: ignore[no-untyped-def]
    result = run_whatif(graph, ["device"], {"cpu_speedup": 0.5})
    assert result.predicted.makespan_us == pytest.approx(2 * result.baseline.makespan_us)
    assert run_whatif(graph, ["device"], {"cpu_speedup": 1}).predicted.makespan_us == result.baseline.makespan_us


def test_checkpointing_reruns_the_forward_ops_on_a_cpu_recording(graph) -> None:  # type: ignore[no-untyped-def]
    forward = [a for _, a in graph.nodes(data=True)
               if a["phase"] == "forward" and a["kind"] == "cpu" and a["op"] is not None and a["layer"] is not None]  # fmt: skip
    rerun = sum(a["duration"] + a["gap"] for a in forward)
    assert forward and rerun > 0
    result = run_whatif(graph, ["activation_checkpointing"])
    added = [a for _, a in result.graph.nodes(data=True) if a.get("recomputed")]
    assert len(added) == len(forward)
    assert all(a["thread"] != forward[0]["thread"] or a["phase"] == "backward" for a in added)
    # the step is one CPU thread's work: it grows by exactly the re-run ops and their framework time
    assert result.predicted.makespan_us - result.baseline.makespan_us == pytest.approx(rerun, rel=1e-6)
