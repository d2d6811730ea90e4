"""What each library script does to a step's peak memory, worked out by hand on small graphs whose tensors are known.

Each graph is one step of op calls on one CPU thread (10 us each, back to back from 0 unless said), each launching at
most one kernel on stream 7 (launch lag 2). Its tensors are allocator events (``[memory]``, as profile_memory=True
records them) tied to those calls: a tensor is allocated 2 us into its call and freed 8 us into its freeing call, so
that its place among the others is clear; their categories follow from the calls' phases
(daydream.graph.memory). The level at a moment is the floor (what the device held when the window began) plus the
tensors live then; on a GPU the floor splits into the parameters (4 bytes an element of the AccumulateGrad calls'
shapes) and Adam's state (twice that), the rest "before the step". Inserted calls shift the calls after them on the
CPU thread; the allocator counts by the CPU's calls (a tensor's allocation and free, and the stretches scripts change,
are placed at CPU calls), so the kernels' times do not move a level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from daydream.api.whatif import WhatIf, run_whatif
from daydream.graph import add_dependency, add_task
from daydream.graph.edit import check_threads
from daydream.graph.memory import attach_memory, memory_of
from daydream.graph.schema import Delays, StepInfo
from daydream.simulation.memory import memory_timeline
from daydream.trace.model import MemoryEvents

TRANSFORMS = Path(__file__).resolve().parent.parent / "transforms"
CPU, S7 = "cpu:1/1", "gpu:0/7"
A100, H100 = "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"
BWD = "autograd::engine::evaluate_function: "
ACC = BWD + "torch::autograd::AccumulateGrad"
ADAM = "Optimizer.step#Adam.step"


@dataclass
class Call:
    """One op call: its op (the CPU task's name and op), phase, kernel (name, class, us; none: CPU work only) and the
    attributes `daydream record` gives it (module, input shapes, region)."""

    op: str
    phase: str | None
    kernel: tuple[str, str, float] | None = None
    layer: str | None = None
    shapes: list[Any] | None = None
    region: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def graph(calls: list[Call], device: str | None = A100, gap: float = 0.0) -> nx.DiGraph:
    """The calls on the CPU thread, 10 us each (then `gap` us of framework time), each launching its kernel on stream 7
    once it is done and the kernel before it is; every task in step "s". ``device`` None: a CPU recording."""
    g = nx.DiGraph()
    g.graph.update(measured_us=0.0, delays=Delays(2.0, 0.0), steps=[], origin_us=0.0)
    if device is not None:
        g.graph["device"] = device
    prev_call = prev_kernel = None
    end = 0.0
    for i, c in enumerate(calls):
        attrs = {
            "step": "s",
            "phase": c.phase,
            "op": c.op,
            "top_op": c.op,
            "top_op_id": i + 1,
            "layer": c.layer,
            "shapes": c.shapes,
            "region": c.region,
            **c.extra,
        }
        call = add_task(g, c.op, "cpu", CPU, 10, gap=gap, start=(10 + gap) * i, **attrs)
        if prev_call is not None:
            add_dependency(g, prev_call, call, "thread")
        prev_call = call
        if c.kernel is not None:
            name, cls, us = c.kernel
            start = max(end, (10 + gap) * i + 12)
            k = add_task(g, name, "gpu", S7, us, start=start, stream=7, **{**attrs, "class": cls})
            add_dependency(g, call, k, "launch", lag=2)
            if prev_kernel is not None:
                add_dependency(g, prev_kernel, k, "stream")
            prev_kernel, end = k, start + us
    g.graph["measured_us"] = max(end, (10 + gap) * len(calls))
    g.graph["steps"] = [StepInfo("s", g.graph["measured_us"], g.graph["measured_us"])]
    return g


def with_memory(
    g: nx.DiGraph, tensors: list[tuple[int, int | None, float]], floor: float = 0.0, gpu: bool = True
) -> nx.DiGraph:
    """The graph with its calls' tensors, each (allocating call, freeing call or None: kept, bytes), as the allocator's
    events on the GPU (or the CPU), the allocator holding `floor` bytes before the first."""
    calls = sorted((v for v, a in g.nodes(data=True) if a["kind"] == "cpu"), key=lambda v: g.nodes[v]["start"])
    events = []
    for addr, (a, f, nbytes) in enumerate(tensors, start=1):
        events.append((g.nodes[calls[a]]["start"] + 2, nbytes, addr))
        if f is not None:
            events.append((g.nodes[calls[f]]["start"] + 8, -nbytes, addr))
    events.sort(key=lambda e: e[0])
    rows, total = [], floor
    for ts, nbytes, addr in events:
        total += nbytes
        rows.append((ts, 1, 1, nbytes, addr, total, total, 1 if gpu else 0, 0 if gpu else -1))
    attach_memory(g, MemoryEvents.of(rows), 40e9 if gpu else None)
    assert memory_of(g) is not None
    return g


def run(g: nx.DiGraph, script: str, **params: Any) -> WhatIf:
    result = run_whatif(g, [TRANSFORMS / f"{script}.whatif"], params=params or None)
    check_threads(result.graph)
    assert nx.is_directed_acyclic_graph(result.graph)
    return result


def peaks(g: nx.DiGraph, script: str, **params: Any) -> tuple[float, float]:
    """The step's peak before and after the script (bytes)."""
    memory = run(g, script, **params).report.memory
    assert memory is not None
    return memory.baseline_peak_bytes, memory.predicted_peak_bytes


def levels(g: nx.DiGraph, script: str, **params: Any) -> list[tuple[float, float]]:
    """The predicted step's memory level after each change (us, bytes), as the script leaves it."""
    result = run(g, script, **params)
    timeline = memory_timeline(result.timeline, memory_of(result.graph))
    assert timeline is not None
    return [(round(t, 3), level) for t, level in zip(timeline.times_us.tolist(), timeline.levels.tolist())]


def at_peak(g: nx.DiGraph, script: str, **params: Any) -> dict[str, float]:
    memory = run(g, script, **params).report.memory
    assert memory is not None
    return memory.predicted_at_peak


# ---- batch_size ------------------------------------------------------------------------------------------------------


def small_step(gpu: bool) -> nx.DiGraph:
    """The batch's copy, a Linear and a ReLU forward, a bias's AccumulateGrad and the Linear's backward, an SGD step;
    on a GPU trace each call launches a 20 us kernel, on a CPU recording none.

        c0 aten::to (no phase: the input)  X  100 B  inputs       (c0 -> c4)
        c1 aten::linear  forward           A1 200 B  activations  (c1 -> c4);  T1 50 B  temporaries (c1 -> c1)
        c2 aten::relu    forward           A2 300 B  activations  (c2 -> c4)
        c3 AccumulateGrad backward         G  40 B   gradients    (c3 -> kept)
        c4 AddmmBackward0 backward         TB 150 B  temporaries  (c4 -> c4)
        c5 Optimizer.step#SGD.step         S  500 B  optimizer state (c5 -> kept)
    """

    def k(name: str, cls: str = "elementwise") -> tuple[str, str, float] | None:
        return (name, cls, 20) if gpu else None

    calls = [
        Call("aten::to", None, k("copy", "memcpy")),
        Call("aten::linear", "forward", k("gemm", "gemm")),
        Call("aten::relu", "forward", k("relu")),
        Call(ACC, "backward", k("add")),
        Call(BWD + "AddmmBackward0", "backward", k("gemm_bwd", "gemm")),
        Call("aten::add_", "optimizer", k("sgd"), region="Optimizer.step#SGD.step"),
    ]
    tensors = [(0, 4, 100), (1, 4, 200), (1, 1, 50), (2, 4, 300), (3, None, 40), (4, 4, 150), (5, None, 500)]
    return with_memory(graph(calls, A100 if gpu else None), tensors, gpu=gpu)


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu"])
def test_batch_size_memory_by_hand(gpu: bool) -> None:
    # Levels (floor 0): X 100 at 2, A1 + T1 350 at 12, T1 out 300 at 18, A2 600 at 22, G 640 at 32, TB 790 at 42 (the
    # peak), every pass tensor freed at 48: 40, S 540 at 52. Twice the batch: the activations, temporaries and the input
    # double (the calls stretch, their order stays): 200 + 400 + 600 + 40 + 300 = 1540 at TB's allocation; the gradient
    # (40) and the optimizer's state (500) do not grow.
    assert peaks(small_step(gpu), "batch_size", factor=2) == (790.0, 1540.0)


# ---- grad_accumulation -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu"])
def test_grad_accumulation_memory_by_hand(gpu: bool) -> None:
    # c0 Linear forward A 300 (c0 -> c2); c1 ReLU forward; c2 its backward TB 100 (c2 -> c2); c3 AccumulateGrad G 400
    # (kept). Traced: A 300 at 2, TB 400 at 22, both freed at 28, G 400 at 32: peak 400. With k = 2 every call takes 20
    # us and the first micro-step's gradient is held from the end of the step's first call (20) until the call that
    # allocates it in the traced pass (c3, from 60): A 300 at 4, +400 at 20, TB at 44: 800, the peak.
    def k(name: str, cls: str = "elementwise") -> tuple[str, str, float] | None:
        return (name, cls, 20) if gpu else None

    calls = [
        Call("aten::linear", "forward", k("gemm", "gemm")),
        Call("aten::relu", "forward", k("relu")),
        Call(BWD + "AddmmBackward0", "backward", k("gemm_bwd", "gemm")),
        Call(ACC, "backward", k("add")),
    ]
    g = with_memory(graph(calls, A100 if gpu else None), [(0, 2, 300), (2, 2, 100), (3, None, 400)], gpu=gpu)
    assert peaks(g, "grad_accumulation", k=2) == (400.0, 800.0)


# ---- activation_checkpointing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu"])
def test_activation_checkpointing_memory_by_hand(gpu: bool) -> None:
    # Two blocks (model.layers.0 and .1), a Linear and a ReLU each; the Linears' backward in reverse:
    #   c0 layers.0.fc A0 200 (c0 -> c5)   c1 layers.0.act A1 300 (c1 -> c4: block 1's input)
    # c2 layers.1.fc A2 400 (c2 -> c4)   c3 layers.1.act A3 100 (c3 -> c4)   c4 layers.1.fc backward   c5 layers.0.fc's
    # Traced: 200, 500, 900, 1000 at 32 (the peak), 200 at 48, 0 at 58. Checkpointed (the CPU recording re-runs each
    # block's Linear, the GPU trace its kernel, with the machinery's task, right before the block's backward op): each
    # block keeps its output (A1, A3) and lets its other activations go at the end of its last forward call until its
    # backward begins - A0 from 20 until c5, A2 from 40 until c4: 200 at 2, 500 at 12, 300 at 20, 700 at 22, 800 at 32
    # (the peak), 400 at 40, back to 800 when c4 starts, 200 after it.
    def k(name: str, cls: str = "elementwise") -> tuple[str, str, float] | None:
        return (name, cls, 20) if gpu else None

    calls = [
        Call("aten::linear", "forward", k("gemm0", "gemm"), layer="model.layers.0.fc"),
        Call("aten::relu", "forward", k("relu0"), layer="model.layers.0.act"),
        Call("aten::linear", "forward", k("gemm1", "gemm"), layer="model.layers.1.fc"),
        Call("aten::relu", "forward", k("relu1"), layer="model.layers.1.act"),
        Call(BWD + "AddmmBackward0", "backward", k("gemm1_bwd", "gemm"), layer="model.layers.1.fc"),
        Call(BWD + "AddmmBackward0", "backward", k("gemm0_bwd", "gemm"), layer="model.layers.0.fc"),
    ]
    g = with_memory(graph(calls, A100 if gpu else None), [(0, 5, 200), (1, 4, 300), (2, 4, 400), (3, 4, 100)], gpu=gpu)
    assert peaks(g, "activation_checkpointing") == (1000.0, 800.0)


# ---- amp -------------------------------------------------------------------------------------------------------------


def amp_step(gpu_memory: bool) -> nx.DiGraph:
    """An fp32 step on an A100: c0 Linear forward A1 200 (c0 -> c4) and T1 40 (c0 -> c0); c1 ReLU A2 100 (c1 -> c4);
    c2 LayerNorm A3 300 (c2 -> c3); c3 its backward TB1 60 (c3 -> c3); c4 the Linear's backward TB2 80 (c4 -> c4); c5
    the AccumulateGrad of a 10 x 10 weight; c6 Adam. On the GPU the allocator held 1700 B before the step: the
    parameters (400 B), Adam's state (800 B) and 500 B more (the gradients among them: zero_grad keeps them), and the
    step allocates no gradient. On the CPU (the profiler's count, from 0) the parameters are not in it, and the
    AccumulateGrad call allocates the gradient, G 400 (c5 -> kept)."""
    calls = [
        Call("aten::linear", "forward", ("ampere_sgemm_128x64_tn", "gemm", 50)),
        Call("aten::relu", "forward", ("relu_kernel", "elementwise", 10)),
        Call("aten::layer_norm", "forward", ("layer_norm_kernel", "norm", 10)),
        Call(BWD + "NativeLayerNormBackward0", "backward", ("layer_norm_bwd", "norm", 20)),
        Call(BWD + "AddmmBackward0", "backward", ("ampere_sgemm_bwd", "gemm", 100)),
        Call(ACC, "backward", ("add_kernel", "elementwise", 5), shapes=[[10, 10]]),
        Call("aten::_fused_adam", "optimizer", ("adam_kernel", "optimizer", 5), region=ADAM),
    ]
    tensors = [(0, 4, 200), (0, 0, 40), (1, 4, 100), (2, 3, 300), (3, 3, 60), (4, 4, 80)]
    if gpu_memory:
        return with_memory(graph(calls), tensors, floor=1700)
    return with_memory(graph(calls), [*tensors, (5, None, 400)], gpu=False)


def test_amp_memory_by_hand() -> None:
    # Traced, on the GPU (floor 1700): 1940 at 2, 1900 at 8, 2000 at 12, 2300 at 22, 2360 at 32 (TB1: the peak), 2000
    # at 38, 2080 at 42, 1700 at 48. With autocast the Linear's and the ReLU's tensors take 2 bytes an element (A1 100,
    # T1 20, A2 50) as does the Linear's backward temporary (TB2 40); the LayerNorm's, forward and backward, stay fp32
    # (A3 300, TB1 60); the master weights, Adam's state and the rest of the floor stay; the cast weights, half the
    # parameters' 400 B, are held from the end of c0 (10) to the start of the backward (c3, 30):
    #   1820 at 2, 1800 at 8, 2000 at 10, 2050 at 12, 2350 at 22 (the peak), 2150 at 30, 2210 at 32, 1850 at 38
    g = amp_step(gpu_memory=True)
    assert peaks(g, "amp") == (2360.0, 2350.0)
    assert at_peak(g, "amp") == {
        "activations": 450.0,
        "parameters": 600.0,
        "optimizer state": 800.0,
        "before the step": 500.0,
    }


def test_amp_memory_without_the_parameters_takes_the_gradients() -> None:
    # On the CPU's count the parameters are not known: the cast weights are half the step's gradients (G 400: 200 B).
    # Traced: 240 at 2, 200 at 8, 300 at 12, 600 at 22, 660 at 32 (the peak), 300 at 38, 380 at 42, 0 at 48, 400 at 52.
    # Autocast: 120 at 2, 100 at 8, 300 at 10 (the cast weights), 350 at 12, 650 at 22 (the peak), 450 at 30, 510 at 32
    assert peaks(amp_step(gpu_memory=False), "amp") == (660.0, 650.0)


# ---- ddp (and scale_out, which inserts ddp's buckets) ----------------------------------------------------------------


def ddp_step() -> nx.DiGraph:
    """c0 Linear forward A 300 (c0 -> c2); c1 its backward; c2 the AccumulateGrad of a 10 x 10 weight, G 400 (c2 ->
    kept); c3 Adam. The GPU held 1300 B before: the parameters 400, Adam's state 800, 100 more."""
    calls = [
        Call("aten::linear", "forward", ("ampere_sgemm_fwd", "gemm", 50)),
        Call(BWD + "AddmmBackward0", "backward", ("ampere_sgemm_bwd", "gemm", 100)),
        Call(ACC, "backward", ("add_kernel", "elementwise", 5), shapes=[[10, 10]]),
        Call("aten::_fused_adam", "optimizer", ("adam_kernel", "optimizer", 5), region=ADAM),
    ]
    return with_memory(graph(calls), [(0, 2, 300), (2, None, 400)], floor=1300)


@pytest.mark.parametrize(("zero", "peak"), [(0, 2400.0), (1, 1400.0), (2, 1100.0)])
def test_ddp_memory_by_hand(zero: int, peak: float) -> None:
    # Traced: 1600 at 2, 2000 at 22 (G beside A: the peak), 1700 at 28. DDP on 4 ranks adds its flat buckets, a copy
    # of the step's 400 B of gradients kept throughout: 2400. ZeRO 1 shards Adam's state (800 -> 200): 1400; ZeRO 2 the
    # gradients too (400 -> 100), and neither keeps a bucket copy: 1100.
    assert peaks(ddp_step(), "ddp", ranks=4, zero=zero) == (2000.0, peak)


def test_scale_out_from_one_gpu_gets_ddps_buckets() -> None:
    assert peaks(ddp_step(), "scale_out", ranks=4) == (2000.0, 2400.0)


# ---- fsdp ------------------------------------------------------------------------------------------------------------


def test_fsdp_memory_by_hand() -> None:
    # Two layers, l0 and l1 (one FSDP unit each), 1 us of framework time after every call:
    #   c0 l0 forward A0 300 (c0 -> c4)   c1 l1 forward A1 200 (c1 -> c2)   c2 l1 backward   c3 l1's AccumulateGrad
    #   (10 x 10: G1 400, kept)   c4 l0 backward   c5 l0's AccumulateGrad (5 x 10: G0 200, kept)   c6 Adam
    # The GPU held 1900 B before: the parameters 600, Adam's state 1200, 100 more. Traced: 2200 at 2, 2400 at 13,
    # 2200 at 19, 2600 at 35 (G1: the peak), 2300 at 52, 2500 at 57.
    # FSDP on 4 ranks: each keeps a quarter of the parameters (150), of Adam's state (300) and of the gradients (G1 100,
    # G0 50). The units in order - l0 forward (200 B), l1 forward (400), l1 backward (400), l0 backward (200) - are
    # all-gathered, each with a 5 us launch call on the CPU: before c0's call for the first, after the call that
    # launches
    # the unit before's first kernel for the others; the reduce-scatters' calls follow l1's AccumulateGrad and l0's:
    #   ag0 [0,5] c0 [5,15] ag1 [15,20] c1 [21,31] ag2 [31,36] c2 [37,47] ag3 [47,52] c3 [53,63] rs1 [63,68] c4 [69,79]
    #   c5 [80,90] rs0 [90,95] c6 [96,106]
    # A unit's gathered parameters are held from its all-gather's call until the call of the next unit's first kernel
    # (the last: its reduce-scatter's): U0 200 [5,21), U1 400 [20,37), U2 400 [36,69), U3 200 [52,90). Levels (floor
    # 550):
    #   750 at 5, 1050 at 7 (A0), 1450 at 20, 1250 at 21, 1450 at 23 (A1), 1850 at 36 (U1 and U2, the prefetched unit,
    #   beside A0 and A1: the peak), 1450 at 37, 1250 at 45, 1450 at 52, 1550 at 55 (G1), 1150 at 69, 850 at 77, 900 at
    #   82 (G0), 700 at 90
    calls = [
        Call("aten::linear", "forward", ("ampere_sgemm_l0", "gemm", 50), layer="l0"),
        Call("aten::linear", "forward", ("ampere_sgemm_l1", "gemm", 50), layer="l1"),
        Call(BWD + "AddmmBackward0", "backward", ("ampere_sgemm_l1_bwd", "gemm", 100), layer="l1"),
        Call(ACC, "backward", ("add_l1", "elementwise", 5), layer="l1", shapes=[[10, 10]]),
        Call(BWD + "AddmmBackward0", "backward", ("ampere_sgemm_l0_bwd", "gemm", 100), layer="l0"),
        Call(ACC, "backward", ("add_l0", "elementwise", 5), layer="l0", shapes=[[5, 10]]),
        Call("aten::_fused_adam", "optimizer", ("adam_kernel", "optimizer", 5), region=ADAM),
    ]
    g = with_memory(graph(calls, gap=1.0), [(0, 4, 300), (1, 2, 200), (3, None, 400), (5, None, 200)], floor=1900)
    assert peaks(g, "fsdp", ranks=4) == (2600.0, 1850.0)
    assert levels(g, "fsdp", ranks=4) == [
        (0, 550),
        (5, 750),
        (7, 1050),
        (20, 1450),
        (21, 1250),
        (23, 1450),
        (36, 1850),
        (37, 1450),
        (45, 1250),
        (52, 1450),
        (55, 1550),
        (69, 1150),
        (77, 850),
        (82, 900),
        (90, 700),
    ]
    assert at_peak(g, "fsdp", ranks=4) == {
        "activations": 500.0,
        "parameters": 950.0,
        "optimizer state": 300.0,
        "before the step": 100.0,
    }


# ---- vdnn ------------------------------------------------------------------------------------------------------------


def vdnn_step() -> nx.DiGraph:
    """relu (R 1000, c0 -> c4) -> conv (its input 945 x 1250 fp32; C 500, c1 -> c3) -> relu2 (R2 200, c2 -> c3) |
    relu2's
    backward (T 100, c3 -> c3) -> the conv's (frees R), on an A100."""
    calls = [
        Call("aten::relu", "forward", ("relu", "elementwise", 50)),
        Call("aten::conv2d", "forward", ("conv_fwd", "conv", 100), shapes=[[945, 1250], [64, 1250]]),
        Call("aten::relu", "forward", ("relu2", "elementwise", 50)),
        Call(BWD + "ReluBackward0", "backward", ("relu2_bwd", "elementwise", 100)),
        Call(BWD + "ConvolutionBackward0", "backward", ("conv_bwd", "conv", 200)),
    ]
    return with_memory(graph(calls), [(0, 4, 1000), (1, 3, 500), (2, 3, 200), (3, 3, 100)])


def test_vdnn_memory_by_hand() -> None:
    # Traced: 1000 at 2, 1500 at 12, 1700 at 22, 1800 at 32 (T: the peak). vDNN offloads the conv's input, R (what its
    # producer, relu, allocated), with a 5 us copy call after relu's (the graph has no LaunchKernel calls to take the
    # median of). On demand (prefetch_ahead 0) the prefetch's call comes after relu2's backward's:
    #   c0 [0,10] offload [10,15] c1 [15,25] c2 [25,35] c3 [35,45] prefetch [45,50] c4 [50,60]
    # R is off the device from the end of the conv's call (25) to the start of the prefetch's (45): 1000 at 2, 1500 at
    # 17
    # (the peak), 500 at 25, 700 at 27, 800 at 37, 0 at 43, 1000 at 45.
    assert peaks(vdnn_step(), "vdnn", prefetch_ahead=0) == (1800.0, 1500.0)
    # vDNN's own schedule prefetches the topmost layer as the backward pass begins (its call before c3's): R is back
    # before the backward's temporary, the peak stays 1800 (1700 at 35, 1800 at 42)
    assert peaks(vdnn_step(), "vdnn") == (1800.0, 1800.0)


# ---- gist ------------------------------------------------------------------------------------------------------------


def test_gist_memory_by_hand() -> None:
    #   c0 conv C 400 (c0 -> c5)   c1 relu R 1000 (c1 -> c4: the stash)   c2 max_pool P 300 (c2 -> c3), its workspace
    #   W 1000 (c2 -> c2)   c3 the pool's backward T 100 (c3 -> c3)   c4 ReLU's backward   c5 the conv's
    # Traced: 400 at 2, 1400 at 12, 2700 at 22 (the peak), 1400 at 28, 1500 at 32, 400 at 48, 0 at 58. Gist encodes R
    # after relu (its kernel's call right after relu's, 10 us: the graph's median launch) and decodes it before its
    # first use, the pool's backward (the call before c3's):
    #   c0 [0,10] c1 [10,20] encode [20,30] c2 [30,40] decode [40,50] c3 [50,60] c4 [60,70] c5 [70,80]
    # R is held at half its bytes from 30 to 40: 400 at 2, 1400 at 12, 900 at 30, 2200 at 32 (the peak), 1200 at 38,
    # 1700 at 40, 1800 at 52.
    calls = [
        Call("aten::conv2d", "forward", ("conv_fwd", "conv", 100)),
        Call("aten::relu", "forward", ("relu", "elementwise", 50)),
        Call("aten::max_pool2d", "forward", ("pool", "elementwise", 50)),
        Call(BWD + "MaxPool2DWithIndicesBackward0", "backward", ("pool_bwd", "elementwise", 100)),
        Call(BWD + "ReluBackward0", "backward", ("relu_bwd", "elementwise", 50)),
        Call(BWD + "ConvolutionBackward0", "backward", ("conv_bwd", "conv", 200)),
    ]
    g = with_memory(graph(calls), [(0, 5, 400), (1, 4, 1000), (2, 3, 300), (2, 2, 1000), (3, 3, 100)])
    assert peaks(g, "gist") == (2700.0, 2200.0)
    # Binarize's 1/32: 1731.25 at 32, under the decoded R beside the pool's backward temporary, 1800 at 52: the peak
    assert peaks(g, "gist", encoded=1 / 32) == (2700.0, 1800.0)


# ---- tensor_parallel -------------------------------------------------------------------------------------------------


def test_tensor_parallel_memory_by_hand() -> None:
    # A transformer's MLP block on an H100 (hidden 16, inner 64, 4 tokens): fc1 (column-parallel) A1 10000 (c0 -> c6),
    # the activation A2 10000 (c1 -> c5), fc2 (row-parallel) A3 2000 (c2 -> c3); backward: fc2 (c3), fc2.weight's
    # AccumulateGrad G2 4096 (c4), the activation's (c5), fc1's (c6), fc1.weight's G1 4096 (c7) and fc1.bias's Gb 256
    # (c8), kept; Adam (c9). The GPU held 26344 B before: the parameters 8448 (4 x (1024 + 1024 + 64)), Adam's state
    # 16896,
    # 1000 more. Traced: 48344 at the end of the forward, 50440 at 42 (G2, A3 freed at 38: the peak), then down.
    # With tp = 2 the rank keeps half of every parameter (the split Linears hold them all): the parameters 4224, the
    # state 8448, the gradients halved; fc1's output and the activation's are split (5000 each), fc2's output is whole:
    # 13672 + 12000 = 25672 at the end of the forward, 13672 + 10000 + 2048 = 25720 after fc2's backward (the peak).
    h, i, t = 16, 64, 4
    calls = [
        Call(
            "aten::linear", "forward", ("sm90_gemm_fc1", "gemm", 100), layer="blk.mlp.fc1", shapes=[[t, h], [i, h], [i]]
        ),
        Call("aten::gelu", "forward", ("gelu_kernel", "elementwise", 20), layer="blk.mlp.act", shapes=[[t, i], []]),
        Call(
            "aten::linear", "forward", ("sm90_gemm_fc2", "gemm", 100), layer="blk.mlp.fc2", shapes=[[t, i], [h, i], [h]]
        ),
        Call("aten::mm", "backward", ("sm90_gemm_fc2_bwd", "gemm", 200), layer="blk.mlp.fc2", shapes=[[t, h], [h, i]]),
        Call(ACC, "backward", None, layer="blk.mlp.fc2", shapes=[[h, i]]),
        Call(
            "aten::gelu_backward",
            "backward",
            ("gelu_bwd", "elementwise", 20),
            layer="blk.mlp.act",
            shapes=[[t, i], [t, i]],
        ),
        Call("aten::mm", "backward", ("sm90_gemm_fc1_bwd", "gemm", 200), layer="blk.mlp.fc1", shapes=[[t, i], [i, h]]),
        Call(ACC, "backward", None, layer="blk.mlp.fc1", shapes=[[i, h]]),
        Call(ACC, "backward", None, layer="blk.mlp.fc1", shapes=[[i]]),
        Call("aten::_fused_adam", "optimizer", ("adam_kernel", "optimizer", 5), region=ADAM),
    ]
    tensors = [(0, 6, 10000), (1, 5, 10000), (2, 3, 2000), (4, None, 4096), (7, None, 4096), (8, None, 256)]
    g = with_memory(graph(calls, H100), tensors, floor=8448 + 16896 + 1000)
    assert peaks(g, "tensor_parallel", tp=2, link="nvlink4") == (50440.0, 25720.0)


# ---- pipeline_parallel -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("schedule", "peak"), [("1f1b", 900.0), ("gpipe", 1400.0)])
def test_pipeline_parallel_memory_by_hand(schedule: str, peak: float) -> None:
    # Two blocks on an H100, each a forward kernel (100 us) and a backward one (200 us), and its AccumulateGrad (block
    # 0's 25 elements, block 1's 75): block 0's forward allocates A0 1000 (c0 -> c4), block 1's A1 600 (c1 -> c2). The
    # GPU
    # held 1300 B before: the parameters 400, Adam's state 800, 100 more. Traced: 2300 at 2, 2900 at 12 (the peak).
    # pp = 2, 4 micro-batches, free links: rank 0 (stage 0: block 0) keeps block 0's 100 of the 400 B of gradients - a
    # quarter of the parameters (100) and of Adam's state (200), floor 400 - and a micro-batch's quarter of A0, 250 B,
    # from the end of its forward task to the start of its backward task. 1F1B: F0 [0,25] F1 [25,50], B0 [100,150] (it
    # waits for stage 1's gradient), F2 [150,175], B1 [175,225], F3, B2, B3: two micro-batches at most, 900. GPipe:
    # F0..F3 [0,100] before any backward: all four, 1400.
    calls = [
        Call(
            "aten::gelu", "forward", ("gelu_kernel", "elementwise", 100), layer="model.layers.0.act", shapes=[[64, 512]]
        ),
        Call(
            "aten::gelu", "forward", ("gelu_kernel", "elementwise", 100), layer="model.layers.1.act", shapes=[[64, 512]]
        ),
        Call(
            "aten::gelu_backward",
            "backward",
            ("gelu_bwd", "elementwise", 200),
            layer="model.layers.1.act",
            shapes=[[64, 512]],
        ),
        Call(ACC, "backward", None, layer="model.layers.1.act", shapes=[[75]]),
        Call(
            "aten::gelu_backward",
            "backward",
            ("gelu_bwd", "elementwise", 200),
            layer="model.layers.0.act",
            shapes=[[64, 512]],
        ),
        Call(ACC, "backward", None, layer="model.layers.0.act", shapes=[[25]]),
        Call("aten::_fused_adam", "optimizer", ("adam_kernel", "optimizer", 10), region=ADAM),
    ]
    g = with_memory(graph(calls, H100), [(0, 4, 1000), (1, 2, 600)], floor=1300)
    params = {"pp": 2, "micro_batches": 4, "link": 1e9, "kernel_fixed": 0, "schedule": schedule}
    assert peaks(g, "pipeline_parallel", **params) == (2900.0, peak)
    assert at_peak(g, "pipeline_parallel", **params) == {
        "activations": peak - 400,
        "parameters": 100.0,
        "optimizer state": 200.0,
        "before the step": 100.0,
    }


@pytest.mark.parametrize(("schedule", "chunks", "peak"), [("1f1b", 1, 1100.0), ("interleaved", 2, 1600.0)])
def test_pipeline_parallel_memory_of_the_interleaved_schedule_by_hand(schedule: str, chunks: int, peak: float) -> None:
    # A CPU recording of four equal blocks (model.layers.0..3, one 10 us forward op each, their backward ops in
    # reverse), whose forward ops allocate A0 1000, A1 100, A2 600, A3 100, each freed by its block's backward: 1800 at
    # the end of the forward pass (the peak). pp = 2, 2 micro-batches: 1F1B cuts [0, 1] | [2, 3], rank 0 holding
    # (1000 + 100) / 2 = 550 a micro-batch, both in flight before its first backward: 1100. Interleaved with 2 chunks,
    # rank 0 holds stages 0 and 2 (blocks 0 and 2: 500 and 300 a micro-batch) and its warm-up, (pp - 1) x 2 + (chunks -
    # 1) x pp = 4, runs every forward before its first backward: 500 at 5, 1000 at 10, 1300 at 15, 1600 at 20. On the
    # CPU's count there are no parameters to share, and the recording sizes no gradient (rank 0 keeps 1/pp).
    calls = [Call("aten::gelu", "forward", layer=f"model.layers.{b}.act", shapes=[[64, 512]]) for b in range(4)]
    calls += [
        Call("GeluBackward0", "backward", layer=f"model.layers.{b}.act", shapes=[[64, 512]]) for b in reversed(range(4))
    ]
    g = with_memory(graph(calls, None), [(0, 7, 1000), (1, 6, 100), (2, 5, 600), (3, 4, 100)], gpu=False)
    params = {"pp": 2, "micro_batches": 2, "link": 1e9, "kernel_fixed": 0, "schedule": schedule, "chunks": chunks}
    assert peaks(g, "pipeline_parallel", **params) == (1800.0, peak)


# ---- device ----------------------------------------------------------------------------------------------------------


def test_device_changes_no_tensor_and_gives_the_targets_capacity() -> None:
    from daydream.perf.kernels.devices import get_device

    memory = run(ddp_step(), "device", device="h100").report.memory
    assert memory is not None
    assert (memory.baseline_peak_bytes, memory.predicted_peak_bytes) == (2000.0, 2000.0)
    assert memory.capacity_bytes == get_device("h100").memory_gb * 2**30  # "80 GB" of HBM: 80 GiB


def test_device_gives_the_targets_capacity_on_a_recorded_gpu(shared_traces: Path) -> None:
    # the MI300X normalization test records the GPU's allocator (Device Type 6) and its 192 GiB
    from daydream.api.whatif import whatif
    from daydream.perf.kernels.devices import get_device

    trace = shared_traces / "tracelens" / "mi300_normalization_layer_test.json.gz"
    memory = whatif(trace, ["device"], {"device": "h100"}).report.memory
    assert memory is not None and memory.source == "trace" and memory.device.startswith("hip")
    assert memory.capacity_bytes == get_device("h100").memory_gb * 2**30  # "80 GB" of HBM: 80 GiB
    assert memory.predicted_peak_bytes == memory.baseline_peak_bytes == 8_154_624
