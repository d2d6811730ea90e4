"""Graph construction from synthetic traces whose structure and timing are known."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import networkx as nx
import pytest
from synth import BWD, MAIN, PID, STEP_MEASURED_US, STEP_PERIOD_US, STREAM, make_trace, write_trace

from daydream import TraceError, build_graph, load_trace, simulate
from daydream.api.replay import replay


def _graph(tmp_path: Path, step: str | None = None, context: bool = True, **kw: object) -> nx.DiGraph:
    return build_graph(load_trace(write_trace(tmp_path / "t.json", make_trace(**kw))), step, context=context)  # type: ignore[arg-type]


def _by_name(g: nx.DiGraph, fragment: str) -> list[int]:
    return [n for n, a in g.nodes(data=True) if fragment in a["name"]]


def test_default_step_is_steady_state(tmp_path: Path) -> None:
    g = _graph(tmp_path)
    # the middle step, after the step before it as its context: its time is its period, what a run pays per step
    assert [(s.name, s.context) for s in g.graph["steps"]] == [("ProfilerStep#1", True), ("ProfilerStep#2", False)]
    assert g.graph["measured_us"] == STEP_PERIOD_US
    assert simulate(g).step_us() == pytest.approx(STEP_PERIOD_US)
    alone = _graph(tmp_path, context=False)  # a cold start: the step's span
    assert [s.name for s in alone.graph["steps"]] == ["ProfilerStep#2"]
    assert alone.graph["measured_us"] == STEP_MEASURED_US


@pytest.mark.parametrize("schema", ["current", "2021"])
def test_replay_reproduces_every_task(tmp_path: Path, schema: str) -> None:
    g = _graph(tmp_path, "all", schema=schema)
    tl = simulate(g)
    assert tl.makespan() == pytest.approx(sum(s.measured_us for s in g.graph["steps"]))  # the periods add up
    assert tl.step_us() == pytest.approx(g.graph["measured_us"]) == pytest.approx(STEP_PERIOD_US)  # the median's
    for i, node in enumerate(tl.nodes):
        a = g.nodes[node]
        # Every task ends when it did in the trace (waits inside blocking calls are modelled, not copied).
        assert tl.end[i] == pytest.approx(a["start"] + a["duration"] if not a["name"].endswith("[wait]") else tl.end[i])
    starts = {
        g.nodes[n]["name"]: float(tl.start[i]) for i, n in enumerate(tl.nodes) if g.nodes[n]["step"] == "ProfilerStep#1"
    }
    assert starts["volta_sgemm_128x64_nn"] == 15.0  # 1045 - origin 1030


def test_tasks_kinds_phases_layers(tmp_path: Path) -> None:
    g = _graph(tmp_path, "2")
    kinds = {a["name"]: a["kind"] for _, a in g.nodes(data=True)}
    assert kinds["volta_sgemm_128x64_nn"] == "gpu"
    assert kinds["Memcpy DtoH (Device -> Pageable)"] == "memcpy"
    gemm = g.nodes[_by_name(g, "sgemm_128x64")[0]]
    assert (gemm["op"], gemm["top_op"], gemm["layer"], gemm["phase"], gemm["class"]) == (
        "aten::addmm",
        "aten::linear",
        "Linear_0",
        "forward",
        "gemm",
    )
    assert gemm["shapes"] == [[8], [4, 8], [8, 8]]
    bwd = g.nodes[_by_name(g, "sgemm_64x64")[0]]
    assert bwd["phase"] == "backward" and bwd["layer"] == "Linear_0"  # mapped to its forward op by sequence number
    assert g.nodes[_by_name(g, "multi_tensor_apply")[0]]["phase"] == "optimizer"
    assert g.nodes[_by_name(g, "Memcpy DtoH")[0]]["bytes"] == 4


def test_edges_of_each_kind(tmp_path: Path) -> None:
    g = _graph(tmp_path, "2")
    kinds = {e["kind"] for _, _, e in g.edges(data=True)}
    assert kinds == {"thread", "stream", "launch", "sync"}
    sync = _by_name(g, "cudaStreamSynchronize")[0]
    parents = {g.nodes[u]["name"]: e["kind"] for u, _, e in g.in_edges(sync, data=True)}
    assert parents["Memcpy DtoH (Device -> Pageable)"] == "sync"  # the last work on its stream
    # The blocking copy call is split: issue, then a wait released by the copy.
    wait = _by_name(g, "cudaMemcpyAsync [wait]")[0]
    assert {g.nodes[u]["kind"] for u, _, e in g.in_edges(wait, data=True) if e["kind"] == "sync"} == {"memcpy"}
    assert nx.is_directed_acyclic_graph(g)


def test_inferred_stream_sync_without_cuda_sync_events(tmp_path: Path) -> None:
    g = _graph(tmp_path, "2", explicit_sync=False)
    sync = _by_name(g, "cudaStreamSynchronize")[0]
    assert "sync" not in {e["kind"] for _, _, e in g.in_edges(sync, data=True)}  # nothing was pending: no wait inferred
    assert simulate(g).step_us() == pytest.approx(g.graph["measured_us"]) == pytest.approx(STEP_PERIOD_US)


def test_what_if_shorter_gemm_moves_queued_kernel(tmp_path: Path) -> None:
    g = _graph(tmp_path, "2")
    gemm = _by_name(g, "sgemm_128x64")[0]
    relu = _by_name(g, "vectorized_elementwise")[0]
    g.nodes[gemm]["duration"] = 100.0
    tl = simulate(g)
    i = tl.nodes.index(relu)
    gap = g.nodes[gemm]["gap"]
    # The relu kernel was queued behind the gemm; now it follows the shorter gemm (its launch was long done).
    assert tl.start[i] == pytest.approx(g.nodes[gemm]["start"] + 100.0 + gap)


def test_bad_step_names(tmp_path: Path) -> None:
    tr = load_trace(write_trace(tmp_path / "t.json", make_trace()))
    with pytest.raises(TraceError, match=r"no step ProfilerStep#9 .*ProfilerStep#1, ProfilerStep#2"):
        build_graph(tr, "9")
    with pytest.raises(TraceError, match="no step or annotation named 'nope'"):
        build_graph(tr, "nope")
    # a step typed in the wrong case: the name as the trace spells it, and the steps there are
    with pytest.raises(
        TraceError,
        match=r"named 'profilerstep#2' in the trace; did you mean 'ProfilerStep#2'\? \(steps: "
        r"ProfilerStep#1, ProfilerStep#2, ProfilerStep#3; also 'all'",
    ):
        build_graph(tr, "profilerstep#2")


def test_named_annotation_window(tmp_path: Path) -> None:
    g = _graph(tmp_path, "Optimizer.step#SGD.step")
    assert len(g.graph["steps"]) == 3
    assert {a["name"] for _, a in g.nodes(data=True)} == {
        "cudaLaunchKernel",
        "void at::native::multi_tensor_apply_kernel<sgd>",
    }


def test_cpu_only_trace_gives_cpu_graph_with_warning(tmp_path: Path) -> None:
    doc = make_trace()
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation", "python_function")
    ]
    result = replay(write_trace(tmp_path / "cpu.json", doc))
    assert {a["kind"] for _, a in result.graph.nodes(data=True)} == {"cpu"}
    assert result.baseline_us == pytest.approx(result.measured_us)
    assert any("no GPU activity" in w for w in result.warnings)


def test_iterations_from_optimizer_steps_without_profiler_steps(tmp_path: Path) -> None:
    # Traces recorded without a profiler schedule (no ProfilerStep#N): iteration k ends where optimizer step k ends.
    doc = make_trace()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    trace = load_trace(write_trace(tmp_path / "t.json", doc))
    assert [s.name for s in build_graph(trace).graph["steps"]] == ["iteration#0", "iteration#1"]  # with its context
    g = build_graph(trace, context=False)
    assert [s.name for s in g.graph["steps"]] == ["iteration#1"]  # the middle one of three
    names = [a["name"] for _, a in sorted(g.nodes(data=True), key=lambda na: na[1]["start"])]
    # Iteration 1 = (end of step 1's optimizer at 1600, end of step 2's at 2600]: step 1's sync, then step 2's work.
    assert names[0] == "cudaMemcpyAsync" and names[-1] == "void at::native::multi_tensor_apply_kernel<sgd>"
    assert names.count("void at::native::multi_tensor_apply_kernel<sgd>") == 1
    assert [s.name for s in build_graph(trace, "all").graph["steps"]] == ["iteration#0", "iteration#1", "iteration#2"]
    assert [s.name for s in build_graph(trace, 2).graph["steps"]] == [
        "iteration#0",
        "iteration#1",
        "iteration#2",
    ]  # two before
    with pytest.raises(TraceError, match=r"no step iteration#7 .*iteration#0, iteration#1, iteration#2"):
        build_graph(trace, 7)


def test_fbgemm_kernels_are_not_gemms() -> None:
    from daydream.graph import classify_kernel

    assert (
        classify_kernel(
            "void split_embedding_codegen_forward_unweighted_kernel<float, float, fbgemm_gpu::PlaceholderType>"
        )
        == "embedding"
    )
    assert classify_kernel("void bounds_check_indices_kernel<long>(at::GenericPackedTensorAccessor)") == "embedding"
    assert classify_kernel("void fbgemm_gpu::permute_2D_data_kernel<false, int, int>(int)") == "copy"
    assert classify_kernel("volta_sgemm_128x32_nt") == "gemm"


@pytest.mark.parametrize(
    ("name", "cls"),
    [  # names from the shared traces: MIOpen on an MI300X (TraceLens), cuDNN on a V100 (PARAM's ResNet)
        ("MIOpenBatchNormFwdTrainSpatialMeanVariance", "norm"),
        ("MIOpenBatchNormBwdSpatial", "norm"),
        ("SubTensorOpWithScalar1d", "elementwise"),
        ("void cudnn::ops::scalePackedTensor_kernel<float, float>(long, float*, float)", "elementwise"),
        (
            (
                "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true,"
                " (cudnnKernelDataType_t)2>(cudnn::ops::"
            ),
            "copy",
        ),
        (
            (
                "void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false,"
                " (cudnnKernelDataType_t)0>(cudnn::ops::"
            ),
            "copy",
        ),
        ("batched_transpose_32x32_half", "copy"),
        ("igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x64x32_wt32x32x8_ws1x1_wr1x2", "conv"),
        ("_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3", "conv"),
        ("MIOpenConvUni", "conv"),
    ],
)
def test_library_helper_kernels_are_classed_by_what_they_do(name: str, cls: str) -> None:
    """A convolution library's batch norm, layout changes and scalings are not convolutions, nor "other"."""
    from daydream.graph import classify_kernel

    assert classify_kernel(name) == cls


