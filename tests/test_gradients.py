"""Gradients and DDP buckets (daydream.graph.gradients) on a hand-built backward pass; their sizes where the trace
records none, estimated from each source in turn, by hand and on the shared real traces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import networkx as nx
import pytest
from synth import make_trace, write_trace
from whatif_graph import ACC, AUTOGRAD, backward

from daydream.api.whatif import predicted_interval, run_whatif
from daydream.dsl import Session
from daydream.errors import DaydreamError, NotApplicable
from daydream.graph import add_dependency, add_task, build_graph
from daydream.graph.gradients import (
    CHUNK_ELEMENTS,
    COLLECTIVES,
    ESTIMATE_FLOOR_PCT,
    OPTIMIZER_KERNELS,
    SHAPES,
    WEIGHT_SHAPES,
    GradientSizes,
    bucket_ready,
    ddp_buckets,
    gradient_sizes,
    gradients,
    read_gradients,
)
from daydream.graph.schema import Delays, ExecutionTraceUse
from daydream.trace import find_execution_trace, load_trace

TRANSFORMS = Path(__file__).resolve().parent.parent / "transforms"


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
    assert [[x.nbytes for x in b] for b in ddp_buckets(grads, cap=4096, first_cap=2 * 2**20 + 1)] == [
        [2 * 2**20, 4096],
        [786432],
    ]
    with pytest.raises(DaydreamError, match="bucket sizes must be > 0"):
        ddp_buckets(grads, cap=0)


def test_gradient_buckets_from_a_script() -> None:
    g, ids = backward()
    s = Session(g)
    s.execute(
        "let b = gradient_buckets()\nprint count(b), b[0][1], b[1][1], b[1][0].name[0]\nprint"
        " count(gradient_buckets(first = 4MiB))"
    )
    assert s.printed == ["2 2097152 790528 gemm_wgrad_2", "1"]


def test_missing_sizes_and_missing_gradients_are_clear_errors() -> None:
    g, ids = backward()
    g.nodes[ids["A2"]]["shapes"] = None
    with pytest.raises(
        DaydreamError,
        match=r"^1 of 3 gradients have no recorded size, and nothing to estimate them from "
        r"\(no DDP all-reduces .*\): record the trace with shapes",
    ) as caught:
        gradients(g)
    assert "\n" not in str(caught.value)  # one line
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
    # no shapes, no ET of its own: estimated (test_sizes_of_a_trace_without_shapes_from_its_optimizer_kernels)
    resnet = build_graph(load_trace(shared_traces / "param" / "resnet_kineto.json.gz"), context=False)
    assert gradient_sizes(resnet).source == OPTIMIZER_KERNELS


def test_a_trace_without_any_gradient_sizes_is_not_applicable() -> None:
    """Not a script error with a caret in the library's own file (exit 2): the script does not apply (exit 3), and
    says in one line what the trace lacks: no recorded sizes, nothing to estimate them from."""
    g, ids = backward()
    for a in ("A1", "A2", "A3"):
        g.nodes[ids[a]]["shapes"] = None
    with pytest.raises(
        NotApplicable,
        match=(
            "ddp does not apply to this trace: 3 of 3 gradients have no recorded size, "
            "and nothing to estimate them from"
        ),
    ) as caught:
        run_whatif(g, [TRANSFORMS / "ddp.whatif"], params={"ranks": 8})
    assert caught.value.exit_code == 3 and "\n" not in str(caught.value)


def test_an_execution_trace_that_did_not_give_the_sizes_is_named() -> None:
    """With --et given (or found beside the trace) the message says why that one did not give the sizes, not to give
    one."""
    g, ids = backward()
    for a in ("A1", "A2", "A3"):
        g.nodes[ids[a]]["shapes"] = None
    g.graph["execution_trace"] = ExecutionTraceUse("model_et.json", 0)
    with pytest.raises(DaydreamError) as caught:
        gradients(g)
    message = str(caught.value)
    assert (
        "the execution trace model_et.json" in message
        and "it was not used: its ops do not match the trace's" in message
    )
    assert "give the execution trace that covers this step (--et)" not in message


# -- estimated sizes: where the trace records none (daydream.graph.gradients' sources, in order) --------------------


def _unsized() -> tuple[nx.DiGraph, dict[str, int]]:
    g, ids = backward()
    for a in ("A1", "A2", "A3"):
        g.nodes[ids[a]]["shapes"] = None
    return g, ids


def _bucket(g: nx.DiGraph, call: int, nbytes: int, dtype: str = "float", top_op: str = ACC) -> int:
    """An all-reduce on stream 20 launched inside the AccumulateGrad call ``call`` (its top_op_id), as DDP's hook
    does."""
    return add_task(
        g,
        f"ncclKernel_AllReduce_RING_LL_Sum_{dtype}(ncclDevComm*, unsigned long, ncclWork*)",
        "comm",
        "gpu:0/20",
        30,
        start=200.0,
        step="s",
        phase="backward",
        top_op=top_op,
        top_op_id=call,
        collective="allreduce",
        bytes=nbytes,
        stream=20,
    )


def test_sizes_from_the_traced_ddp_buckets() -> None:
    # A1's call launched the first bucket (2 MiB), A3's the second (768 KiB + 4 KiB): A2 and A3 share it evenly;
    # an all-reduce launched outside an AccumulateGrad call (the loss's, for logging) is no bucket
    g, _ = _unsized()
    _bucket(g, 2, 2 * 2**20)
    _bucket(g, 5, 790528)
    _bucket(g, 99, 4, top_op="c10d::allreduce_")
    grads, sizes = read_gradients(g)
    assert [x.nbytes for x in grads] == [2 * 2**20, 395264, 395264] and {x.source for x in grads} == {COLLECTIVES}
    assert sum(x.nbytes for x in grads) == 2 * 2**20 + 790528  # the buckets' bytes, all of them
    assert sizes.source == COLLECTIVES and sizes.estimated and sizes.error_pct == ESTIMATE_FLOOR_PCT
    assert (
        sizes.note() == "gradient sizes estimated from the traced DDP all-reduces (2 buckets a step, 2,887,680 "
        "bytes, each split evenly over its gradients): +-5%"
    )
    # elements by the type the kernel's name says: a bf16 bucket of 1 MiB holds 512 Ki elements over its 3 gradients
    g, _ = _unsized()
    _bucket(g, 5, 2**20, dtype="bf16")
    assert [x.nbytes for x in gradients(g, 1)] == [174763, 174763, 174762]
    # the last gradient launched no bucket: DDP's buckets do not hold every gradient, no estimate from them
    g, _ = _unsized()
    _bucket(g, 2, 2 * 2**20)
    with pytest.raises(DaydreamError, match="3 of 3 gradients have no recorded size"):
        gradients(g)


def test_recorded_shapes_come_before_any_estimate() -> None:
    g, _ = backward()
    _bucket(g, 5, 100)
    grads, sizes = read_gradients(g)
    assert [x.nbytes for x in grads] == [2 * 2**20, 4096, 786432] and sizes == GradientSizes(SHAPES)
    assert not sizes.estimated and sizes.note() == "gradient sizes from the shapes the trace recorded"


def test_sizes_from_the_forward_ops_weight_shapes() -> None:
    # the forward pass reads a conv's weight, then a Linear's weight and bias (addmm: bias, input, weight.t()); the
    # backward pass reaches them in reverse: A1 the Linear's bias, A2 its weight, A3 the conv's
    g, _ = _unsized()
    fwd = {"step": "s", "phase": "forward"}
    add_task(
        g,
        "cudaLaunchKernel",
        "cpu",
        "cpu:1/1",
        5,
        start=-50.0,
        op="aten::cudnn_convolution",
        top_op="aten::conv2d",
        top_op_id=10,
        shapes=[[8, 3, 32, 32], [16, 3, 3, 3], [], [], []],
        **fwd,
    )
    add_task(
        g,
        "cudaLaunchKernel",
        "cpu",
        "cpu:1/1",
        5,
        start=-40.0,
        op="aten::addmm",
        top_op="aten::linear",
        top_op_id=11,
        shapes=[[256], [64, 512], [512, 256], [], []],
        **fwd,
    )
    # (no parameter)
    add_task(
        g,
        "cudaLaunchKernel",
        "cpu",
        "cpu:1/1",
        5,
        start=-30.0,
        op="aten::relu",
        top_op="aten::relu",
        top_op_id=12,
        shapes=[[64, 256]],
        **fwd,
    )
    grads, sizes = read_gradients(g, 1)
    assert [x.nbytes for x in grads] == [256, 512 * 256, 16 * 3 * 3 * 3] and sizes.source == WEIGHT_SHAPES
    assert sizes.error_pct == ESTIMATE_FLOOR_PCT  # as many as the gradients
    # a LayerNorm more (weight and bias, 256 each): 5 parameters for 3 gradients, spread over them by position; the
    # total kept, and the two that are one too many at most as large as the largest found
    add_task(
        g,
        "cudaLaunchKernel",
        "cpu",
        "cpu:1/1",
        5,
        start=-20.0,
        op="aten::native_layer_norm",
        top_op="aten::layer_norm",
        top_op_id=13,
        shapes=[[64, 256], [], [256], [256], []],
        **fwd,
    )
    grads, sizes = read_gradients(g, 1)
    found = [432, 131072, 256, 256, 256]
    assert sum(x.nbytes for x in grads) == sum(found) and len(grads) == 3
    assert sizes.error_pct == pytest.approx(100 * (131072 + 432) / sum(found))


def _optimizer_graph(n: int, calls: list[list[tuple[int, int]]]) -> nx.DiGraph:
    """n AccumulateGrad calls without shapes (10 us each on the autograd thread), then an optimizer step whose calls
    each launch multi_tensor_apply kernels of (depth, blocks)."""
    g = nx.DiGraph()
    g.graph.update(delays=Delays(2.0, 0.0))
    for i in range(n):
        add_task(g, ACC, "cpu", AUTOGRAD, 10, start=10.0 * i, step="s", phase="backward", op=ACC, top_op_id=i)
    t = 10.0 * n
    for c, launches in enumerate(calls):
        for depth, blocks in launches:
            common = {"step": "s", "phase": "optimizer", "op": "aten::_foreach_add_", "top_op_id": 1000 + c}
            call = add_task(g, "cudaLaunchKernel", "cpu", "cpu:1/1", 5, start=t, **common)
            k = add_task(
                g,
                f"void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<{depth}>, "
                "BinaryOpListAlphaFunctor<float>>",
                "gpu",
                "gpu:0/7",
                20,
                start=t + 2,
                blocks=blocks,
                **{"class": "optimizer"},
                **common,
            )
            add_dependency(g, call, k, "launch", lag=2)
            t += 30
    return g


def test_sizes_from_the_optimizers_fused_kernels() -> None:
    # 50 parameters, 100 chunks: a depth-3 call (at most 48 tensors a launch) launched 60 blocks for the first 48
    # and 40 for the last 2; a depth-1 call launched all 100 at once; a call over 50 one-element step counters, 50
    n = 50
    g = _optimizer_graph(n, [[(3, 60), (3, 40)], [(1, 100)], [(1, 50)]])
    grads, sizes = read_gradients(g, 1)
    # each tensor's last chunk taken half full: the first 48 (in the optimizer's order) (60 - 24) x 65536 / 48, the
    # last 2 (40 - 1) x 65536 / 2 each; the gradients are ready in reverse
    assert [x.nbytes for x in grads] == [39 * 65536 // 2] * 2 + [36 * 65536 // 48] * 48
    assert sum(x.nbytes for x in grads) == (100 - n // 2) * CHUNK_ELEMENTS and sizes.source == OPTIMIZER_KERNELS
    # the parameters lie between (100 - 50) x 65536 + 50 and 100 x 65536: half that range over the middle
    assert sizes.error_pct == pytest.approx(100 * 25 / 75)
    assert "100 chunks of 65,536 elements over 50 tensors a step: 3,276,850 to 6,553,600 parameters" in sizes.detail
    # a launch of the most blocks (320) may stop inside a tensor: no pin after it, the chunks spread evenly
    g = _optimizer_graph(n, [[(3, 320), (3, 80)]])
    assert {x.nbytes for x in gradients(g, 1)} == {(400 - 25) * 65536 // 50}
    # fewer chunks than gradients: the kernels cover something else, no estimate from them
    with pytest.raises(DaydreamError, match="50 of 50 gradients have no recorded size"):
        gradients(_optimizer_graph(n, [[(1, 49)]]))


def test_a_script_that_reads_estimated_sizes_says_so_and_widens_its_interval() -> None:
    g, _ = _unsized()
    _bucket(g, 2, 2 * 2**20)
    _bucket(g, 5, 790528)
    s = Session(g)
    assert predicted_interval(s.graph, [], {}, 100.0).parts == []  # not read yet: no part
    s.execute("print gradient_estimate()\nlet b = gradient_buckets()")
    assert s.printed[0].startswith("gradient sizes estimated from the traced DDP all-reduces (2 buckets a step")
    iv = predicted_interval(s.graph, [], {}, 100.0)
    assert [(p.name, p.half_width_pct, p.extrapolated) for p in iv.parts] == [
        ("gradient sizes", ESTIMATE_FLOOR_PCT, True)
    ]
    assert iv.extrapolated and iv.driver == "gradient sizes"
    # recorded sizes: nothing to say, no part
    s = Session(backward()[0])
    s.execute("print gradient_estimate()\nlet b = gradient_buckets()")
    assert s.printed == ["none"] and predicted_interval(s.graph, [], {}, 100.0).parts == []


def test_a_fused_optimizer_kernel_keeps_its_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The grid of a multi_tensor_apply kernel becomes its task's ``blocks``, read from the events or the columns,
    in both schemas; other kernels get none."""
    import daydream.trace.load as loader

    for schema in ("current", "2021"):
        doc = make_trace(schema=schema)
        for ev in doc["traceEvents"]:
            if "multi_tensor_apply" in ev.get("name", "") and ev.get("ph") == "X":
                ev["args"]["grid"] = [227, 1, 1]
        path = write_trace(tmp_path / f"{schema}.json", doc)
        for threshold in (0, float("inf")):  # the columns, the events
            monkeypatch.setattr(loader, "COLUMNAR_MIN_TEXT_BYTES", threshold)
            g = build_graph(load_trace(path))
            blocks = {a["name"]: a.get("blocks") for _, a in g.nodes(data=True) if a["kind"] == "gpu"}
            assert blocks["void at::native::multi_tensor_apply_kernel<sgd>"] == 227, (schema, threshold)
            assert {n for n, b in blocks.items() if b is not None} == {
                "void at::native::multi_tensor_apply_kernel<sgd>"
            }


