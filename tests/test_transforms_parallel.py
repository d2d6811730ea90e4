"""Model-parallel transforms (transforms/tensor_parallel.whatif) and the split they rest on
(daydream.graph.tensor_parallel): hand-built graphs with times worked out by hand, and a recorded transformer."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from daydream.api.whatif import WhatIf, run_whatif
from daydream.errors import DaydreamError, NotApplicable
from daydream.graph import add_dependency, add_task, build_graph
from daydream.graph.edit import check_threads
from daydream.graph.schema import Delays
from daydream.graph.tensor_parallel import Linear, linear_dims, split_pairs
from daydream.trace import load_trace

TRANSFORMS = Path(__file__).resolve().parent.parent / "transforms"
CPU, S7 = "cpu:1/1", "gpu:0/7"


def run(graph: nx.DiGraph, script: str, **params: object) -> WhatIf:
    result = run_whatif(graph, [TRANSFORMS / f"{script}.whatif"], params=params or None)
    check_threads(result.graph)
    assert nx.is_directed_acyclic_graph(result.graph)
    return result


def launched(g: nx.DiGraph, calls: list[tuple[str, str, object, str, str, float, str]], call_us: float = 10.0) -> None:
    """One CPU thread launching one kernel per call (op, module, input shapes, kernel, class, us, phase) on stream 7:
    calls of `call_us` (launch lag 2), each kernel starting once launched and the one before it is done. Each call and
    its kernel carry the op, its module and the step's attributes, as `daydream record` gives them."""
    prev_call = prev_kernel = None
    end = 0.0
    for i, (op, layer, shapes, kname, cls, us, phase) in enumerate(calls):
        common = {"step": "s", "phase": phase, "layer": layer, "op": op, "top_op": op, "top_op_id": i}
        call = add_task(g, "cudaLaunchKernel", "cpu", CPU, call_us, start=call_us * i, shapes=shapes, **common)
        start = max(end, call_us * (i + 1) + 2)
        k = add_task(g, kname, "gpu", S7, us, start=start, stream=7, **{"class": cls}, **common)
        end = start + us
        add_dependency(g, call, k, "launch", lag=2)
        if prev_call is not None:
            add_dependency(g, prev_call, call, "thread")
            add_dependency(g, prev_kernel, k, "stream")
        prev_call, prev_kernel = call, k


def mlp_block(hidden: int = 1024, tokens: int = 64) -> nx.DiGraph:
    """A transformer's MLP block on an H100, one CPU thread launching one kernel per op call (calls 10 us, launch lag
    2) on stream 7: forward fc1 (gemm 100 us), act (gelu 20), fc2 (gemm 100); backward fc2 (gemm 200), act (20), fc1
    (gemm 200). Each call carries its module and input shapes, as `daydream record` gives them.

        K1 [12,112] K2 [112,132] K3 [132,232] K4 [232,432] K5 [432,452] K6 [452,652]: 652 us
    """
    g = nx.DiGraph()
    g.graph.update(measured_us=652.0, delays=Delays(2.0, 0.0), device="NVIDIA H100 80GB HBM3", steps=[])
    inner = 4 * hidden
    specs = [  # op, module, input shapes, kernel, class, us, phase
        (
            "aten::linear",
            "blk.mlp.fc1",
            [[tokens, hidden], [inner, hidden], [inner]],
            "sm90_gemm_f32_fc1",
            "gemm",
            100,
            "forward",
        ),
        ("aten::gelu", "blk.mlp.act", [[tokens, inner], []], "gelu_kernel", "elementwise", 20, "forward"),
        (
            "aten::linear",
            "blk.mlp.fc2",
            [[tokens, inner], [hidden, inner], [hidden]],
            "sm90_gemm_f32_fc2",
            "gemm",
            100,
            "forward",
        ),
        (
            "aten::mm",
            "blk.mlp.fc2",
            [[tokens, hidden], [hidden, inner]],
            "sm90_gemm_f32_fc2_bwd",
            "gemm",
            200,
            "backward",
        ),
        (
            "aten::gelu_backward",
            "blk.mlp.act",
            [[tokens, inner], [tokens, inner]],
            "gelu_bwd_kernel",
            "elementwise",
            20,
            "backward",
        ),
        (
            "aten::mm",
            "blk.mlp.fc1",
            [[tokens, inner], [inner, hidden]],
            "sm90_gemm_f32_fc1_bwd",
            "gemm",
            200,
            "backward",
        ),
    ]
    launched(g, specs)
    return g


