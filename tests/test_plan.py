"""The plan search (daydream.api.plan, `daydream plan`), the memory model it ranks by (daydream.graph.model_memory)
and a param given to one script of several (`-p ddp.link=...`): counts worked out by hand, the corpus's recorded
H200 transformer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from daydream.api.plan import Layout, PlanOptions, _scenario, layouts, plan
from daydream.api.whatif import run_whatif
from daydream.errors import DaydreamError, ScriptError
from daydream.graph import add_task, build_graph
from daydream.graph.model_memory import (
    WHOLE_MODEL,
    BlockMemory,
    ModelMemory,
    Parallelism,
    in_flight,
    model_memory,
    rank_memory,
)
from daydream.trace import load_trace

ROOT = Path(__file__).resolve().parent.parent
GPU_TRANSFORMER = ROOT / "validation/traces/gpu/transformer/base/run1/rank0.json.xz"  # 4 layers, hidden 1024, H200
CPU_MLP = ROOT / "validation/traces/base/run1/rank0.json.xz"  # examples/mlp.py: Linear + ReLU layers, Adam
T, H = 16 * 256, 1024  # the transformer's tokens a step and hidden size


@pytest.fixture(scope="module")
def transformer():  # type: ignore[no-untyped-def]
    return build_graph(load_trace(GPU_TRANSFORMER))


def test_model_memory_of_a_recorded_transformer(transformer) -> None:  # type: ignore[no-untyped-def]
    m = model_memory(transformer)
    assert m.optimizer == "Adam" and m.optimizer_states == 2
    assert [b.name for b in m.blocks] == ["Encoder.embed", *(f"Encoder.layers.{i}" for i in range(4)), "Encoder.head"]
    embed, layer, head = m.blocks[0], m.blocks[1], m.blocks[-1]
    # parameters, one per gradient: token (8192) and position (256) embeddings and a LayerNorm
    assert embed.parameters == 8192 * H + 256 * H + 2 * H and embed.split_parameters == 0
    # a layer: qkv (H x 3H + bias), out (H x H + bias), fc1 (H x 4H + bias), fc2 (4H x H + bias), two LayerNorms;
    # tensor parallelism splits the column Linears (qkv, fc1) whole, the rows' (out, fc2) weights
    qkv, out, fc1, fc2 = 3 * H * H + 3 * H, H * H + H, 4 * H * H + 4 * H, 4 * H * H + H
    assert layer.parameters == qkv + out + fc1 + fc2 + 4 * H
    assert layer.split_parameters == qkv + (out - H) + fc1 + (fc2 - H)
    assert head.parameters == H * H + H + 2 * H + 8192  # transform, norm, the decoder's bias (its weight tied)
    assert m.parameters == 60_097_536
    # a layer's activations in T x H: the qkv Linear's input 1, attention's q, k, v and output 4, out's input 1,
    # norm1 1, fc1 1, GELU 4, fc2 4, norm2 1 (residual adds and views keep none); sharded by tensor parallelism:
    # attention's, out's input, GELU's and fc2's
    assert layer.activations == 17 * T * H
    assert layer.sharded_activations == (4 + 1 + 4 + 4) * T * H


def test_ops_that_keep_their_output_are_counted_by_the_next_op() -> None:
    # examples/mlp.py: Linear, ReLU, Linear, ...: a ReLU keeps its output, which the next Linear keeps as its input -
    # one tensor (bench/bench_model_memory.py measures 0.66 MB kept for 0.66 MB estimated)
    m = model_memory(build_graph(load_trace(CPU_MLP)))
    linears = [b for b in m.blocks if b.parameters]
    relus = [b for b in m.blocks if not b.parameters and b.name.startswith("MLP.body")]
    assert relus and all(b.activations == 0 for b in relus)
    assert all(b.activations == 64 * 512 for b in linears[:4])  # batch 64 x width 512


def test_in_flight_micro_batches_by_schedule() -> None:
    # 1F1B: rank r runs pp - r forwards before its first backward; GPipe every micro-batch; interleaved (Megatron):
    # (pp - r - 1) x 2 + (chunks - 1) x pp warm-up virtual micro-batches, plus one
    assert [in_flight("1f1b", 4, 8, r) for r in range(4)] == [4, 3, 2, 1]
    assert [in_flight("1f1b", 4, 2, r) for r in range(4)] == [2, 2, 2, 1]
    assert [in_flight("gpipe", 4, 8, r) for r in range(4)] == [8] * 4
    assert [in_flight("interleaved", 4, 8, r, chunks=2) for r in range(4)] == [11, 9, 7, 5]
    with pytest.raises(DaydreamError, match="schedule 'zb'"):
        in_flight("zb", 4, 8, 0)


def test_rank_memory_by_hand() -> None:
    # two blocks: A (1,000 parameters, 600 split; 10,000 activation elements, 4,000 sharded), B (500, none split;
    # 2,000 activations); Adam (2 states), fp32
    model = ModelMemory((BlockMemory("A", 1000, 600, 10_000, 4000), BlockMemory("B", 500, 0, 2000, 0)), "Adam", 2)
    one = rank_memory(model, [["A", "B"]])[0]
    assert (one.parameters, one.gradients, one.optimizer, one.buckets) == (6000, 6000, 12000, 0)
    assert one.activations == 12_000 * 4 and one.total == 6000 * 4 + 48_000
    # tp 2, data parallel: A keeps 600 / 2 + 400 parameters; its sharded activations halve; DDP's buckets a copy
    tp = rank_memory(model, [["A", "B"]], Parallelism(tp=2, data_parallel=2))[0]
    assert tp.parameters == (300 + 400 + 500) * 4 and tp.buckets == tp.gradients
    assert tp.activations == (2000 + 6000 + 2000) * 4
    assert rank_memory(model, [["A", "B"]], Parallelism(tp=2, sequence_parallel=True))[0].activations == 6000 * 4
    # two stages, 4 micro-batches, 1F1B: rank 0 keeps 2 micro-batches of A's activations, rank 1 one of B's
    a, b = rank_memory(model, [["A"], ["B"]], Parallelism(micro_batches=4))
    assert (a.in_flight, a.activations, a.parameters) == (2, 10_000 * 4 * 2 / 4, 4000)
    assert (b.in_flight, b.activations) == (1, 2000 * 4 / 4)
    with pytest.raises(DaydreamError, match="blocks C: not among"):
        rank_memory(model, [["C"]])


def test_rank_memory_with_a_distributed_optimizer() -> None:
    # ZeRO over 4 data-parallel ranks: stage 1 shards Adam's state (no DDP buckets: the distributed optimizer's
    # gradient buffer is the gradients), stage 2 the gradients as well; the parameters stay whole
    model = ModelMemory((BlockMemory("A", 1000, 600, 10_000, 4000),), "Adam", 2)
    ddp, one, two = (rank_memory(model, [["A"]], Parallelism(data_parallel=4, zero=z))[0] for z in (0, 1, 2))
    assert (ddp.parameters, ddp.gradients, ddp.optimizer, ddp.buckets) == (4000, 4000, 8000, 4000)
    assert (one.parameters, one.gradients, one.optimizer, one.buckets) == (4000, 4000, 2000, 0)
    assert (two.parameters, two.gradients, two.optimizer, two.buckets) == (4000, 1000, 2000, 0)


def test_ddp_with_a_distributed_optimizer(transformer) -> None:  # type: ignore[no-untyped-def]
    # zero = 1: each bucket reduce-scattered (half a ring all-reduce's traffic), then after each step's optimizer the
    # step's gradient bytes all-gathered on the communication stream, nothing waiting for it
    from daydream.perf.collectives import collective_us

    step = transformer.graph["steps"][-1].name
    r = run_whatif(transformer, [ROOT / "transforms/ddp.whatif"], params={"ranks": 4, "link": "nvlink4", "zero": 1})
    comm = [(n, a) for n, a in r.graph.nodes(data=True) if a["kind"] == "comm" and a.get("step") == step]
    scattered = [a for _, a in comm if a["collective"] == "reducescatter"]
    ((gather_node, gather),) = [(n, a) for n, a in comm if a["collective"] == "allgather"]
    assert scattered and not [a for _, a in comm if a["collective"] == "allreduce"]
    link = "nvlink4"
    for a in scattered:
        assert a["duration"] == pytest.approx(collective_us("reducescatter", a["bytes"], 4, link))
    assert gather["bytes"] == sum(a["bytes"] for a in scattered) == 60_097_536 * 4
    assert gather["duration"] == pytest.approx(collective_us("allgather", gather["bytes"], 4, link))
    assert not [v for v in r.graph.successors(gather_node) if r.graph.nodes[v]["kind"] != "cpu"]  # nothing waits
    with pytest.raises(DaydreamError, match="zero must be 0, 1 or 2"):
        run_whatif(transformer, [ROOT / "transforms/ddp.whatif"], params={"ranks": 4, "zero": 3})


def test_layouts_for_64_gpus() -> None:
    # tp within a node of 8 (1, 2, 4, 8), pp up to the model's 6 blocks (1, 2, 4), dp the rest; micro-batches pp,
    # 2 pp, 4 pp for a pipeline: 4 x (1 + 3 + 3)
    found = layouts(64, PlanOptions(gpus=64), max_pp=6, can_split=True)
    assert len(found) == 28
    assert {(x.dp, x.tp, x.pp) for x in found} == {(64 // (t * p), t, p) for t in (1, 2, 4, 8) for p in (1, 2, 4)}
    assert sorted(x.micro_batches for x in found if (x.tp, x.pp) == (2, 4)) == [4, 8, 16]
    assert {x.tp for x in layouts(64, PlanOptions(gpus=64), 6, can_split=False)} == {1}  # nothing to split
    assert {x.tp for x in layouts(64, PlanOptions(gpus=64, max_tp=2, micro_batches=(8,)), 6, True)} == {1, 2}
    # 12 GPUs: tp 1, 2, 4 (3, 6 and 12 do not divide a node of 8); tp 1: pp 1, 2, 3, 4, 6 (1 + 4 x 3 plans), tp 2:
    # pp 1, 2, 3, 6 (1 + 3 x 3), tp 4: pp 1, 3 (1 + 3)
    assert len(layouts(12, PlanOptions(gpus=12), 6, True)) == 13 + 10 + 4


def test_layouts_under_a_fixed_global_batch() -> None:
    # 8 GPUs, 16 samples a step: dp 8, 4, 2, 1 give replicas of 2, 4, 8, 16 samples, cut into whole micro-batches
    options = PlanOptions(gpus=8, batch=16, global_batch=16, micro_batches=(4, 8))
    found = layouts(8, options, max_pp=6, can_split=True)
    assert all(16 % x.dp == 0 and (16 // x.dp) % x.micro_batches == 0 for x in found)
    assert (4, 1, 2, 4) in {(x.dp, x.tp, x.pp, x.micro_batches) for x in found}  # a replica of 4 in 4 micro-batches
    assert (4, 1, 2, 8) not in {(x.dp, x.tp, x.pp, x.micro_batches) for x in found}  # ... not in 8
    # 3 samples on 8 GPUs without tensor parallelism: dp 8, 4 or 2 - no whole replica batch
    assert not layouts(8, PlanOptions(gpus=8, batch=16, global_batch=3, max_tp=1), 6, True)
    assert [(x.dp, x.tp) for x in layouts(8, PlanOptions(gpus=8, batch=16, global_batch=3), 6, True)] == [(1, 8)]
    # a replica of 4 samples where the trace had 16: batch_size first, at a quarter
    s = _scenario(Layout(4, 1, 2, 4), options, on_gpu=True, share=0.5)
    assert s.scripts == ["batch_size", "ddp", "pipeline_parallel"] and s.params["batch_size.factor"] == 0.25
    assert _scenario(Layout(1, 2, 1, 1), options, True, 1.0).scripts == ["tensor_parallel"]  # the traced batch
    with pytest.raises(DaydreamError, match="--global-batch needs --batch"):
        plan(GPU_TRANSFORMER, PlanOptions(gpus=2, global_batch=32))


def test_a_plan_places_ranks_as_megatron_does() -> None:
    # 64 GPUs as dp 8 x tp 2 x pp 4: each data-parallel group has 8 / 2 = 4 ranks a node and reduces the largest
    # stage's share; the pipeline spans nodes, over the NIC
    s = _scenario(Layout(8, 2, 4, 8), PlanOptions(gpus=64), on_gpu=True, share=0.25)
    assert s.scripts == ["ddp", "tensor_parallel", "pipeline_parallel"] and s.name == "dp=8 tp=2 pp=4 m=8"
    assert s.params["ddp.gpus_per_node"] == 4 and s.params["ddp.share"] == 0.25 and s.params["ddp.ranks"] == 8
    assert s.params["pipeline_parallel.link"] == "ib-ndr" and s.params["tensor_parallel.link"] == "auto"
    # within one node, the pipeline's sends go over NVLink; a CPU recording's over gloo
    assert _scenario(Layout(1, 2, 4, 4), PlanOptions(gpus=8), True, 1.0).params["pipeline_parallel.link"] == "auto"
    assert (
        _scenario(Layout(1, 1, 2, 4), PlanOptions(gpus=2), False, 1.0).params["pipeline_parallel.link"] == "gloo-local"
    )
    assert _scenario(Layout(1, 1, 1, 1), PlanOptions(gpus=1), True, 1.0).scripts == ["ddp"]  # one GPU: unchanged


def test_a_param_given_to_one_script_of_several(transformer) -> None:  # type: ignore[no-untyped-def]
    # ddp.link binds ddp's link alone; tensor parallelism keeps its default
    scripts = [ROOT / "transforms/ddp.whatif", ROOT / "transforms/tensor_parallel.whatif"]
    r = run_whatif(transformer, scripts, params={"ranks": 2, "tp": 2, "ddp.link": "pcie4"})
    assert r.report.params_text["link"] == "pcie4 (ddp), auto (tensor_parallel)"
    # (the Python API's params: its errors name them so, not the command line's -p)
    with pytest.raises(ScriptError, match=r"unknown parameter amp\.link .params.*each also as SCRIPT\.NAME"):
        run_whatif(transformer, scripts, params={"amp.link": "pcie4"})
    with pytest.raises(DaydreamError, match=r"unknown link 'pcieX'.*from params\['ddp\.link'\] = 'pcieX'"):
        run_whatif(transformer, scripts, params={"ranks": 2, "ddp.link": "pcieX"})


def test_ddp_share_reduces_a_part_of_each_bucket(transformer) -> None:  # type: ignore[no-untyped-def]
    step = transformer.graph["steps"][-1].name  # (the graph holds the step before it too, as its context)

    def bucket_bytes(share: float) -> float:
        r = run_whatif(transformer, [ROOT / "transforms/ddp.whatif"], params={"ranks": 8, "share": share})
        return sum(a["bytes"] for _, a in r.graph.nodes(data=True) if "DDP bucket" in a["name"] and a["step"] == step)

    assert bucket_bytes(1) == 60_097_536 * 4
    assert bucket_bytes(0.25) == pytest.approx(60_097_536)


def test_ddp_share_on_a_trace_with_collectives(shared_traces: Path) -> None:
    # param/dlrm8's rank 0 (a DDP job): its all-reduces (gradients) carry the share of their bytes, its all-to-alls
    # (embedding lookups) all of theirs
    graph = build_graph(load_trace(shared_traces / "param" / "dlrm8" / "rank0.json.gz"))

    def sizes(share: float) -> dict[str, float]:
        r = run_whatif(graph, [ROOT / "transforms/ddp.whatif"], params={"ranks": 16, "share": share})
        out: dict[str, float] = {}
        for _, a in r.graph.nodes(data=True):
            if a["kind"] == "comm" and a.get("bytes") is not None:
                out[a["collective"]] = out.get(a["collective"], 0.0) + a["bytes"]
        return out

    whole, part = sizes(1), sizes(0.25)
    assert whole["allreduce"] > 0 and part["allreduce"] == pytest.approx(whole["allreduce"] / 4)
    assert part["alltoall"] == whole["alltoall"] > 0


def test_plan_on_a_recorded_transformer() -> None:
    # 4 GPUs of 1 GiB: every plan of (dp, tp, pp) with pp <= 6 blocks and 4 micro-batches, each predicted as its
    # scripts predict it alone; ranked by throughput among those that fit
    result = plan(GPU_TRANSFORMER, PlanOptions(gpus=4, memory_gb=1.0, micro_batches=(4,)))
    names = {p.name for p in result.plans}
    assert names == {
        "dp=4 tp=1 pp=1",
        "dp=2 tp=2 pp=1",
        "dp=1 tp=4 pp=1",
        "dp=2 tp=1 pp=2 m=4",
        "dp=1 tp=2 pp=2 m=4",
        "dp=1 tp=1 pp=4 m=4",
    }
    by = {p.name: p for p in result.plans}
    dp = by["dp=4 tp=1 pp=1"]
    alone = run_whatif(
        build_graph(load_trace(GPU_TRANSFORMER)),
        [ROOT / "transforms/ddp.whatif"],
        params={"ranks": 4, "link": "auto", "gpus_per_node": 8, "share": 1.0},
    )
    assert dp.predicted_us == pytest.approx(alone.predicted_us)
    assert dp.throughput == pytest.approx(4 * result.baseline_us / dp.predicted_us)
    # 60.1 M parameters x (4 + 4 + 8 + 4: DDP's buckets) bytes = 1.12 GiB, plus the step's activations: no fit
    assert dp.memory_bytes == pytest.approx(60_097_536 * 20 + 339_738_624 * 4) and dp.fits is False
    fitting = [p for p in result.plans if p.fits]
    assert fitting and all(p.memory_bytes <= 2**30 for p in fitting)
    assert [p.throughput for p in fitting] == sorted((p.throughput for p in fitting), reverse=True)
    assert result.plans[: len(fitting)] == fitting and result.best is fitting[0] and fitting[0].rank == 1
    from daydream.perf.trust.uncertainty import decided

    def per_sample(p):  # type: ignore[no-untyped-def]
        return 1 / p.throughput, p.interval.parts

    for p in fitting:  # a place counts the plans decidedly ahead: their paired difference in time per sample
        assert p.rank == 1 + sum(
            1 for o in fitting if o.throughput > p.throughput and decided(*per_sample(o), *per_sample(p))
        )
        assert p.ties == [o.name for o in fitting if o is not p and not decided(*per_sample(o), *per_sample(p))]


def test_plan_under_a_fixed_global_batch() -> None:
    # the transformer's 16 samples a step kept on 2 GPUs: data parallelism gives each replica 8 (batch_size at a half,
    # its activations halved); throughput = the plan's samples over the trace's x the trace's step over the plan's
    result = plan(GPU_TRANSFORMER, PlanOptions(gpus=2, batch=16, global_batch=16, micro_batches=(2,)))
    by = {p.name: p for p in result.plans}
    dp, tp = by["dp=2 tp=1 pp=1"], by["dp=1 tp=2 pp=1"]
    assert dp.scripts == ["batch_size", "ddp"] and dp.params["batch_size.factor"] == 0.5
    assert dp.throughput == pytest.approx(result.baseline_us / dp.predicted_us)  # 2 replicas x half the samples
    assert tp.throughput == pytest.approx(result.baseline_us / tp.predicted_us)
    assert dp.memory[0].activations == pytest.approx(339_738_624 * 4 / 2)
    assert result.global_batch == 16 and result.batch == 16


def test_a_trace_without_modules_is_one_block_and_needs_gradient_sizes() -> None:
    g = nx.DiGraph()
    g.graph.update(steps=[])
    add_task(
        g,
        "aten::linear",
        "cpu",
        "cpu:1/1",
        10.0,
        start=0.0,
        phase="forward",
        op="aten::linear",
        shapes=[[64, 512], [256, 512], [256]],
        top_op_id=1,
    )
    add_task(
        g,
        "AccumulateGrad",
        "cpu",
        "cpu:1/1",
        5.0,
        start=20.0,
        phase="backward",
        op="AccumulateGrad",
        shapes=[[256, 512]],
        top_op_id=2,
    )
    m = model_memory(g)
    assert [(b.name, b.parameters, b.activations) for b in m.blocks] == [(WHOLE_MODEL, 256 * 512, 64 * 512)]
    assert m.optimizer is None and m.optimizer_states == 0  # no optimizer step in the trace
    g.remove_node(next(n for n, a in g.nodes(data=True) if a["name"] == "AccumulateGrad"))
    with pytest.raises(DaydreamError, match="parameter sizes: the graph has no gradients"):
        model_memory(g)
    with pytest.raises(DaydreamError, match="--gpus 0: give 1 to"):
        plan(GPU_TRANSFORMER, PlanOptions(gpus=0))
    with pytest.raises(DaydreamError, match="--memory-gb nan: a size in GiB above 0"):
        plan(GPU_TRANSFORMER, PlanOptions(gpus=2, memory_gb=float("nan")))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daydream", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_plan_from_the_cli() -> None:
    # a job's folder (here of one rank): planned from its first rank
    out = _cli("plan", str(GPU_TRANSFORMER.parent), "--gpus", "2", "--micro-batches", "2", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (
        doc["trace"] == str(GPU_TRANSFORMER) and "a job: planned from its first rank, rank0.json.xz" in doc["notes"][0]
    )
    assert {p["name"] for p in doc["plans"]} == {"dp=2 tp=1 pp=1", "dp=1 tp=2 pp=1", "dp=1 tp=1 pp=2 m=2"}
    assert doc["memory_bytes"] == 150_109_880_320 and all(p["fits"] for p in doc["plans"])  # the H200's, from the trace
    table = _cli("plan", str(GPU_TRANSFORMER), "--gpus", "2", "--micro-batches", "2", "--memory-gb", "1.5")
    assert table.returncode == 0 and "Plans by throughput" in table.stdout and "no fit" in table.stdout
    # the pipeline of 2 micro-batches lies beyond the ledger's pipeline case (4): its interval widened, and said
    assert [p["name"] for p in doc["plans"] if p["interval"]["extrapolated"]] == ["dp=1 tp=1 pp=2 m=2"]
    assert "extrapolated (a script or param the validation ledger never measured; the interval widened)" in table.stdout
    assert "best: dp=1 tp=2 pp=1" in table.stdout or "best: dp=1 tp=1 pp=2" in table.stdout
    bad = _cli("plan", str(GPU_TRANSFORMER), "--gpus", "2", "--micro-batches", "two")
    assert (
        bad.returncode == 1 and "--micro-batches 'two': whole numbers" in bad.stderr and "Traceback" not in bad.stderr
    )


@pytest.mark.parametrize(
    ("trace", "source", "parameters"),
    [
        # DDP ResNet-50, rank 0 of 2, no shapes: its traced all-reduces' bytes, ResNet-50's parameters exactly
        ("hta/nccl_parser_config_nccl_data.json.gz", "collectives", 25_557_032),
        # a ResNet-18 without shapes or collectives: 227 chunks of its SGD's foreach kernels over 62 tensors
        ("param/resnet_kineto.json.gz", "optimizer kernels", (227 - 31) * 65536),
    ],
)
def test_plan_on_a_trace_without_recorded_gradient_sizes(
    shared_traces: Path, trace: str, source: str, parameters: int
) -> None:
    """The sizes estimated (daydream.graph.gradients) and said: in --json's gradient_sizes and a note, in the text."""
    path = str(shared_traces / trace)
    out = _cli("plan", path, "--gpus", "16", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["gradient_sizes"] == source and doc["parameters"] == pytest.approx(parameters, abs=62)
    assert any(
        n.startswith("the parameters and the plans' memory rest on gradient sizes estimated from") for n in doc["notes"]
    )
    assert doc["plans"][0]["name"] == "dp=16 tp=1 pp=1" and doc["plans"][0]["predicted_us"] > 0
    text = _cli("plan", path, "--gpus", "16")
    assert text.returncode == 0, text.stderr
    assert (
        f"parameters (estimated from {source})" in text.stdout
        and "note: the parameters and the plans' memory" in text.stdout
    )
    assert "best: dp=16 tp=1 pp=1" in text.stdout


def test_recorded_gradient_sizes_are_said_as_recorded(transformer) -> None:  # type: ignore[no-untyped-def]
    assert model_memory(transformer).sizes.source == "shapes" and not model_memory(transformer).sizes.estimated