# -- the real traces ---------------------------------------------------------------------------------------------------


def test_sizes_of_a_ddp_trace_from_its_all_reduces(shared_traces: Path) -> None:
    """hta's DDP ResNet-50 (rank 0 of 2) records no shapes; its NCCL kernels carry their message sizes: each step's
    gradients hold the step's all-reduced bytes, ResNet-50's 25,557,032 fp32 parameters in 5 buckets."""
    g = build_graph(load_trace(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz"))
    grads, sizes = read_gradients(g)
    assert sizes.source == COLLECTIVES and "5 buckets a step, 102,228,128 bytes" in sizes.detail
    reduced: dict[str, int] = {}
    for _, a in g.nodes(data=True):
        if a["kind"] == "comm" and a["collective"] == "allreduce":
            reduced[a["step"]] = reduced.get(a["step"], 0) + a["bytes"]
    held: dict[str, int] = {}
    for x in grads:
        held[x.step] = held.get(x.step, 0) + x.nbytes
    assert held == reduced and set(held.values()) == {25_557_032 * 4} and len(grads) == 2 * 161
    # without them, the optimizer's fused kernels: 508 chunks a step over 161 tensors, whose range holds ResNet-50
    g.remove_nodes_from([v for v, a in g.nodes(data=True) if a["kind"] == "comm"])
    grads, sizes = read_gradients(g, 1)
    assert sizes.source == OPTIMIZER_KERNELS and "508 chunks of 65,536 elements over 161 tensors" in sizes.detail
    per_step = sum(x.nbytes for x in grads) / 2
    assert (508 - 161) * CHUNK_ELEMENTS < 25_557_032 < 508 * CHUNK_ELEMENTS
    assert abs(per_step - 25_557_032) / per_step * 100 < sizes.error_pct


def test_sizes_of_a_trace_without_shapes_from_its_optimizer_kernels(shared_traces: Path) -> None:
    """param/resnet_kineto (a ResNet-18, SGD with foreach kernels) records no shapes and no collectives: every step's
    foreach calls launch 227 blocks, 10.8 to 14.9 M parameters (torchvision's ResNet-18: 11,689,512)."""
    g = build_graph(load_trace(shared_traces / "param" / "resnet_kineto.json.gz"))
    grads, sizes = read_gradients(g, 1)
    assert sizes.source == OPTIMIZER_KERNELS and sizes.estimated and len(grads) == 3 * 62
    steps = {x.step for x in grads}
    for step in steps:
        total = sum(x.nbytes for x in grads if x.step == step)
        assert total == pytest.approx((227 - 31) * CHUNK_ELEMENTS, abs=62)
        assert abs(total - 11_689_512) / total * 100 < sizes.error_pct
    # the first launch of a depth-3 call holds its first 48 tensors (100 chunks): the last 14 parameters (the first
    # ready: fc, layer4) hold the other 127 chunks; DDP's first bucket (1 MiB) closes at the first gradient, its next
    # (25 MiB) 12 gradients on, as the model's real sizes close them
    first = [x.nbytes for x in grads if x.step == min(steps)]
    assert first[:14] == [round((127 - 7) * CHUNK_ELEMENTS / 14)] * 14
    assert [len(b) for b in ddp_buckets([x for x in gradients(g) if x.step == min(steps)])] == [1, 12, 49]


def test_weight_shapes_size_a_recorded_resnet_exactly(shared_traces: Path) -> None:
    """tracelens' MI300X ResNet-18 records shapes: with its AccumulateGrad calls' taken away, the forward pass's
    convolutions, batch norms and Linear give each gradient its recorded size; with every shape taken away, its
    fused optimizer kernels (227 chunks) a range that holds the model."""
    g = build_graph(load_trace(shared_traces / "tracelens" / "mi300_train_resnet18.json.gz"))
    recorded = [x.nbytes for x in gradients(g, 1)]
    assert sum(recorded) == 3 * 11_689_512
    for _, a in g.nodes(data=True):
        if a["kind"] == "cpu" and "AccumulateGrad" in str(a.get("top_op") or a.get("op")):
            a["shapes"] = None
    grads, sizes = read_gradients(g, 1)
    assert sizes.source == WEIGHT_SHAPES and [x.nbytes for x in grads] == recorded
    for _, a in g.nodes(data=True):
        a["shapes"] = None
    grads, sizes = read_gradients(g, 1)
    assert sizes.source == OPTIMIZER_KERNELS and abs(sum(x.nbytes for x in grads) / 3 - 11_689_512) < 0.1 * 11_689_512


@pytest.mark.parametrize("script", ["ddp", "fsdp", "scale_out", "p3"])
def test_data_parallel_scripts_run_on_estimated_sizes_and_say_so(shared_traces: Path, script: str) -> None:
    """On param/resnet_kineto (no shapes) the scripts that need gradient sizes apply, print where the sizes came from,
    and their interval has a "gradient sizes" part, marked extrapolated, that widens it."""
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "daydream",
            "run",
            str(shared_traces / "param" / "resnet_kineto.json.gz"),
            script,
            "-p",
            "ranks=8",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert any(
        line.startswith("gradient sizes estimated from the optimizer's fused kernels (227 chunks")
        for line in doc["printed"]
    )
    iv = doc["predicted_interval"]
    part = next(p for p in iv["parts"] if p["name"] == "gradient sizes")
    assert part["extrapolated"] and iv["extrapolated"] and part["half_width_pct"] == pytest.approx(100 * 31 / 196)
    others = math.sqrt(sum(p["half_width_pct"] ** 2 for p in iv["parts"] if p is not part))
    assert iv["half_width_pct"] > others  # wider than the same prediction with recorded sizes


def test_an_unmatched_execution_trace_leaves_the_estimate(shared_traces: Path) -> None:
    """resnet_et is another model's execution trace: ignored (a warning), the sizes estimated as without it."""
    param = shared_traces / "param"
    g = build_graph(load_trace(param / "resnet_kineto.json.gz", et=param / "resnet_et.json.gz"))
    assert gradient_sizes(g).source == OPTIMIZER_KERNELS
    assert any("execution trace does not match" in w for w in g.graph["warnings"])
