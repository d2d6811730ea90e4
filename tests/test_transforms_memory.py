"""The memory-saving transforms (transforms/vdnn.whatif, transforms/gist.whatif): hand-built graphs with times
worked out by hand, and real traces for direction and magnitude."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from daydream.api.demo import bundled_example
from daydream.api.whatif import WhatIf, run_whatif
from daydream.commands.cli import main
from daydream.graph import add_dependency, add_task, build_graph
from daydream.graph.edit import check_threads
from daydream.graph.schema import Delays
from daydream.trace import load_trace

TRANSFORMS = Path(__file__).resolve().parent.parent / "transforms"
CPU, S7 = "cpu:1/1", "gpu:0/7"
A100 = "NVIDIA A100-SXM4-40GB"  # PCIe 4: 31.5 GB/s = 31,500 bytes/us; HBM 1555 GB/s
BWD = "autograd::engine::evaluate_function: "


def layers(*specs: tuple[str, str, str, float, dict[str, object]]) -> nx.DiGraph:
    """One CPU thread whose calls (10 us each, back to back from 0) launch one kernel each, in order, on stream 7
    (launch lag 2, no stream gap); spec = (kernel name, phase, top-level op, duration, more attributes). Each
    spec is its own top-level op call (top_op_id = its index + 1), on the A100 of the catalog."""
    g = nx.DiGraph()
    g.graph.update(measured_us=0.0, delays=Delays(2.0, 0.0), steps=[], device=A100)
    prev_call = prev_kernel = None
    end = 0.0
    for i, (name, phase, top_op, dur, attrs) in enumerate(specs):
        op = {"step": "s", "phase": phase, "top_op": top_op, "top_op_id": i + 1, **attrs}
        call = add_task(g, "cudaLaunchKernel", "cpu", CPU, 10, start=10.0 * i, **op)
        start = max(end, 10.0 * i + 12)
        k = add_task(g, name, "gpu", S7, dur, start=start, stream=7, **op)
        end = start + dur
        add_dependency(g, call, k, "launch", lag=2)
        if prev_call is not None:
            add_dependency(g, prev_call, call, "thread")
            add_dependency(g, prev_kernel, k, "stream")
        prev_call, prev_kernel = call, k
    return g


def run(graph: nx.DiGraph, script: str, **params: object) -> WhatIf:
    result = run_whatif(graph, [TRANSFORMS / f"{script}.whatif"], params=params or None)
    check_threads(result.graph)
    assert nx.is_directed_acyclic_graph(result.graph)
    return result


def added(result: WhatIf, attribute: str, value: str) -> list[dict[str, object]]:
    """The inserted GPU-side tasks tagged ``attribute = value``, in traced time order."""
    tasks = [a for _, a in result.graph.nodes(data=True) if a.get(attribute) == value and a["kind"] != "cpu"]
    return sorted(tasks, key=lambda a: a["start"])


def stream_order(graph: nx.DiGraph, thread: str) -> list[str]:
    """The names of a thread's tasks along its order edges."""
    on = [v for v, a in graph.nodes(data=True) if a["thread"] == thread]
    succ = {u: v for u in on for v, e in graph.succ[u].items() if e["kind"] in ("stream", "thread")}
    (task,) = set(on) - set(succ.values())
    names = []
    while task is not None:
        names.append(graph.nodes[task]["name"])
        task = succ.get(task)
    return names


# ---- vdnn ---------------------------------------------------------------------------------------------------------

CONV_X = {"op": "aten::cudnn_convolution", "shapes": [[945, 1250], [64, 1250]]}  # input 945 x 1250 fp32: 4.725 MB
ADDMM_X = {"op": "aten::addmm", "shapes": [[64], [945, 1250], [1250, 64]]}  # addmm(bias, input, weight): the same input


def cnn(
    forward_op: str = "aten::conv2d", backward_op: str = "ConvolutionBackward0", x: dict[str, object] | None = None
) -> nx.DiGraph:
    """relu [12,62] -> conv [62,162] -> relu2 [162,212] | backward: relu2's [212,312] -> the conv's [312,512]."""
    return layers(
        ("relu", "forward", "aten::relu", 50, {"class": "elementwise"}),
        ("conv_fwd", "forward", forward_op, 100, {"class": "conv", **(CONV_X if x is None else x)}),
        ("relu2", "forward", "aten::relu", 50, {"class": "elementwise"}),
        ("relu2_bwd", "backward", BWD + "ReluBackward0", 100, {"class": "elementwise"}),
        ("conv_bwd", "backward", BWD + backward_op, 200, {"class": "conv"}),
    )


