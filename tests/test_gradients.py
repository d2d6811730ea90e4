"""Gradients and DDP buckets (daydream.graph.gradients) on a hand-built backward pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from whatif_graph import backward

from daydream.dsl import Session
from daydream.errors import DaydreamError
from daydream.graph import build_graph
from daydream.graph.gradients import bucket_ready, ddp_buckets, gradients
from daydream.trace import find_execution_trace, load_trace


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
    s.execute(
        "let b = gradient_buckets()\nprint count(b), b[0][1], b[1][1], b[1][0].name[0]\nprint count(gradient_buckets(first = 4MiB))"
    )
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
    g = build_graph(load_trace(path, et=find_execution_trace(path)), 1, context=False)  # the step the ET covers
    grads = gradients(g)
    # 21 Linear(1024, 1024) layers: a 4 MiB weight and a 4 KiB bias each
    assert len(grads) == 42 and sorted({x.nbytes for x in grads}) == [4096, 4 * 2**20]
    buckets = ddp_buckets(grads)
    assert sum(len(b) for b in buckets) == 42 and len(buckets) == 4
    with pytest.raises(DaydreamError, match="of 62 gradients have no recorded size"):
        gradients(
            build_graph(load_trace(shared_traces / "param" / "resnet_kineto.json.gz"), context=False)
        )  # no shapes, no ET of its own


@pytest.mark.parametrize("script", ["ddp", "scale_out", "p3"])
def test_a_trace_without_gradient_sizes_is_not_applicable(shared_traces: Path, script: str) -> None:
    """Not a script error with a caret in the library's own file (exit 2): the script does not apply (exit 3), and
    says what the trace lacks."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "daydream", "run", str(shared_traces / "param" / "resnet_kineto.json.gz"), script,
                          "-p", "ranks=8"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 3, out.stderr
    assert f"{script} does not apply to this trace" in out.stderr and "no recorded size" in out.stderr


def test_an_execution_trace_that_did_not_give_the_sizes_is_named(shared_traces: Path) -> None:
    """With --et given (or found beside the trace) the message says why that one did not give the sizes, not to give one."""
    import subprocess
    import sys

    param = shared_traces / "param"
    out = subprocess.run([sys.executable, "-m", "daydream", "run", str(param / "resnet_kineto.json.gz"), "ddp", "-p", "ranks=8",
                          "--et", str(param / "resnet_et.json.gz")], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 3, out.stderr
    assert "the execution trace" in out.stderr and "it was not used: its ops do not match the trace's" in out.stderr
    assert "give the execution trace that covers this step (--et)" not in out.stderr