def test_linear_dims_read_each_op_spelling() -> None:
    assert linear_dims("aten::linear", [[8, 64, 256], [768, 256], [768]]) == (512, 256, 768)
    assert linear_dims("aten::addmm", [[768], [512, 256], [256, 768], [], []]) == (512, 256, 768)
    assert linear_dims("aten::mm", [[512, 256], [256, 768]]) == (512, 256, 768)
    assert linear_dims("aten::matmul", [[8, 4, 64, 64], [8, 4, 64, 64]]) is None  # two activations: attention
    assert linear_dims("aten::linear", [[8, 64, 256], [768, 128]]) is None  # dims that do not multiply
    assert linear_dims("aten::relu", [[8, 64]]) is None and linear_dims("aten::linear", None) is None


def forward_calls(*calls: tuple[str, str | None, list[list[int]]]) -> nx.DiGraph:
    """One CPU thread of forward op calls (op, module, input shapes), 10 us each, in order."""
    g = nx.DiGraph()
    prev = None
    for i, (op, layer, shapes) in enumerate(calls):
        t = add_task(
            g,
            op,
            "cpu",
            CPU,
            10,
            start=10.0 * i,
            step="s",
            phase="forward",
            layer=layer,
            op=op,
            top_op_id=i,
            shapes=shapes,
        )
        if prev is not None:
            add_dependency(g, prev, t, "thread")
        prev = t
    return g


def test_megatron_pairs_of_a_gated_attention_block() -> None:
    # Llama: q, k, v read the block's input (views between them), the attention core, o_proj reads its output;
    # gate and up read the MLP's input (an activation between them), down reads their product
    h, f, x = 512, 1376, [[16, 512]]
    a, m = "model.layers.0.self_attn", "model.layers.0.mlp"
    g = forward_calls(
        ("aten::layer_norm", "model.layers.0.input_layernorm", x),
        ("aten::linear", f"{a}.q_proj", [[16, h], [h, h]]),
        ("aten::view", a, [[16, h], []]),
        ("aten::transpose", a, [[16, 8, 64], [], []]),
        ("aten::linear", f"{a}.k_proj", [[16, h], [h, h]]),
        ("aten::view", a, [[16, h], []]),
        ("aten::linear", f"{a}.v_proj", [[16, h], [h, h]]),
        ("aten::mul", f"{a}.rotary_emb", [[16, h], [16, h]]),
        ("aten::scaled_dot_product_attention", a, [[1, 8, 16, 64]] * 3),
        ("aten::linear", f"{a}.o_proj", [[16, h], [h, h]]),
        ("aten::add", "model.layers.0", [[16, h], [16, h]]),
        ("aten::layer_norm", "model.layers.0.post_attention_layernorm", x),
        ("aten::linear", f"{m}.gate_proj", [[16, h], [f, h]]),
        ("aten::silu", f"{m}.act_fn", [[16, f]]),
        ("aten::linear", f"{m}.up_proj", [[16, h], [f, h]]),
        ("aten::mul", m, [[16, f], [16, f]]),
        ("aten::linear", f"{m}.down_proj", [[16, f], [h, f]]),
        ("aten::add", "model.layers.0", [[16, h], [16, h]]),
    )
    attn, mlp = split_pairs(g)
    assert [c.layer for c in attn.columns] == [
        f"{a}.q_proj",
        f"{a}.k_proj",
        f"{a}.v_proj",
    ] and attn.row.layer == f"{a}.o_proj"
    assert attn.sharded == (a, f"{a}.rotary_emb") and attn.replicated == ()
    assert [c.layer for c in mlp.columns] == [f"{m}.gate_proj", f"{m}.up_proj"] and mlp.row.layer == f"{m}.down_proj"
    assert mlp.sharded == (f"{m}.act_fn", m)
    assert mlp.replicated == ("model.layers.0", "model.layers.0.post_attention_layernorm")  # sequence parallel's share


def test_megatron_pairs_of_a_plain_stack_and_heads_left_whole() -> None:
    # square Linears with ReLUs: each second one reads what the one before produced (row); the head has no partner;
    # a Linear followed by a norm before the next (BERT's head transform) is not split
    sq = [[64, 512], [512, 512], [512]]
    g = forward_calls(
        ("aten::linear", "MLP.body.0", sq),
        ("aten::relu", "MLP.body.1", [[64, 512]]),
        ("aten::linear", "MLP.body.2", sq),
        ("aten::relu", "MLP.body.3", [[64, 512]]),
        ("aten::linear", "MLP.body.4", sq),
        ("aten::relu", "MLP.body.5", [[64, 512]]),
        ("aten::linear", "MLP.body.6", sq),
        ("aten::linear", "MLP.head.transform", sq),
        ("aten::gelu", "MLP.head.act", [[64, 512]]),
        ("aten::layer_norm", "MLP.head.norm", [[64, 512]]),
        ("aten::linear", "MLP.head.decoder", [[64, 512], [1000, 512]]),
        ("aten::cross_entropy_loss", None, [[64, 1000], [64]]),
    )
    assert [([c.layer for c in p.columns], p.row.layer) for p in split_pairs(g)] == [
        (["MLP.body.0"], "MLP.body.2"),
        (["MLP.body.4"], "MLP.body.6"),
    ]