@pytest.mark.parametrize(
    ("forward_op", "backward_op", "x"),
    [("aten::conv2d", "ConvolutionBackward0", CONV_X), ("aten::linear", "AddmmBackward0", ADDMM_X)],
)
def test_vdnn_by_hand(forward_op: str, backward_op: str, x: dict[str, object]) -> None:
    g = cnn(forward_op, backward_op, x)
    # The conv's input, 945 x 1250 x 4 B = 4.725e6 B (argument 0 of a convolution, 1 of addmm), crosses PCIe 4 in
    # 4.725e6 / 31,500 = 150 us each way. Copy calls take 10 us (the median launch call). CPU: L0 [0,10], offload
    # call [10,20], L1 [20,30], L2 [30,40], prefetch call [40,50], L3 [50,60], L4 [60,70].
    # Forward: the offload follows relu (the conv's input is ready): [62,212] on stream 1001, beside the conv
    # [62,162]; relu2 waits for the offload (vDNN frees the input before the next layer): [212,262].
    # Backward: the prefetch is issued as the backward pass begins (the conv is the topmost offloaded layer), after
    # relu2 [262,412]; relu2's backward [262,362]; the conv's backward waits for the prefetch: [412,612].
    r = run(g, "vdnn")
    assert (r.baseline_us, r.predicted_us) == (512.0, pytest.approx(612.0))
    offload, prefetch = added(r, "vdnn", "offload"), added(r, "vdnn", "prefetch")
    assert [(a["name"], a["bytes"], a["thread"]) for a in offload + prefetch] == [
        ("Memcpy DtoH (vDNN offload)", 4_725_000, "gpu:0/1001"),
        ("Memcpy HtoD (vDNN prefetch)", 4_725_000, "gpu:0/1001"),
    ]
    assert [a["duration"] for a in offload + prefetch] == [pytest.approx(150.0)] * 2


def test_vdnn_schedule_params_by_hand() -> None:
    g = cnn()
    # on demand: the prefetch waits for relu2's backward [262,362] -> [362,512]; the conv's backward [512,712]
    assert run(g, "vdnn", prefetch_ahead=0).predicted_us == pytest.approx(712.0)
    # no wait for the offload: relu2 [162,212], the prefetch after it and the offload [212,362], conv bwd [362,562]
    assert run(g, "vdnn", sync_offload=False).predicted_us == pytest.approx(562.0)
    # 3.15 MB: 100 us copies, hidden behind the conv (100 us) and relu2's backward (100 us): the baseline
    assert run(g, "vdnn", activation_bytes=3.15e6).predicted_us == pytest.approx(512.0)


def test_vdnn_estimates_bytes_from_the_producer_without_shapes() -> None:
    g = cnn(x={})
    # no shapes: the input's bytes from relu's 50 us as one read and one write at 1555 GB/s:
    # 50 * 1555e3 / 2 = 38.875e6 B, 1234.127 us each way. Offload [62, 1296.127], relu2 [1296.127, 1346.127],
    # prefetch after relu2 [1346.127, 2580.254], the conv's backward after it: 2780.254
    copy = 50 * 1555e3 / 2 / 31_500
    r = run(g, "vdnn")
    assert added(r, "vdnn", "offload")[0]["bytes"] == pytest.approx(38.875e6)
    assert r.predicted_us == pytest.approx(62 + 2 * copy + 50 + 200)


def test_vdnn_leaves_unpaired_layers_alone() -> None:
    g = cnn(backward_op="SomethingElseBackward0")  # the conv's backward is not recognized: 1 layer, 0 backward ops
    r = run(g, "vdnn")
    assert r.predicted_us == r.baseline_us == 512.0
    assert any("cannot be paired" in line for line in r.printed)
    assert not added(r, "vdnn", "offload")