@pytest.mark.parametrize(
    "name",
    [
        "param/dlrm8/rank0.json.gz",
        "param/resnet_kineto.json.gz",
        "hta/nccl_parser_config_nccl_data.json.gz",
        "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
    ],
)
@pytest.mark.parametrize("step", [None, "all"])
def test_releasing_the_events_builds_the_same_graph(name: str, step: str | None, shared_traces: Path) -> None:
    """build_graph(release_events=True) empties the trace's event lists once read: no stage after reads them."""
    path = shared_traces / name
    kept = build_graph(load_trace(path), step)
    trace = load_trace(path)
    released = build_graph(trace, step, release_events=True)
    assert not (
        trace.cpu_ops or trace.annotations or trace.runtime or trace.gpu or trace.gpu_annotations or trace.syncs
    )
    assert list(released.nodes(data=True)) == list(kept.nodes(data=True))
    assert list(released.edges(data=True)) == list(kept.edges(data=True))
    assert released.graph == kept.graph


def test_slow_runtime_calls_are_named_in_a_warning() -> None:
    """A runtime call that costs the host milliseconds is a first iteration's setup or a stall: the graph says so.
    Calls that block on the device by design, and CPU ops, are not counted."""
    from daydream.graph.build import slow_runtime_calls

    def task(name: str, us: float) -> dict[str, object]:
        return {"kind": "cpu", "name": name, "duration": us}

    steady = [
        task("cudaLaunchKernel", 8),
        task("cudaStreamSynchronize", 50_000),
        task("aten::mm", 9_000),
        task("cudaMemcpyAsync", 3_000),
        {"kind": "gpu", "name": "cudaKernel", "duration": 5_000},
    ]
    assert slow_runtime_calls(steady) == []
    (warning,) = slow_runtime_calls(
        [*steady, task("cudaFree", 6_000_000), task("hipLaunchKernel", 6_500), task("cuModuleLoadData", 999)]
    )
    assert warning.startswith(
        "2 runtime calls of the step took 6.01 s of host time (cudaFree 6.00 s, hipLaunchKernel 6.5 ms)"
    )
    assert "one-time setup" in warning
    assert len(warning) < 300  # what it is and what to do, not a paragraph (issue 75: 600 characters on MI300X's)