def test_megatron_pairs_of_a_block() -> None:
    (pair,) = split_pairs(mlp_block())
    assert pair.columns == (Linear("blk.mlp.fc1", 64, 1024, 4096),) and pair.row == Linear(
        "blk.mlp.fc2", 64, 4096, 1024
    )
    assert pair.sharded == ("blk.mlp.act",) and pair.replicated == ()


def test_tensor_parallel_by_hand() -> None:
    # tp = 2 on an H100 (no calibration: the GEMMs are priced by the fp32 roofline, compute-bound at these shapes):
    # every
    # GEMM of fc1 (out_features halved) and fc2 (in_features halved), forward and backward, takes half its time; gelu
    # 2 + 18 / 2 = 11. An all-reduce of fc2's output (64 x 1024 x 4 B = 262,144 B) after its forward and one of fc1's
    # input gradient (the same size) after its backward: 15 us + 2 x (1/2) x 262,144 B / 360 GB/s (nvlink4) = 15.728 us.
    # Its launch call (5 us: the graph launched no collective) follows fc2's on the CPU and delays the calls after it.
    #   K1 [12,62] K2 [62,73] K3 [73,123] AR [123,138.728] K4 [138.728,238.728] K5 [..,249.728] K6 [..,349.728]
    #   AR [349.728, 365.456]
    result = run(mlp_block(), "tensor_parallel", tp=2, link="nvlink4")
    assert result.baseline_us == 652.0
    ar = 15.0 + 262_144 / 360e3
    assert result.predicted_us == pytest.approx(12 + 50 + 11 + 50 + ar + 100 + 11 + 100 + ar)
    inserted = [a for _, a in result.graph.nodes(data=True) if a.get("collective") == "allreduce"]
    assert sorted(a["phase"] for a in inserted if a["kind"] == "comm") == ["backward", "forward"]
    assert all(a["bytes"] == 262_144 and a["duration"] == pytest.approx(ar) for a in inserted if a["kind"] == "comm")


def test_sequence_parallel_by_hand() -> None:
    # the same splits; each all-reduce becomes a reduce-scatter there and an all-gather before the column group's
    # forward and the row's backward: 4 x (15 + (1/2) x 262,144 B / 360 GB/s) = 4 x 15.364 us. The first all-gather's
    # launch call (5 us) comes before fc1's: it starts at 5 + 2, and fc1 after it.
    result = run(mlp_block(), "tensor_parallel", tp=2, link="nvlink4", sequence_parallel=True)
    half = 15.0 + 262_144 / 2 / 360e3
    assert result.predicted_us == pytest.approx(7 + 4 * half + 50 + 11 + 50 + 100 + 11 + 100)
    comm = sorted((a["start"], a["collective"]) for _, a in result.graph.nodes(data=True) if a["kind"] == "comm")
    assert [c for _, c in comm] == ["allgather", "reducescatter", "allgather", "reducescatter"]


def test_tensor_parallel_one_rank_changes_nothing() -> None:
    result = run(mlp_block(), "tensor_parallel", tp=1, link="nvlink4")
    assert result.predicted_us == result.baseline_us == 652.0


def test_tensor_parallel_needs_modules() -> None:
    g = mlp_block()
    for _, a in g.nodes(data=True):
        a.pop("layer")
    with pytest.raises(NotApplicable, match="modules"):
        run(g, "tensor_parallel", tp=2, link="nvlink4")


