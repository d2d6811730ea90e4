"""The bundled transforms (transforms/*.whatif): hand-built graphs with times worked out by hand, and real traces
for direction and magnitude."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
from whatif_graph import CPU, S7, backward, iteration

from daydream.api.demo import bundled_example
from daydream.api.whatif import run_whatif, whatif
from daydream.commands.cli import main
from daydream.dsl.library import describe_scripts, library_dirs
from daydream.errors import DaydreamError
from daydream.graph import add_dependency, add_task, build_graph
from daydream.graph.edit import check_threads
from daydream.graph.schema import Delays
from daydream.perf.kernels.roofline import kernel_dtype
from daydream.trace import load_trace

TRANSFORMS = Path(__file__).resolve().parent.parent / "transforms"


def chain(*specs: tuple[str, str, float, dict[str, object]]) -> nx.DiGraph:
    """One CPU thread launching one kernel per spec on stream 7 (launch calls 10 us, lag 2)."""
    g = nx.DiGraph()
    g.graph.update(measured_us=0.0, delays=Delays(2.0, 0.0))
    prev_call = prev_kernel = None
    for i, (name, cls, dur, attrs) in enumerate(specs):
        call = add_task(g, "cudaLaunchKernel", "cpu", CPU, 10, start=10.0 * i, phase="forward")
        k = add_task(g, name, "gpu", S7, dur, start=12.0 + 10 * i, phase="forward", **{"class": cls, **attrs})
        add_dependency(g, call, k, "launch", lag=2)
        if prev_call is not None:
            add_dependency(g, prev_call, call, "thread")
            add_dependency(g, prev_kernel, k, "stream")
        prev_call, prev_kernel = call, k
    return g


def predict(graph: nx.DiGraph, script: str, **params: object) -> tuple[float, float]:
    result = run_whatif(graph, [TRANSFORMS / f"{script}.whatif"], params=params or None)
    check_threads(result.graph)
    assert nx.is_directed_acyclic_graph(result.graph)
    return result.baseline_us, result.predicted_us


def test_every_script_is_listed_with_a_docstring_and_checks() -> None:
    scripts = describe_scripts([str(TRANSFORMS)])
    assert {s.name for s in scripts} >= {"amp", "bn_restructure", "cuda_graphs", "dataloader", "fused_optimizer", "ddp"}
    for s in scripts:
        assert s.summary and s.params, s.name
    assert [str(p) for p in library_dirs()] and (library_dirs()[0] / "amp.whatif").is_file()


def test_amp_by_hand() -> None:
    # gemms /3 (100 -> 33.3, 200 -> 66.7), relu and adam /2, the all-reduce unchanged:
    # K1 [12, 45.3], relu [45.3, 55.3], K3 [55.3, 122], allreduce [122, 172], adam [172, 187], sync [187, 190]
    assert predict(iteration(), "amp") == (415.0, pytest.approx(190.0))


def test_bn_restructure_by_hand() -> None:
    g = chain(("conv_fwd", "conv", 100, {}), ("batch_norm_fwd", "norm", 40, {}), ("relu_kernel", "elementwise", 20, {}))
    # baseline conv [12,112] bn [112,152] relu [152,172]; the relu and its launch go, bn takes 20: [112,132]
    assert predict(g, "bn_restructure") == (172.0, 132.0)


def test_cuda_graphs_by_hand() -> None:
    g = chain(("k1", "gemm", 5, {}), ("k2", "gemm", 5, {}), ("k3", "gemm", 5, {}))
    # baseline: launches [0,10] [10,20] [20,30], kernels [12,17] [22,27] [32,37] -> 37. Captured: one 10 us graph
    # launch, the three calls take no time and the kernels follow it: [12,17] [17,22] [22,27] -> 27
    assert predict(g, "cuda_graphs") == (37.0, 27.0)
    assert predict(iteration(), "cuda_graphs") == (415.0, 415.0)  # GPU-bound: CPU savings are hidden


def test_dataloader_by_hand() -> None:
    g = chain(("k1", "gemm", 50, {}))
    first = next(iter(g.nodes))
    loader = add_task(
        g, "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "dataloader", CPU, 100, gap=10, start=-110.0
    )
    add_dependency(g, loader, first, "thread")
    # baseline: load [0,100], gap 10, launch [110,120], k1 [122,172]; 4x: load [0,25], gap 2.5, launch [27.5,37.5], k1
    # [39.5,89.5]
    assert predict(g, "dataloader") == (172.0, 89.5)
    assert predict(g, "dataloader", speedup=1) == (172.0, 172.0)


GPU_ONLY = {"amp", "cuda_graphs", "fae", "gist", "vdnn"}
JOB_ONLY = {"straggler", "sharding"}  # a folder of rank traces (tests/test_multirank.py)


@pytest.mark.parametrize("script", sorted(p.stem for p in TRANSFORMS.glob("*.whatif")))
def test_every_script_runs_on_the_bundled_example_from_the_cli(script: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", bundled_example(), script, "--json"])
    if script in GPU_ONLY and bundled_example().endswith("_cpu.json.gz"):
        # a CPU recording: the scripts about GPU kernels say so instead of predicting "no change"
        assert code == 3 and "the trace has no GPU kernels (recorded on the CPU)" in capsys.readouterr().err
        return
    if script in JOB_ONLY:
        assert code == 3 and "a multi-rank job only" in capsys.readouterr().err
        return
    assert code == 0
    d = json.loads(capsys.readouterr().out)
    assert d["predicted_us"] > 0 and d["baseline_us"] == pytest.approx(d["measured_us"])


def test_the_cli_runs_a_bundled_script_by_name() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "daydream", "run", bundled_example(), "batch_size", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["scripts"][0].endswith("batch_size.whatif")


def test_amp_on_a_real_trace_speeds_up_less_than_its_compute_factor(shared_traces: Path) -> None:
    # DDP ResNet-50 on an A100, as profiled: in its steady state the CPU issues the next step only 20 ms before the
    # GPU ends the last (CPU-bound): faster kernels leave the step as it was
    r = whatif(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz", ["amp"])
    factor = 312 / 19.5  # the A100's bf16 tensor peak over its fp32 peak, from the device catalog
    assert r.speedup == pytest.approx(1.0, abs=1e-4)
    assert r.predicted.gpu_time_by_class["gemm"] == pytest.approx(r.baseline.gpu_time_by_class["gemm"] / factor)
    # ResNet on a 2080 Ti, GPU-bound (the CPU runs a step ahead): the kernels' saving is the step's, short of the factor
    r = whatif(shared_traces / "param" / "resnet_kineto.json.gz", ["amp"])
    assert 1.5 < r.speedup < r.baseline.gpu_time_by_class["gemm"] / r.predicted.gpu_time_by_class["gemm"]


def test_cuda_graphs_on_a_real_trace_helps_a_launch_bound_iteration(shared_traces: Path) -> None:
    r = whatif(shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz", ["cuda_graphs"])
    assert r.speedup > 1.0
    # the GPU still has all its work: the prediction cannot beat the GPU's busy time
    assert r.predicted_us >= r.predicted.breakdown["gpu_only_us"] + r.predicted.breakdown["cpu_gpu_overlap_us"] - 1e-6


def test_bn_restructure_on_a_real_cnn(shared_traces: Path) -> None:
    r = whatif(shared_traces / "param" / "resnet_kineto.json.gz", ["bn_restructure"])
    norm = r.baseline.gpu_time_by_class["norm"]
    assert r.predicted.gpu_time_by_class["norm"] < norm and r.speedup >= 1.0


def test_a_negative_gap_the_trace_shows_stays_when_gaps_are_scaled() -> None:
    """Kineto's runtime calls and ops come from two clocks: a call may end after the next one on its thread began
    (param/dlrm8's rank 0: a cudaStreamSynchronize 7 us past the next op's start). The graph keeps that overlap as a
    negative gap (replay stays exact); the scripts that scale gaps leave it as it is instead of refusing."""
    g = chain(("k0", "gemm", 50, {}), ("k1", "gemm", 50, {}))
    first_call = next(n for n, a in g.nodes(data=True) if a["kind"] == "cpu")
    g.nodes[first_call]["gap"] = -4.0
    # baseline: call0 [0,10], call1 [6,16], k0 [12,62], k1 [62,112]; k = 2: call0 [0,20], call1 [16,36],
    # k0 [22,122], k1 [122,222] (the overlap is not doubled)
    assert predict(g, "grad_accumulation", k=2) == (112.0, 222.0)


def test_fused_optimizer_by_hand() -> None:
    step, zero = (
        {"region": "Optimizer.step#Adam.step", "step": "s"},
        {"region": "Optimizer.zero_grad#Adam.zero_grad", "step": "s"},
    )
    g = chain(
        ("zero", "elementwise", 5, zero),
        ("gemm", "gemm", 100, {"step": "s"}),
        ("adam1", "optimizer", 10, step),
        ("adam2", "optimizer", 10, step),
        ("adam3", "optimizer", 10, step),
    )
    # baseline: zero [12,17], gemm [22,122], adam [122,132] [132,142] [142,152] -> 152.
    # fused: max(30 - 2 * 2us, 10) = 26 us; its launch call [20,30] follows the gemm's (the three calls go), so the
    # kernel waits for the gemm: [122,148]. zero_grad's kernel is not part of the step and stays.
    result = run_whatif(g, [TRANSFORMS / "fused_optimizer.whatif"])
    assert (result.baseline_us, result.predicted_us) == (152.0, 148.0)
    names = sorted(a["name"] for _, a in result.graph.nodes(data=True) if a["kind"] == "gpu")
    assert names == ["fused_optimizer_step", "gemm", "zero"]
    assert predict(g, "fused_optimizer", kernel_overhead=0) == (152.0, 152.0)  # bytes-bound and GPU-bound: no gain


def test_fused_optimizer_on_a_real_trace_makes_one_kernel_per_step(shared_traces: Path) -> None:
    path = shared_traces / "param" / "linear_kineto.json.gz"
    graph = build_graph(load_trace(path), "all")
    r = run_whatif(graph, ["fused_optimizer"])
    before = [
        a for _, a in graph.nodes(data=True) if a["kind"] == "gpu" and (a["region"] or "").startswith("Optimizer.step")
    ]
    after = [
        a
        for _, a in r.graph.nodes(data=True)
        if a["kind"] == "gpu" and (a["region"] or "").startswith("Optimizer.step")
    ]
    steps = {a["step"] for a in before}
    assert len(steps) == 40 and len(before) > len(steps)
    assert sorted(a["step"] for a in after) == sorted(steps) and {a["name"] for a in after} == {"fused_optimizer_step"}
    assert 1.0 < r.speedup < 1.5
    one = whatif(path, ["fused_optimizer"])  # the default: one steady-state iteration
    assert 1.0 < one.speedup < 1.5


def test_fused_optimizer_on_a_cpu_recording_by_hand() -> None:
    # Two parameters' for-loop Adam ops (mul_, sqrt) on one thread, each with framework time after it.
    g = nx.DiGraph()
    g.graph.update(measured_us=0.0, delays=Delays())
    step = {"region": "Optimizer.step#Adam.step", "step": "s", "phase": "optimizer"}
    specs = [("aten::mul_", 10, 4), ("aten::sqrt", 20, 4), ("aten::mul_", 30, 4), ("aten::sqrt", 40, 4)]
    prev = add_task(g, "aten::linear", "cpu", CPU, 100, gap=5, start=0.0, phase="forward", step="s")
    for name, dur, gap in specs:
        task = add_task(g, name, "cpu", CPU, dur, gap=gap, start=0.0, **step)
        add_dependency(g, prev, task, "thread")
        prev = task
    # baseline: 100 + 5 + (10 + 20 + 30 + 40) + 3 * 4 = 217 (the last gap ends nothing).
    # One op per name, at the place of the last: mul_ 40, sqrt 60; the two removed ops take their gaps along:
    # 105 + 40 + 4 + 60 = 209.
    result = run_whatif(g, [TRANSFORMS / "fused_optimizer.whatif"])
    assert (result.baseline_us, result.predicted_us) == (217.0, 209.0)
    ops = sorted((a["name"], a["duration"]) for _, a in result.graph.nodes(data=True) if a.get("phase") == "optimizer")
    assert ops == [("aten::mul_", 40.0), ("aten::sqrt", 60.0)]


def test_fused_optimizer_on_a_cpu_recording_adds_adagrads_foreach_pass() -> None:
    # torch's foreach Adagrad scales the gradients into new tensors (`_foreach_mul`), a pass its for-loop folds into
    # addcdiv_: the same two parameters' ops under an Adagrad step gain one `aten::mul` of the step's sqrt time.
    def step_graph(optimizer: str) -> nx.DiGraph:
        g = nx.DiGraph()
        g.graph.update(measured_us=0.0, delays=Delays())
        step = {"region": f"Optimizer.step#{optimizer}.step", "step": "s", "phase": "optimizer"}
        prev = add_task(g, "aten::linear", "cpu", CPU, 100, gap=5, start=0.0, phase="forward", step="s")
        for name, dur, gap in [
            ("aten::addcmul_", 10, 4),
            ("aten::sqrt", 20, 4),
            ("aten::addcmul_", 30, 4),
            ("aten::sqrt", 40, 4),
        ]:
            task = add_task(g, name, "cpu", CPU, dur, gap=gap, start=0.0, **step)
            add_dependency(g, prev, task, "thread")
            prev = task
        return g

    # as the Adam test above: 217 -> 209; Adagrad adds the mul, 20 + 40 = 60 us: 269.
    assert predict(step_graph("Adam"), "fused_optimizer") == (217.0, 209.0)
    result = run_whatif(step_graph("Adagrad"), [TRANSFORMS / "fused_optimizer.whatif"])
    assert (result.baseline_us, result.predicted_us) == (217.0, 269.0)
    ops = sorted(
        (a["name"], a["duration"], a["phase"])
        for _, a in result.graph.nodes(data=True)
        if a.get("phase") == "optimizer"
    )
    assert ops == [
        ("aten::addcmul_", 40.0, "optimizer"),
        ("aten::mul", 60.0, "optimizer"),
        ("aten::sqrt", 60.0, "optimizer"),
    ]


def test_fused_optimizer_kind_fused_on_a_cpu_recording_by_hand() -> None:
    # torch's fused CPU kernel (fused=True): the for-loop step's ops become one op priced by
    # daydream.perf.cpu.optimizer_step (the ops of tests/test_perf_optimizer_step.py: 70 us).
    from test_perf_optimizer_step import ADAM_LOOP

    g = nx.DiGraph()
    g.graph.update(measured_us=0.0, delays=Delays())
    step = {"region": "Optimizer.step#Adam.step", "step": "s", "phase": "optimizer"}
    prev = add_task(g, "aten::linear", "cpu", CPU, 100, gap=5, start=0.0, phase="forward", step="s")
    for name, shapes, dur in ADAM_LOOP:
        task = add_task(g, name, "cpu", CPU, dur, gap=4, start=0.0, shapes=shapes, **step)
        add_dependency(g, prev, task, "thread")
        prev = task
    # baseline: 105 + 235 of ops + 7 gaps of 4 = 368; fused: the step's ops and their framework time go, 105 + 70.
    result = run_whatif(g, [TRANSFORMS / "fused_optimizer.whatif"], params={"kind": "fused"})
    assert (result.baseline_us, result.predicted_us) == (368.0, 175.0)
    ops = [(a["name"], a["duration"]) for _, a in result.graph.nodes(data=True) if a.get("phase") == "optimizer"]
    assert ops == [("fused_optimizer_step", 70.0)]
    with pytest.raises(DaydreamError, match="kind is"):
        run_whatif(g, [TRANSFORMS / "fused_optimizer.whatif"], params={"kind": "fuse"})


def test_fused_optimizer_foreach_on_a_gpu_trace_is_refused() -> None:
    step = {"region": "Optimizer.step#Adam.step", "step": "s"}
    g = chain(("gemm", "gemm", 100, {"step": "s"}), ("adam1", "optimizer", 10, step))
    with pytest.raises(DaydreamError, match="foreach.*GPU trace is not modelled"):
        run_whatif(g, [TRANSFORMS / "fused_optimizer.whatif"], params={"kind": "foreach"})


def test_fused_optimizer_on_a_cpu_recording(tmp_path: Path) -> None:
    # The bundled example was recorded on the CPU with a for-loop optimizer: every step keeps one op per name, the
    # step's op time is kept and the framework time between the removed ops goes.
    graph = build_graph(load_trace(bundled_example()), "all")
    r = run_whatif(graph, ["fused_optimizer"])

    def opt(g: nx.DiGraph) -> list[dict]:
        return [
            a for _, a in g.nodes(data=True) if a["kind"] == "cpu" and (a["region"] or "").startswith("Optimizer.step")
        ]

    before, after = opt(graph), opt(r.graph)
    assert len(after) < len(before)
    assert len({(a["step"], a["name"]) for a in after}) == len(after) == len({(a["step"], a["name"]) for a in before})
    assert sum(a["duration"] for a in after) == pytest.approx(sum(a["duration"] for a in before))
    assert sum(a["gap"] for a in after) < sum(a["gap"] for a in before)
    assert r.predicted_us < r.baseline_us


def test_ddp_by_hand() -> None:
    g, _ = backward(optimizer=True)
    # baseline: K1 [12,62], KA1 [62,112], K2 [112,162], the optimizer kernel KO [162,212] -> 212.
    # Buckets: the 2 MiB gradient closes the first (>= 1 MiB), ready when KA1 ends; the 4 KiB + 768 KiB ones the
    # second, ready when K2 ends (A2 and A3 launch nothing). On 2 ranks over 1 GB/s (1e3 bytes/us, no latency) an
    # all-reduce takes 2(2-1)/2 x bytes / 1e3: 2097.152 us and 790.528 us. They run on stream 1000 one after the
    # other: [112, 2209.152], [2209.152, 2999.68]; the optimizer kernel waits for the second: [2999.68, 3049.68].
    # (The two comm launch calls, 5 us each, only delay the CPU, which is ahead.)
    assert predict(g, "ddp", ranks=2, link=1) == (212.0, pytest.approx(3049.68))
    assert predict(g, "ddp", ranks=1) == (212.0, 212.0)
    # 8 ranks over NVLink3 (240 GB/s bus, 15 us latency): 15 + 1.75 x bytes / 240e3 -> 30.29 us and 20.76 us, hidden
    # behind the backward pass but for the second, which ends at 162 + 20.76 + ... after the first [112, 142.29]:
    # [162, 182.76]; KO [182.76, 232.76]
    assert predict(g, "ddp")[1] == pytest.approx(162 + 15 + 1.75 * 790528 / 240e3 + 50)


def test_ddp_on_a_real_trace_grows_as_bandwidth_falls(shared_traces: Path) -> None:
    path = shared_traces / "param" / "linear_kineto.json.gz"
    graph = build_graph(load_trace(path, et=shared_traces / "param" / "linear_et.json.gz"), 1)  # the step of the ET
    one = run_whatif(graph, ["ddp"], params={"ranks": 1})
    assert one.predicted_us == one.baseline_us
    times = [
        run_whatif(graph, ["ddp"], params={"link": f'"{link}"'}).predicted_us
        for link in ["nvlink3", "pcie4", "eth-25g", "eth-10g"]
    ]
    # slower links, longer steps: within 1% at the fast end, where the all-reduces hide under the backward pass and
    # the two-step window's ends (the context step's, the step's) move by about as much as each other
    assert (
        all(b >= 0.99 * a for a, b in zip(times, times[1:]))
        and times[-1] > 2 * times[0]
        and times[0] >= one.baseline_us
    )
    # 21 x 4 MiB of fp32 gradients over 10 GbE: the all-reduces (~128 ms) dominate the 16.9 ms iteration
    assert times[-1] > 5 * one.baseline_us
    r = run_whatif(graph, ["ddp"])
    # per step, the measured one and its context (whose gradients take the ET-covered step's sizes, in ready order)
    for step in ("iteration#0", "iteration#1"):
        added = [
            a for _, a in r.graph.nodes(data=True) if a["name"] == "ncclAllReduce (DDP bucket)" and a["step"] == step
        ]
        assert len(added) == 4 and sum(a["bytes"] for a in added) == 21 * (4 * 2**20 + 4096)


def test_amp_takes_its_compute_factor_from_the_device_catalog() -> None:
    g = chain(("gemm", "gemm", 160, {}), ("relu", "elementwise", 20, {}))
    g.graph["device"] = "NVIDIA A100-SXM4-40GB"
    # A100: bf16 tensor peak 312 / fp32 19.5 = 16: gemm [12,172] -> [12,22]; relu / 2 -> [22,32] (its launch [10,20])
    assert predict(g, "amp") == (192.0, 32.0)
    assert predict(g, "amp", compute_speedup=4) == (192.0, 62.0)  # given: 160 / 4 = 40 -> [12,52], relu [52,62]


def test_device_swap_by_hand() -> None:
    g = chain(("gemm", "gemm", 134, {}), ("relu", "elementwise", 67, {}))
    g.graph["device"] = "NVIDIA A100-SXM4-40GB"
    # to H100 SXM: gemm by fp32 peaks 67 / 19.5, relu by HBM 3350 / 1555 GB/s
    gemm, relu = 134 / (67 / 19.5), 67 / (3350 / 1555)
    assert predict(g, "device", device="h100") == (213.0, pytest.approx(12 + gemm + relu))
    # to a T4 the same kernels take longer
    assert predict(g, "device", device="t4")[1] == pytest.approx(12 + 134 / (8.1 / 19.5) + 67 / (320 / 1555))
    with pytest.raises(Exception, match="unknown device 'h900'"):
        predict(g, "device", device="h900")


def test_network_by_hand() -> None:
    # the all-reduce (4 MB) on 8 ranks over 100 GB/s of bus bandwidth: 2 x 7/8 x 4e6 / 1e5 = 70 us (traced: 50):
    # [332, 402], adam [402, 432], the sync [432, 435]
    assert predict(iteration(), "network", link=100, ranks=8) == (415.0, pytest.approx(435.0))
    # the graph has no distributed info: one rank, nothing to exchange, the all-reduce takes no time
    assert predict(iteration(), "network") == (415.0, pytest.approx(365.0))


def test_device_and_network_on_a_real_trace(shared_traces: Path) -> None:
    path = shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz"
    graph = build_graph(load_trace(path))
    faster = run_whatif(graph, ["device"], params={"device": "h100"})
    slower = run_whatif(graph, ["device"], params={"device": "t4"})
    # the step is CPU-bound in its steady state: a faster GPU leaves it as it was, a T4 makes the GPU the bound
    assert slower.predicted_us > faster.baseline_us and faster.predicted_us == pytest.approx(
        faster.baseline_us, rel=1e-5
    )
    # without shapes in this trace each GEMM kernel moves by the peaks of its own precision: TF32 (the cuDNN and
    # CUTLASS tensor-op kernels of the convolutions) 156 -> 494.5 TFLOP/s, FP32 (sgemm) 19.5 -> 67
    step = graph.graph["steps"][-1].name  # the measured step's kernels (the tables count one step)
    gemms = [
        a for _, a in graph.nodes(data=True) if a["kind"] == "gpu" and a.get("class") == "gemm" and a["step"] == step
    ]
    tf32 = sum(a["duration"] for a in gemms if kernel_dtype(a["name"]) == "tf32")
    assert 0 < tf32 < sum(a["duration"] for a in gemms)
    expected = tf32 * 156 / 494.5 + (sum(a["duration"] for a in gemms) - tf32) * 19.5 / 67
    assert faster.predicted.gpu_time_by_class["gemm"] == pytest.approx(expected)
    times = [
        run_whatif(graph, ["network"], params={"link": link}).predicted.gpu_time_by_class["comm"]
        for link in ("nvlink3", "ib-hdr", "eth-10g")
    ]
    assert times == sorted(times)


def test_each_script_is_summarized_by_its_first_paragraph_whole() -> None:
    """`list` and `demo` cut the dataloader's first sentence at its line end ("... or made by")."""
    infos = {i.name: i for i in describe_scripts([str(TRANSFORMS)])}
    assert infos["dataloader"].summary.endswith("`workers` DataLoader worker processes beside training.")
    assert all("\n" not in i.summary and i.summary.endswith(".") for i in infos.values()), [
        i.name for i in infos.values() if not i.summary.endswith(".")
    ]


def test_amp_does_not_apply_to_a_trace_already_in_mixed_precision() -> None:
    """The corpus's ResNet-50 run with autocast (bf16 convolutions, H100): amp would speed it up a second time.
    compute_dtype() reads the GEMM-like kernels' names; the TF32 run of the same program still applies."""
    from daydream.dsl.model_functions import compute_dtype
    from daydream.errors import NotApplicable

    runs = Path(__file__).resolve().parents[1] / "validation" / "traces" / "h100" / "resnet"
    mixed, plain = runs / "amp" / "run1" / "rank0.json.xz", runs / "base" / "run1" / "rank0.json.xz"
    assert compute_dtype(build_graph(load_trace(str(mixed)))) == "bf16"
    with pytest.raises(NotApplicable, match=r"already compute in bf16 \(their names say so\)"):
        whatif(str(mixed), ["amp"])
    assert compute_dtype(build_graph(load_trace(str(plain)))) == "tf32"
    result = whatif(str(plain), ["amp"])  # applies: its kernels get faster (the step, CPU-bound, hardly moves)
    assert result.effects[0].statement == "scale compute by 1 / factor" and result.effects[0].duration_delta_us < 0