def test_vdnn_pairs_layers_within_each_step() -> None:
    spec = [
        ("relu", "forward", "aten::relu", 50, {"class": "elementwise"}),
        ("conv_fwd", "forward", "aten::conv2d", 100, {"class": "conv", **CONV_X}),
        ("relu2", "forward", "aten::relu", 50, {"class": "elementwise"}),
        ("relu2_bwd", "backward", BWD + "ReluBackward0", 100, {"class": "elementwise"}),
        ("conv_bwd", "backward", BWD + "ConvolutionBackward0", 200, {"class": "conv"}),
    ]
    g = layers(
        *[(n, p, o, d, {**a, "step": "s1"}) for n, p, o, d, a in spec],
        *[(n, p, o, d, {**a, "step": "s2"}) for n, p, o, d, a in spec],
    )
    # baseline: step s1 as in cnn() [12,512], step s2 right after it [512,1012]. Each step pairs its own conv with
    # its own backward: s1 as in test_vdnn_by_hand, ending 612; s2: relu [612,662], its offload [662,812] (after s1's
    # prefetch on the copy stream), conv [662,762], relu2 waits: [812,862], prefetch [862,1012], relu2's backward
    # [862,962], the conv's backward [1012,1212]. (The four copy calls delay only the CPU, which is ahead.)
    r = run(g, "vdnn")
    assert (r.baseline_timeline.makespan(), r.timeline.makespan()) == (1012.0, pytest.approx(1212.0))  # both steps
    assert [(a["vdnn"], a["step"]) for a in added(r, "vdnn", "offload") + added(r, "vdnn", "prefetch")] == [
        ("offload", "s1"),
        ("offload", "s2"),
        ("prefetch", "s1"),
        ("prefetch", "s2"),
    ]


def test_vdnn_needs_the_gpu_in_the_catalog() -> None:
    g = cnn()
    g.graph["device"] = "Some Unknown GPU"
    r = run(g, "vdnn")
    assert r.predicted_us == r.baseline_us and any("not in the device catalog" in line for line in r.printed)