def test_tensor_parallel_on_a_recorded_gpu_transformer() -> None:
    # the H200 corpus's encoder (4 layers, hidden 1024, fp32: validation/traces/gpu): per layer and step, qkv -> out and
    # fc1 -> fc2 split; the GEMMs shrink by their model ratio (not by 2: small shards run less efficiently), and an
    # all-reduce after each row-parallel forward and each column group's backward, on the trace's NVLink
    trace = Path(__file__).resolve().parent.parent / "validation/traces/gpu/transformer/base/run1/rank0.json.xz"
    graph = build_graph(load_trace(trace))
    pairs = split_pairs(graph)
    steps = {p.step for p in pairs}
    assert len(pairs) == 8 * len(steps) and {p.row.layer.rsplit(".", 1)[1] for p in pairs} == {"out", "fc2"}
    result = run(graph, "tensor_parallel", tp=2)
    assert not result.script_warnings
    comm = [a for _, a in result.graph.nodes(data=True) if a["kind"] == "comm"]
    assert len(comm) == 2 * len(pairs) and {a["collective"] for a in comm} == {"allreduce"}
    before, after = result.baseline.gpu_time_by_class["gemm"], result.predicted.gpu_time_by_class["gemm"]
    assert 0.5 < after / before < 0.7
    assert result.baseline_us / 1.9 < result.predicted_us < result.baseline_us / 1.3


def layer_stack(blocks: int = 4, forward_us: float = 100.0, backward_us: float = 200.0) -> nx.DiGraph:
    """A CPU recording's step: `blocks` equal blocks (model.layers.N), one forward op each (an element-wise op: its
    time shrinks with the micro-batch linearly), then their backward ops in reverse, one thread, no framework time:
    blocks x (forward + backward) us."""
    g = nx.DiGraph()
    g.graph.update(measured_us=blocks * (forward_us + backward_us), delays=Delays(0.0, 0.0), steps=[])
    prev, t = None, 0.0
    calls = [("aten::gelu", "forward", b, forward_us) for b in range(blocks)]
    calls += [("GeluBackward0", "backward", b, backward_us) for b in reversed(range(blocks))]
    for i, (op, phase, b, us) in enumerate(calls):
        task = add_task(
            g,
            op,
            "cpu",
            CPU,
            us,
            start=t,
            step="s",
            phase=phase,
            layer=f"model.layers.{b}.act",
            op=op,
            top_op_id=i,
            shapes=[[64, 512], [512, 512]],
        )
        t += us
        if prev is not None:
            add_dependency(g, prev, task, "thread")
        prev = task
    return g


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_pipeline_bubble_by_hand(schedule: str) -> None:
    # 4 equal stages, 8 micro-batches, no fixed cost, free transfers: each stage's micro-batch takes 100/8 forward and
    # 200/8 backward; the step is (m + p - 1) x (f + b) = 11 x 37.5 = 412.5 us, whose bubble (p-1)/(m+p-1) = 3/11 is
    # what the schedule leaves idle: 300 us of work per stage
    result = run(layer_stack(), "pipeline_parallel", pp=4, micro_batches=8, schedule=schedule, link=1e9, kernel_fixed=0)
    assert result.baseline_us == 1200.0
    assert result.predicted_us == pytest.approx(412.5, rel=1e-6)
    assert 1 - 4 * 8 * 37.5 / (4 * result.predicted_us) == pytest.approx(3 / 11)
    tasks = [a for _, a in result.graph.nodes(data=True) if a.get("pipeline_pass")]
    assert len(tasks) == 4 * 8 * 2 and {a["thread"] for a in tasks} >= {"cpu:pipeline1/1", "cpu:pipeline3/1"}


def gpu_stack(call_us: float) -> nx.DiGraph:
    """A GPU trace's step: 2 blocks, each a forward kernel of 100 us then (in reverse) a backward one of 200 us, each
    launched by one call of `call_us` on the CPU (lag 2), on stream 7."""
    g = nx.DiGraph()
    g.graph.update(measured_us=0.0, delays=Delays(2.0, 0.0), device="NVIDIA H100 80GB HBM3", steps=[])
    specs = [("forward", 0, 100), ("forward", 1, 100), ("backward", 1, 200), ("backward", 0, 200)]
    launched(
        g,
        [
            ("aten::gelu", f"model.layers.{b}.act", [[64, 512]], "gelu_kernel", "elementwise", us, phase)
            for phase, b, us in specs
        ],
        call_us,
    )
    return g


def test_pipeline_on_a_gpu_trace_issues_every_micro_batch() -> None:
    # 2 stages, 2 micro-batches, 1F1B, free transfers, no fixed cost: a stage's micro-batch takes 100/2 forward and
    # 200/2 backward on its GPU, or the CPU time of issuing its kernels where that is longer (each micro-batch launches
    # them all): (m + p - 1) x (f + b) = 3 x 150 = 450 us with 10 us calls; with 300 us calls every micro-batch's
    # pass takes 300 us on its CPU: 3 x 600 = 1800 us, slower than the traced step (1402 us: the calls in turn)
    fast = run(gpu_stack(10.0), "pipeline_parallel", pp=2, micro_batches=2, link=1e9, kernel_fixed=0)
    assert (fast.baseline_us, fast.predicted_us) == (612.0, pytest.approx(450.0, rel=1e-6))
    slow = run(gpu_stack(300.0), "pipeline_parallel", pp=2, micro_batches=2, link=1e9, kernel_fixed=0)
    assert (slow.baseline_us, slow.predicted_us) == (1402.0, pytest.approx(1800.0, rel=1e-6))