def test_a_first_iteration_with_cuda_setup_is_flagged(shared_traces: Path) -> None:
    trace = shared_traces / "hta" / "critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"
    warnings = build_graph(load_trace(trace)).graph["warnings"]
    assert any("cudaDeviceGetStreamPriorityRange 29.93 s" in w for w in warnings), warnings
    # a steady ProfilerStep of a real DDP run holds none
    steady = build_graph(load_trace(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz")).graph["warnings"]
    assert not any("runtime call" in w for w in steady)


def test_work_between_the_backward_pass_and_the_optimizer_step_is_the_weight_update(tmp_path: Path) -> None:
    """Gradient clipping (clip_grad_norm_ records no range of its own) runs after the backward pass, before the
    optimizer step, once per optimizer step: it is in the weight update. What follows the optimizer step is not."""
    doc = make_trace()
    for k in (1, 2, 3):
        for name, ts in (("aten::_foreach_norm", 450), ("aten::_foreach_mul_", 470)):
            doc["traceEvents"].append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": name,
                    "pid": 100,
                    "tid": 1,
                    "ts": 1000.0 * k + ts,
                    "dur": 10,
                    "args": {},
                }
            )
    g = build_graph(load_trace(write_trace(tmp_path / "t.json", doc)))
    phases = {a["name"]: a["phase"] for _, a in g.nodes(data=True)}
    assert phases["aten::_foreach_norm"] == phases["aten::_foreach_mul_"] == "optimizer"
    assert phases["cudaStreamSynchronize"] == "other"  # after the optimizer step (the loss read back)