@pytest.mark.parametrize("script", ["vdnn", "gist"])
def test_memory_scripts_do_not_apply_to_the_bundled_cpu_example(
    script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # no GPU: nothing to offload or encode; the script says so (exit 3) rather than predicting "no change"
    assert main(["run", bundled_example(), script, "--json"]) == 3
    err = capsys.readouterr().err
    assert err.startswith(
        f"daydream: error: {script} does not apply to this trace: the trace has no GPU kernels (recorded on the CPU)"
    )


@pytest.fixture(scope="module")
def resnet() -> nx.DiGraph:
    path = Path(__file__).resolve().parents[2] / "shared" / "traces" / "param" / "resnet_kineto.json.gz"
    if not path.is_file():
        pytest.skip(f"real traces not available: {path} is absent")
    return build_graph(load_trace(path), context=False)


def test_vdnn_on_a_gpu_bound_cnn(shared_traces: Path, resnet: nx.DiGraph) -> None:
    # ResNet-18 on an RTX 2080 Ti (PCIe 3, 15.75 GB/s), GPU-bound: 20 convolutions and the FC layer offloaded
    r = run(resnet, "vdnn")
    offload, prefetch = added(r, "vdnn", "offload"), added(r, "vdnn", "prefetch")
    assert len(offload) == len(prefetch) == 21
    copies = sum(a["duration"] for a in offload + prefetch)
    calls = sum(a["duration"] for _, a in r.graph.nodes(data=True) if a.get("vdnn") and a["kind"] == "cpu")
    # slower, but never by more than all the inserted work in series; and the copy stream runs every copy in turn
    assert r.baseline_us < r.predicted_us <= r.baseline_us + copies + calls
    assert r.predicted_us > copies
    assert 0.5 < r.speedup < 0.95  # ~190 ms of PCIe copies against a 275 ms iteration, partly hidden
    # prefetching earlier never hurts here; dropping the forward's wait for its offloads helps
    times = [run(resnet, "vdnn", prefetch_ahead=k).predicted_us for k in (0, 1, 3)]
    assert times == sorted(times, reverse=True) and times[0] > times[-1]
    assert run(resnet, "vdnn", sync_offload=False).predicted_us < r.predicted_us
    # nothing to copy: only the copy calls remain, hidden by the GPU-bound iteration
    assert run(resnet, "vdnn", activation_bytes=0).predicted_us == pytest.approx(r.baseline_us, rel=1e-4)


def test_vdnn_takes_the_activation_size_from_recorded_shapes(shared_traces: Path) -> None:
    # DLRM rank 0 (V100) with its execution trace: the MLPs' addmm inputs and the interaction's bmm input
    graph = build_graph(
        load_trace(
            shared_traces / "param" / "dlrm8" / "rank0.json.gz",
            et=shared_traces / "param" / "dlrm8_et" / "rank0.et.json.gz",
        )
    )
    r = run(graph, "vdnn")
    offload = added(r, "vdnn", "offload")
    assert len(offload) == 8 and offload[0]["bytes"] == 16 * 13 * 4  # the bottom MLP's input: 16 x 13 fp32
    assert r.baseline_us < r.predicted_us < 1.01 * r.baseline_us  # KBs over PCIe: a few launch calls


# ---- gist ---------------------------------------------------------------------------------------------------------


def relu_conv() -> nx.DiGraph:
    """relu [12,62] -> conv [62,162] | backward: conv [162,362], an AccumulateGrad add [362,372], relu [372,472]."""
    return layers(
        ("relu", "forward", "aten::relu", 50, {"class": "elementwise"}),
        ("conv_fwd", "forward", "aten::conv2d", 100, {"class": "conv"}),
        ("conv_bwd", "backward", BWD + "ConvolutionBackward0", 200, {"class": "conv"}),
        ("acc_add", "backward", BWD + "torch::autograd::AccumulateGrad", 10, {"class": "elementwise"}),
        ("relu_bwd", "backward", BWD + "ReluBackward0", 100, {"class": "elementwise"}),
    )


def test_gist_by_hand() -> None:
    g = relu_conv()
    # encode (50 us, as long as the ReLU) after the ReLU; decode (50 us) before the ReLU output's first backward
    # use: the conv's backward (the AccumulateGrad between it and the ReLU's backward is skipped). Calls 10 us:
    # L0 [0,10] encode call [10,20] L1 [20,30] decode call [30,40] L2 [40,50] L3 [50,60] L4 [60,70].
    # GPU: relu [12,62] encode [62,112] conv [112,212] decode [212,262] conv bwd [262,462] add [462,472]
    # relu bwd [472,572]
    r = run(g, "gist")
    assert (r.baseline_us, r.predicted_us) == (472.0, pytest.approx(572.0))
    assert stream_order(r.graph, S7) == [
        "relu",
        "gist_encode",
        "conv_fwd",
        "gist_decode",
        "conv_bwd",
        "acc_add",
        "relu_bwd",
    ]
    assert run(g, "gist", decode_factor=0).predicted_us == pytest.approx(522.0)  # Binarize: no decode kernel
    assert run(g, "gist", encode_factor=0.5, decode_factor=0.5).predicted_us == pytest.approx(522.0)
    # free encoding: a zero-length kernel and its launch call, hidden behind the GPU
    assert run(g, "gist", encode_factor=0, decode_factor=0).predicted_us == pytest.approx(472.0)


def test_gist_leaves_unpaired_activations_alone() -> None:
    g = relu_conv()
    r = run(g, "gist", backward_ops="NoSuchBackward")
    assert r.predicted_us == r.baseline_us and not added(r, "gist", "encode")
    assert any("cannot be paired" in line for line in r.printed)


def test_gist_on_a_gpu_bound_cnn(shared_traces: Path, resnet: nx.DiGraph) -> None:
    # ResNet-18: 17 ReLUs, each encoded after its forward kernel and decoded before its first backward use
    r = run(resnet, "gist")
    encode, decode = added(r, "gist", "encode"), added(r, "gist", "decode")
    assert len(encode) == len(decode) == 17
    inserted = sum(a["duration"] for a in encode + decode)
    relus = sum(
        a["duration"] for _, a in resnet.nodes(data=True) if a["kind"] == "gpu" and a["top_op"] == "aten::relu_"
    )
    assert inserted == pytest.approx(2 * relus)
    # GPU-bound on one stream: nearly all the inserted kernel time shows; Gist reports about 4% on CNNs
    assert r.baseline_us + 0.9 * inserted < r.predicted_us <= r.baseline_us + inserted + 17 * 2 * 20
    assert 0.9 < r.speedup < 1.0
    times = [run(resnet, "gist", encode_factor=f, decode_factor=f).predicted_us for f in (0, 0.5, 1, 2)]
    assert times == sorted(times) and times[0] == pytest.approx(r.baseline_us, rel=1e-4)
