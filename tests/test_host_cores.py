"""The host CPU as a resource: which ops run across PyTorch's intra-op threads (trace/intra_op.py), the threaded
time the graph keeps per task (`parallel_us`), the `threads` transform, and DataLoader workers sharing the cores
with training (`dataloader -p workers=N`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from daydream import build_graph, load_trace
from daydream.api.whatif import run_whatif
from daydream.errors import DaydreamError
from daydream.perf.cpu.host import (
    OBSERVED_EFFICIENCY,
    UNMEASURED_EFFICIENCY,
    parallel_time_factor,
    recorded_host,
    recorded_thread_speedup,
    thread_speedup,
)
from daydream.trace.intra_op import GRAIN_SIZE, runs_across_threads

VALIDATION = Path(__file__).resolve().parents[1] / "validation" / "traces"


def _event(name: str, ts: float, dur: float, dims: Any = None, cat: str = "cpu_op") -> dict[str, Any]:
    args = {} if dims is None else {"Input Dims": dims}
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def test_which_ops_run_across_the_intra_op_threads() -> None:
    assert runs_across_threads("aten::mm", [[4, 4], [4, 4]])  # the BLAS library threads every call
    assert runs_across_threads("aten::addmm", None)
    assert not runs_across_threads("aten::relu", [[128, 256]])  # 32768 elements: at the grain size, one thread
    assert runs_across_threads("aten::relu", [[256, 256]])
    assert runs_across_threads("aten::add_", [[256, 256], [256, 256], []])
    assert not runs_across_threads("aten::add_", [[256], [], []])
    assert not runs_across_threads("aten::t", [[4096, 4096]])  # a view: dispatch only
    assert not runs_across_threads("aten::linear", [[512, 512], [512, 512], [512]])  # composite: its addmm counts
    assert not runs_across_threads("AddmmBackward0", [[512, 512]])  # an autograd node, not an ATen kernel
    assert not runs_across_threads("aten::sqrt", None)  # recorded without shapes: the element count is unknown
    assert not runs_across_threads("aten::sqrt", [["not", "dims"]])
    # oneDNN's LSTM layers (nn.LSTM on the CPU), forward and backward: 1.8-1.9x slower on one thread, measured
    assert runs_across_threads("aten::mkldnn_rnn_layer", None) and runs_across_threads(
        "aten::mkldnn_rnn_layer_backward", None
    )
    # the default CPU generator fills a tensor on one thread (dropout's bernoulli_: 0.92x on one thread, measured);
    # a reduction such as `all` is a TensorIterator kernel (1.74x)
    assert not runs_across_threads("aten::bernoulli_", [[16, 96, 768], [], []])
    assert runs_across_threads("aten::all", [[16, 96, 192]])
    assert GRAIN_SIZE == 32768


def _linear_trace(tmp_path: Path, sidecar: dict[str, Any] | None) -> Path:
    """One step of `aten::linear` (100 us: t 10 us holding as_strided 4 us, addmm 80 us holding expand 5 us) then a
    relu below the grain size (30 us) and one above it (50 us), each op 10 us apart."""
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 220,
            "args": {},
        },
        _event("aten::linear", 0, 100, [[128, 256], [256, 256], [256]]),
        _event("aten::t", 2, 10, [[256, 256]]),
        _event("aten::as_strided", 4, 4, [[256, 256], [], [], []]),
        _event("aten::addmm", 15, 80, [[256], [128, 256], [256, 256], [], []]),
        _event("aten::expand", 16, 5, [[256], [], []]),
        _event("aten::relu", 110, 30, [[128, 256]]),
        _event("aten::relu", 150, 50, [[256, 256]]),
    ]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    if sidecar is not None:
        (tmp_path / "rank0.daydream.json").write_text(json.dumps({"format": "daydream.recording/1", **sidecar}))
    return path


def test_the_graph_keeps_each_ops_threaded_time(tmp_path: Path) -> None:
    graph = build_graph(load_trace(_linear_trace(tmp_path, None)))
    by_name = {a["name"]: a for _, a in graph.nodes(data=True)}
    assert by_name["aten::linear"]["parallel_us"] == pytest.approx(
        75.0
    )  # addmm's own time, not t's, expand's, linear's
    relus = sorted(a["parallel_us"] for _, a in graph.nodes(data=True) if a["name"] == "aten::relu")
    assert relus == pytest.approx([0.0, 50.0])


def test_fewer_threads_stretch_only_the_threaded_work(tmp_path: Path) -> None:
    graph = build_graph(load_trace(_linear_trace(tmp_path, {"host": {"threads": 4, "cores": 4}})))
    assert recorded_host(graph.graph["recording"]) == (4, 4)
    base = run_whatif(graph, ["threads"], {"threads": 4}).predicted.period_us
    # 4 -> 1 thread: the 125 us of threaded work takes 1.8 x 1.8 = 3.24x (no measured speedup: 0.9 per doubling),
    # the other 95 us stays
    one = run_whatif(graph, ["threads"], {"threads": 1}).predicted.period_us
    assert one - base == pytest.approx(125.0 * (1.8**2 - 1))
    # more threads than cores gain nothing past the cores; another host's cores are a parameter
    assert run_whatif(graph, ["threads"], {"threads": 8}).predicted.period_us == pytest.approx(base)
    eight = run_whatif(graph, ["threads"], {"threads": 8, "cores": 8}).predicted.period_us
    assert base - eight == pytest.approx(125.0 * (1 - 1 / 1.8))


def test_threads_need_the_recorded_thread_count(tmp_path: Path) -> None:
    graph = build_graph(load_trace(_linear_trace(tmp_path, None)))
    with pytest.raises(DaydreamError, match="does not say how many intra-op threads"):
        run_whatif(graph, ["threads"], {"threads": 1})
    given = run_whatif(graph, ["threads"], {"threads": 1, "recorded": 2})
    assert given.predicted.period_us - given.baseline.period_us == pytest.approx(125.0 * 0.8)


def test_the_thread_model() -> None:
    # nothing measured: each doubling of the threads 1.8x faster (UNMEASURED_EFFICIENCY 0.9), not 2x
    assert UNMEASURED_EFFICIENCY == 0.9
    assert parallel_time_factor(1, 2) == pytest.approx(1.8)
    assert parallel_time_factor(4, 2) == 1.0  # cores unknown: one per recorded thread
    assert parallel_time_factor(4, 2, cores=4) == pytest.approx(1 / 1.8)
    assert parallel_time_factor(2, 8, cores=4) == pytest.approx(1.8)  # the recording had more threads than cores
    assert thread_speedup(3, 4) == pytest.approx(3 ** math.log2(1.8))
    with pytest.raises(DaydreamError, match="whole number"):
        parallel_time_factor(1.5, 2)
    with pytest.raises(DaydreamError, match="cores"):
        parallel_time_factor(1, 2, cores=0)
    # recordings before the sidecar's `host` name a CPU device's threads
    assert recorded_host({"device": {"type": "cpu", "threads": 2}}) == (2, None)
    assert recorded_host({"host": {"threads": 2, "cores": True}}) == (2, None)
    assert recorded_host(None) == (None, None)


def test_the_hosts_measured_speedup_prices_threads(tmp_path: Path) -> None:
    measured = [[1, 1.0], [2, 1.8], [4, 3.0]]
    host = {"host": {"threads": 4, "cores": 4, "thread_speedup": measured}}
    graph = build_graph(load_trace(_linear_trace(tmp_path, host)))
    curve = recorded_thread_speedup(graph.graph["recording"])
    assert curve == [(1.0, 1.0), (2.0, 1.8), (4.0, 3.0)]
    assert thread_speedup(3, 4, curve) == pytest.approx(2.4)  # linear between the measured counts
    assert thread_speedup(8, 16, curve) == pytest.approx(3.0)  # flat past the measured counts
    base = run_whatif(graph, ["threads"], {"threads": 4}).predicted.period_us
    # 4 -> 1 thread: the 125 us of threaded work takes 3x (the host's 4 threads ran it 3x faster than one), not 4x
    one = run_whatif(graph, ["threads"], {"threads": 1}).predicted.period_us
    assert one - base == pytest.approx(125.0 * 2)
    two = run_whatif(graph, ["threads"], {"threads": 2}).predicted.period_us
    assert two - base == pytest.approx(125.0 * (3.0 / 1.8 - 1))
    # another host (other cores): its speedups are not known, 0.9 per doubling (4 -> 8 threads: 1.8x)
    eight = run_whatif(graph, ["threads"], {"threads": 8, "cores": 8}).predicted.period_us
    assert base - eight == pytest.approx(125.0 * (1 - 1 / 1.8))


def test_a_given_efficiency_prices_the_recordings_host(tmp_path: Path) -> None:
    # the host's own efficiency per doubling, where the user measured it: in place of the default and of the sidecar's
    assert parallel_time_factor(1, 2, efficiency=0.74) == pytest.approx(1.48)
    assert parallel_time_factor(1, 4, efficiency=0.8) == pytest.approx(1.6**2)
    assert parallel_time_factor(1, 4, measured=[(1.0, 1.0), (4.0, 3.0)], efficiency=0.5) == pytest.approx(1.0)
    for wrong in (0.4, 1.01):
        with pytest.raises(DaydreamError, match="efficiency is the speedup per doubling"):
            parallel_time_factor(1, 2, efficiency=wrong)
    graph = build_graph(load_trace(_linear_trace(tmp_path, None)))
    # unmeasured: the default, and the factor at both ends of what hosts showed, in the script's message
    default = run_whatif(graph, ["threads"], {"threads": 1, "recorded": 2})
    low, high = (2 * e for e in OBSERVED_EFFICIENCY)
    assert default.printed == [
        f"threaded CPU work x 1.8 (the host's thread scaling is not measured: 0.9 per doubling taken; "
        f"hosts measured so far give x {low:g} to x {high:g} - give efficiency, or record with "
        f"daydream record)"
    ]
    given = run_whatif(graph, ["threads"], {"threads": 1, "recorded": 2, "efficiency": 0.74})
    assert given.printed == ["threaded CPU work x 1.48"]
    assert given.predicted.period_us - given.baseline.period_us == pytest.approx(125.0 * 0.48)
    # a host whose scaling the sidecar measured: the measurement, no range
    measured = {"host": {"threads": 2, "cores": 2, "thread_speedup": [[1, 1.0], [2, 1.6]]}}
    graph = build_graph(load_trace(_linear_trace(tmp_path, measured)))
    assert run_whatif(graph, ["threads"], {"threads": 1}).printed == ["threaded CPU work x 1.6"]


@pytest.mark.parametrize("points", [None, [], [[2, 1.8]], [[1, 1.0], [2, "x"]], [[1, 1.0], [2, -1.0]], [[1, 1.0, 3]]])
def test_a_missing_or_unusable_measurement_means_the_unmeasured_default(points: Any) -> None:
    assert recorded_thread_speedup({"host": {"threads": 2, "thread_speedup": points}}) is None


LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _loading_trace(tmp_path: Path, threads: int, cores: int) -> Path:
    """Four steps of 1000 us: the training thread makes its batch (300 us, one thread), then one threaded mm (400 us)
    and 300 us of single-threaded ops."""
    events = []
    for k in range(4):
        t = 1000.0 * k
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{k + 1}",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 1000,
                "args": {},
            }
        )
        events.append(_event(LOADER, t, 300, cat="user_annotation"))
        events.append(_event("aten::mm", t + 300, 400, [[512, 512], [512, 512]]))
        events.append(_event("aten::relu", t + 700, 300, [[64, 64]]))
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    sidecar = {"format": "daydream.recording/1", "host": {"threads": threads, "cores": cores}}
    (tmp_path / "rank0.daydream.json").write_text(json.dumps(sidecar))
    return path


def test_workers_take_the_batches_and_share_the_cores(tmp_path: Path) -> None:
    graph = build_graph(load_trace(_loading_trace(tmp_path, threads=2, cores=2)), "all")
    result = run_whatif(graph, ["dataloader"], {"workers": 2, "speedup": 1, "handoff": 20})
    made = [a for _, a in result.graph.nodes(data=True) if a["thread"].endswith("/DataLoader workers")]
    assert [a["duration"] for a in made] == pytest.approx([150.0] * 4)  # two workers side by side
    # the workers take 300 us of a core per 700 us of training (u = 3/7), one at a time; with 2 threads on 2 cores
    # one of the mm's threads shares its core with the worker while it runs, and the mm ends with its slowest
    # thread: it takes 2x for u of its time; the single-threaded ops lose nothing (a core is free)
    u = 300 / 700
    periods = list(result.timeline.step_periods().values())
    assert periods[1:] == pytest.approx([20 + 400 * (1 + u) + 300] * 3)
    # one intra-op thread leaves a core to the workers: only the batch making leaves the step
    graph = build_graph(load_trace(_loading_trace(tmp_path, threads=1, cores=2)), "all")
    result = run_whatif(graph, ["dataloader"], {"workers": 2, "speedup": 1, "handoff": 20})
    assert list(result.timeline.step_periods().values())[1:] == pytest.approx([720.0] * 3)


def test_a_workers_batch_runs_its_threaded_ops_on_one_thread(tmp_path: Path) -> None:
    # torch runs each DataLoader worker on one intra-op thread: the batch's threaded mm (200 us of its 300 us on two
    # threads) takes 1.8x there (no measured speedup: 0.9 per doubling)
    path = _loading_trace(tmp_path, threads=2, cores=2)
    trace = json.loads(path.read_text())
    loaders = [e for e in trace["traceEvents"] if e["name"] == LOADER]
    trace["traceEvents"] += [_event("aten::mm", e["ts"] + 50, 200, [[512, 512], [512, 512]]) for e in loaders]
    path.write_text(json.dumps(trace))
    graph = build_graph(load_trace(path), "all")
    batches = [a for _, a in graph.nodes(data=True) if a["kind"] == "dataloader"]
    assert [a["parallel_us"] for a in batches] == pytest.approx([200.0] * 4)
    result = run_whatif(graph, ["dataloader"], {"workers": 2, "speedup": 1, "handoff": 20})
    made = [a for _, a in result.graph.nodes(data=True) if a["thread"].endswith("/DataLoader workers")]
    assert [a["duration"] for a in made] == pytest.approx([(300 + 200 * 0.8) / 2] * 4)
    u = (300 + 200 * 0.8) / 700  # the workers' time per unit of training: one worker at a time
    assert list(result.timeline.step_periods().values())[1:] == pytest.approx([20 + 400 * (1 + u) + 300] * 3)


def test_workers_on_a_trace_without_a_sidecar(tmp_path: Path) -> None:
    """torch.profiler alone records no thread count: the `threads` (and `cores`) params stand for the sidecar's; with
    neither, the cores' sharing is not modelled, and the script says so. Workers make each batch as training did
    unless a `speedup` is given."""
    with_sidecar = build_graph(load_trace(_loading_trace(tmp_path, threads=2, cores=2)), "all")
    expected = run_whatif(with_sidecar, ["dataloader"], {"workers": 2, "speedup": 1, "handoff": 20})
    (tmp_path / "rank0.daydream.json").unlink()
    graph = build_graph(load_trace(tmp_path / "rank0.json"), "all")
    given = run_whatif(graph, ["dataloader"], {"workers": 2, "threads": 2, "handoff": 20})  # cores: one per thread
    assert given.predicted.period_us == pytest.approx(expected.predicted.period_us, rel=1e-9)
    assert (
        given.predicted.period_us
        == run_whatif(
            graph, ["dataloader"], {"workers": 2, "threads": 2, "cores": 2, "handoff": 20}
        ).predicted.period_us
    )
    unknown = run_whatif(graph, ["dataloader"], {"workers": 2, "handoff": 20})
    assert list(unknown.timeline.step_periods().values())[1:] == pytest.approx([720.0] * 3)  # no sharing priced
    assert any("not modelled" in line for line in unknown.printed)


def test_workers_that_fall_behind_hold_the_step(tmp_path: Path) -> None:
    graph = build_graph(load_trace(_loading_trace(tmp_path, threads=1, cores=2)), "all")
    slow = run_whatif(graph, ["dataloader"], {"workers": 1, "speedup": 0.25, "handoff": 20})
    # a batch takes one worker 1200 us: a step every 1200 us, whatever training takes
    assert list(slow.timeline.step_periods().values())[2:] == pytest.approx([1200.0] * 2)


def test_the_threads_case_of_the_corpus() -> None:
    """On the corpus' recording (2 threads, 2 cores), one thread stretches the threaded ops by the host's measured
    speedup of two threads over one, and nothing else."""
    trace = VALIDATION / "base" / "run1" / "rank0.json.xz"
    graph = build_graph(load_trace(trace))
    step = graph.graph["steps"][-1].name  # the measured step (the one before it is its context)
    threaded = sum(a["parallel_us"] for _, a in graph.nodes(data=True) if a["step"] == step)
    assert 0.5 < threaded / graph.graph["measured_us"] < 0.8  # GEMMs and Adam's weight-sized element-wise ops
    (one, _), (two, speedup) = graph.graph["recording"]["host"]["thread_speedup"]
    assert (one, two) == (1, 2) and 1.3 < speedup < 2.0
    result = run_whatif(graph, ["threads"], {"threads": 1})
    assert result.predicted.period_us - result.baseline.period_us == pytest.approx(threaded * (speedup - 1), rel=1e-6)