def test_interleaved_pipeline_by_hand() -> None:
    # 4 equal blocks, 2 ranks, 2 micro-batches: 1F1B cuts 2 stages of 2 blocks (f 100, b 200 per micro-batch):
    # (m + p - 1) x (f + b) = 3 x 300 = 900 us. Interleaved with 2 chunks: 4 stages of one block, rank 0 holding the
    # 1st and 3rd (f 50, b 100): rank 0 F(0,0) [0,50] F(0,1) [50,100] F(2,0) [100,150] F(2,1) [150,200]; rank 1 F(1,0)
    # [50,100] F(1,1) [100,150] F(3,0) [150,200] B(3,0) [200,300] F(3,1) [300,350] B(3,1) [350,450]; rank 0 B(2,0)
    # [300,400] B(2,1) [450,550]; rank 1 B(1,0) [450,550] B(1,1) [550,650]; rank 0 B(0,0) [550,650] B(0,1) [650,750]:
    # the bubble (p - 1) x (f + b) / chunks
    flat = run(layer_stack(), "pipeline_parallel", pp=2, micro_batches=2, link=1e9, kernel_fixed=0)
    assert flat.predicted_us == pytest.approx(900.0, rel=1e-6)
    inter = run(
        layer_stack(),
        "pipeline_parallel",
        pp=2,
        micro_batches=2,
        schedule="interleaved",
        chunks=2,
        link=1e9,
        kernel_fixed=0,
    )
    assert inter.predicted_us == pytest.approx(750.0, rel=1e-6)
    rank0 = sorted((a["start"], a["stage"]) for _, a in inter.graph.nodes(data=True) if a.get("stage") in (0, 2))
    assert {a["thread"] for _, a in inter.graph.nodes(data=True) if a.get("stage") in (1, 3)} == {"cpu:pipeline1/1"}
    assert len(rank0) == 8


@pytest.mark.parametrize(
    ("script", "params", "says"),
    [
        ("tensor_parallel", {"tp": 2.5}, "tp must be a whole number"),
        ("tensor_parallel", {"element_bytes": 0}, "element_bytes must be > 0"),
        ("pipeline_parallel", {"pp": 0}, "whole numbers >= 1"),
        ("pipeline_parallel", {"pp": 50}, "50 pipeline stages for 4 blocks"),
        ("pipeline_parallel", {"cut": ["model.layers.9"]}, "cut: 1 block names"),
        ("pipeline_parallel", {"schedule": "zero-bubble"}, "schedule must be"),
        ("pipeline_parallel", {"chunks": 2}, "chunks > 1 needs the interleaved schedule"),
        ("pipeline_parallel", {"schedule": "interleaved", "chunks": 2, "micro_batches": 3}, "a multiple of pp"),
        ("pipeline_parallel", {"kernel_fixed": -1}, "kernel_fixed >= 0"),
    ],
)
def test_bad_parallel_params_say_what(script: str, params: dict[str, object], says: str) -> None:
    with pytest.raises(DaydreamError, match=says):
        run(layer_stack(), script, **params)


def test_parallel_transforms_compose_with_data_parallelism() -> None:
    # ddp first (its buckets read the traced backward pass), then tensor and pipeline parallelism: tensor parallelism's
    # collectives (blocking the compute stream) become a stage's work, ddp's all-reduces (on a stream of their own)
    # stay
    trace = Path(__file__).resolve().parent.parent / "validation/traces/gpu/transformer/base/run1/rank0.json.xz"
    graph = build_graph(load_trace(trace))
    alone = run(graph, "ddp", ranks=2)
    both = run_whatif(
        graph,
        [TRANSFORMS / f"{s}.whatif" for s in ("ddp", "tensor_parallel", "pipeline_parallel")],
        params={"ranks": 2, "tp": 2, "pp": 2},
    )
    buckets = [n for n, a in both.graph.nodes(data=True) if a["kind"] == "comm" and "DDP bucket" in a["name"]]
    assert len(buckets) == len([a for _, a in alone.graph.nodes(data=True) if a["kind"] == "comm"]) > 0
    assert not [a for _, a in both.graph.nodes(data=True) if a["name"].endswith("(tensor parallel)")]  # in the stages
    assert not both.script_warnings