def test_a_later_micro_batchs_forward_pass_is_forward(tmp_path: Path) -> None:
    """Gradient accumulation: micro-batch 2's forward pass runs after micro-batch 1's backward pass. Its ops made the
    autograd nodes micro-batch 2's backward pass evaluated (the same sequence numbers): they and their kernels are in
    the forward pass. A thread that polls events while the backward pass runs (NCCL's watchdog) is not."""
    doc = make_trace(steps=1)
    corr = 1000

    def x(name: str, tid: int, ts: float, dur: float, cat: str = "cpu_op", **args: object) -> None:
        doc["traceEvents"].append(
            {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": args}
        )

    def launch(tid: int, ts: float, kname: str, kts: float) -> None:
        nonlocal corr
        corr += 1
        x("cudaLaunchKernel", tid, ts, 5, "cuda_runtime", correlation=corr)
        doc["traceEvents"].append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": kname,
                "pid": 0,
                "tid": STREAM,
                "ts": kts,
                "dur": 5,
                "args": {"device": 0, "stream": STREAM, "correlation": corr},
            }
        )

    x("cudaEventQuery", 3, 1350, 2, "cuda_runtime", correlation=999)  # polled during micro-batch 1's backward pass
    x("cudaEventQuery", 3, 1456, 2, "cuda_runtime", correlation=998)  # and during micro-batch 2's
    x("aten::linear", MAIN, 1410, 30, **{"Sequence number": 11})  # micro-batch 2's forward pass
    launch(MAIN, 1415, "sgemm_microbatch2_fwd", 1430)
    x("autograd::engine::evaluate_function: AddmmBackward0", BWD, 1450, 30, **{"Sequence number": 11})
    launch(BWD, 1455, "sgemm_microbatch2_bwd", 1485)
    g = build_graph(load_trace(write_trace(tmp_path / "accumulation.json", doc)))
    phase_of = {
        a["name"]: a["phase"] for _, a in g.nodes(data=True) if a["kind"] != "cpu" or a["name"] != "cudaLaunchKernel"
    }
    launches = sorted((a["start"], a["phase"]) for _, a in g.nodes(data=True) if a["name"] == "cudaLaunchKernel")
    assert [p for _, p in launches] == ["forward", "forward", "backward", "forward", "backward", "optimizer"]
    assert phase_of["sgemm_microbatch2_fwd"] == "forward"
    assert phase_of["sgemm_microbatch2_bwd"] == "backward"
    assert {a["phase"] for _, a in g.nodes(data=True) if a["name"] == "cudaEventQuery"} == {"other"}

    # an op whose node no backward pass evaluates (a metric under grad mode) is in no forward pass
    (node,) = [e for e in doc["traceEvents"] if e.get("ts") == 1450]
    node["args"]["Sequence number"] = 12
    g = build_graph(load_trace(write_trace(tmp_path / "evaluation.json", doc)))
    assert {a["phase"] for _, a in g.nodes(data=True) if a["name"] == "sgemm_microbatch2_fwd"} == {"other"}


def test_recorded_accumulation_labels_every_micro_batchs_forward_pass() -> None:
    """A real CPU recording with two micro-batches per step (the corpus's): both forward passes are `forward`, as
    many tasks as the step without accumulation has; nothing before the last backward task is left in `other`."""
    root = Path(__file__).parent.parent / "validation" / "traces" / "convnet"
    base = build_graph(load_trace(root / "base" / "run1" / "rank0.json.xz"))
    accum = build_graph(load_trace(root / "accumulate2" / "run1" / "rank0.json.xz"))
    count = Counter(a["phase"] for _, a in accum.nodes(data=True))
    assert count["forward"] == 2 * Counter(a["phase"] for _, a in base.nodes(data=True))["forward"]
    last_backward = max(a["start"] for _, a in accum.nodes(data=True) if a["phase"] == "backward")
    assert not [a["name"] for _, a in accum.nodes(data=True) if a["phase"] == "other" and a["start"] < last_backward]


def test_python_stack_frames_do_not_take_a_ranges_place(tmp_path: Path) -> None:
    """A trace recorded with the Python stack (with_stack=True: TraceLens's MI300X traces) holds frames such as
    `torch/optim/optimizer.py(60): _use_grad` inside `Optimizer.step#SGD.step`: a frame names a file, not a phase,
    and the step stays the region of its kernels (fused_optimizer found no optimizer step there)."""
    doc = make_trace()
    step = next(e for e in doc["traceEvents"] if e.get("name") == "Optimizer.step#SGD.step")
    frame = dict(
        step,
        cat="python_function",
        name="torch/optim/optimizer.py(60): _use_grad",
        ts=step["ts"] + 1,
        dur=step["dur"] - 2,
    )
    doc["traceEvents"].append(frame)
    g = build_graph(load_trace(write_trace(tmp_path / "t.json", doc)))
    optimizer = [a for _, a in g.nodes(data=True) if a.get("class") == "optimizer"]
    assert optimizer and {a["region"] for a in optimizer} == {"Optimizer.step#SGD.step"}
    assert {a["phase"] for a in optimizer} == {"optimizer"}


def test_each_gpu_task_names_the_call_that_launched_it(tmp_path: Path) -> None:
    # the builder's launcher column (what a kernel takes its step and phase from) is its launch dependency's parent
    from daydream.graph.build.cpu import cpu_tasks
    from daydream.graph.build.gpu import gpu_tasks
    from daydream.graph.build.table import TaskTable
    from daydream.graph.schema import EDGE_KIND_NUMBER

    trace = load_trace(write_trace(tmp_path / "t.json", make_trace()))
    table = TaskTable()
    gpu_tasks(trace, table, cpu_tasks(trace, table))
    launch = EDGE_KIND_NUMBER["launch"]
    launches = {v: u for u, v, kind in zip(table.edge_parent, table.edge_child, table.edge_kind) if kind == launch}
    assert launches and len(table.launcher) == len(table)
    assert {v: call for v, call in enumerate(table.launcher) if call >= 0} == launches
    assert all(table.column("kind")[call] == "cpu" for call in launches.values())
