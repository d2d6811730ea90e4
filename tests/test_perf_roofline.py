"""Op costs from shapes, the roofline bound, calibration on a hand-built graph, and the real-trace cross-check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from daydream.errors import DaydreamError
from daydream.perf.kernels.costs import Cost, elementwise_cost, gemm_cost, op_cost
from daydream.perf.kernels.devices import get_device
from daydream.perf.kernels.roofline import (
    Calibration,
    ClassEfficiency,
    calibrate,
    device_speedup,
    dtype_speedup,
    fit_latency,
    kernel_dtype,
    move_us,
    native_dtype,
    observations,
    predict_us,
    resolved_gmae,
    roofline_us,
    timing_resolution_us,
)
from daydream.trace.sizes import normalize_dtype

A100 = get_device("a100-40gb")

# ---------------------------------------------------------------- costs


def test_dtype_names() -> None:
    assert normalize_dtype("torch.float16") == normalize_dtype("Half") == normalize_dtype("c10::Half") == "fp16"
    assert normalize_dtype("c10::BFloat16") == "bf16"
    assert normalize_dtype("float") == normalize_dtype("float32") == "fp32"
    assert normalize_dtype("double") == "fp64"
    assert normalize_dtype("long int") == "int64"
    with pytest.raises(ValueError, match="unknown dtype"):
        normalize_dtype("float128")


def test_gemm_cost_by_hand() -> None:
    # 2*m*n*k FLOPs; A (m x k), B (k x n), C (m x n) once each
    assert gemm_cost(64, 32, 16) == Cost(2 * 64 * 32 * 16, (64 * 16 + 16 * 32 + 64 * 32) * 4) == Cost(65536, 14336)
    assert gemm_cost(64, 32, 16, "fp16", batch=3) == Cost(196608, 3 * 3584 * 2)
    assert gemm_cost(64, 32, 16).intensity == pytest.approx(65536 / 14336)


def test_elementwise_cost_by_hand() -> None:
    assert elementwise_cost(1000, "bf16", flops_per_element=3, reads=2, writes=1) == Cost(3000, 3 * 1000 * 2)


@pytest.mark.parametrize(
    ("op", "shapes", "dtype", "expected"),
    [
        ("aten::mm", [[64, 16], [16, 32]], "fp32", Cost(65536, 14336)),
        # addmm: the GEMM plus reading C (the bias already expanded into the output) and scaling/adding it
        ("aten::addmm", [[32], [64, 16], [16, 32], [], []], "fp32", Cost(65536 + 2 * 64 * 32, 14336 + 64 * 32 * 4)),
        ("aten::bmm", [[3, 64, 16], [3, 16, 32]], "fp16", Cost(196608, 21504)),
        (
            "aten::baddbmm",
            [[3, 64, 32], [3, 64, 16], [3, 16, 32], [], []],
            "fp16",
            Cost(196608 + 2 * 3 * 64 * 32, 21504 + 3 * 64 * 32 * 2),
        ),
        # matmul with a 2-D right operand folds the batch into m (one GEMM, weight read once)
        (
            "aten::matmul",
            [[2, 3, 64, 16], [16, 32]],
            "fp32",
            Cost(2 * 384 * 32 * 16, (384 * 16 + 16 * 32 + 384 * 32) * 4),
        ),
        ("aten::matmul", [[6, 64, 16], [6, 16, 32]], "fp32", Cost(6 * 65536, 6 * 14336)),
        ("aten::matmul", [[16], [16, 32]], "fp32", Cost(2 * 32 * 16, (16 + 16 * 32 + 32) * 4)),
        (
            "aten::linear",
            [[8, 64, 16], [32, 16], [32]],
            "fp32",
            Cost(2 * 512 * 32 * 16 + 2 * 512 * 32, (512 * 16 + 16 * 32 + 512 * 32) * 4 + 512 * 32 * 4),
        ),
        ("aten::linear", [[512, 16], [32, 16], []], "fp32", gemm_cost(512, 32, 16)),
        # backward GEMMs from the forward's dims: grad_a = g @ b^T (m,k,n) and grad_b = a^T @ g (k,n,m)
        ("MmBackward0", [[64, 16], [16, 32]], "fp32", Cost(2 * 65536, 14336 + 14336)),
        ("AddmmBackward0", [[32], [64, 16], [16, 32]], "fp32", Cost(2 * 65536 + 64 * 32, 28672 + 64 * 32 * 4)),
        ("autograd::engine::evaluate_function: MmBackward0", [[64, 16], [16, 32]], "fp32", Cost(2 * 65536, 28672)),
    ],
)
def test_gemm_ops(op: str, shapes: list[Any], dtype: str, expected: Cost) -> None:
    assert op_cost(op, shapes, dtype) == expected


def test_conv_forward_assumes_same_size_output_unless_told() -> None:
    shapes = [[8, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], [], [], []]
    # output 8x16x32x32 assumed; each output sums 3*3*3 products
    macs = 8 * 16 * 32 * 32 * 27
    nbytes = (8 * 3 * 32 * 32 + 16 * 27 + 8 * 16 * 32 * 32 + 16) * 4
    assert op_cost("aten::convolution", shapes) == Cost(2 * macs, nbytes) == Cost(7077888, 624384)
    # with the output dims (stride 2 -> 16x16) nothing is assumed
    strided = op_cost("aten::convolution", shapes, out_shapes=[[8, 16, 16, 16]])
    assert strided == Cost(2 * 8 * 16 * 16 * 16 * 27, (8 * 3 * 1024 + 432 + 8 * 16 * 256 + 16) * 4)
    # cudnn_convolution(input, weight, padding, ...): no bias argument
    assert op_cost("aten::cudnn_convolution", [[8, 3, 32, 32], [16, 3, 3, 3], [], [], [], []]) == Cost(
        7077888, (8 * 3 * 1024 + 432 + 8 * 16 * 1024) * 4
    )


def test_grouped_conv_counts_input_channels_per_group() -> None:
    # depthwise: weight [16, 1, 3, 3] -> 9 products per output
    cost = op_cost("aten::conv2d", [[8, 16, 32, 32], [16, 1, 3, 3], [], [], [], [], []])
    assert cost is not None and cost.flops == 2 * 8 * 16 * 32 * 32 * 9


def test_conv_backward_dgrad_and_wgrad() -> None:
    g, x, w = [8, 16, 16, 16], [8, 3, 32, 32], [16, 3, 3, 3]
    macs = 8 * 16 * 16 * 16 * 27  # from grad_output's size: no stride needed
    ng, nx_, nw = 8 * 16 * 256, 8 * 3 * 1024, 16 * 27
    expected = Cost(4 * macs + ng, ((ng + nw + nx_) * 2 + ng) * 4)
    assert op_cost("aten::convolution_backward", [g, x, w, [16], [], [], [], [], [], [], []]) == expected
    assert op_cost("aten::convolution_backward", [g]) is None  # only the incoming gradient: cannot price


@pytest.mark.parametrize(
    ("op", "shapes", "dtype", "expected"),
    [
        ("aten::add", [[1024], [1024], []], "fp32", Cost(1024, 3 * 1024 * 4)),
        ("aten::add_", [[1024], [1024], []], "fp32", Cost(1024, 3 * 1024 * 4)),
        ("aten::add_", [[256, 13], [], []], "fp32", Cost(3328, 2 * 3328 * 4)),  # scalar other: not read
        ("aten::mul", [[4, 1024], [1024]], "fp32", Cost(4096, (4096 + 1024 + 4096) * 4)),  # broadcast
        ("aten::gelu", [[1000]], "fp32", Cost(175 * 1000, 8000)),
        ("aten::tanh", [[1000]], "fp16", Cost(180 * 1000, 4000)),
        ("aten::sigmoid", [[1000]], "fp32", Cost(4000, 8000)),
        ("aten::gelu_backward", [[1000], [1000]], "fp32", Cost(255 * 1000, 12000)),
        ("aten::relu", [[1000]], "fp16", Cost(1000, 4000)),
        ("aten::threshold_backward", [[10, 10], [10, 10], []], "fp32", Cost(100, 1200)),
        ("aten::addcdiv_", [[512], [512], [512], []], "fp32", Cost(3 * 512, 4 * 512 * 4)),
        ("aten::fill_", [[100], []], "fp32", Cost(0, 400)),
        ("aten::fill_", [[], []], "fp32", Cost(0, 4)),  # self is always a tensor: [] is 0-dim, one element
        ("aten::copy_", [[100], [100], []], "bf16", Cost(0, 400)),
        ("aten::_softmax", [[512, 1024], [], []], "fp32", Cost(174 * 524288, 2 * 524288 * 4)),
        ("aten::_softmax_backward_data", [[512, 1024], [512, 1024], [], []], "fp32", Cost(4 * 524288, 3 * 524288 * 4)),
        ("aten::sum", [[512, 1024], [], [], []], "fp32", Cost(524288, 524288 * 4)),
        ("aten::mean", [[16], [], [], []], "fp32", Cost(16, 64)),
        ("aten::max", [[16, 8], [], []], "fp32", Cost(128, 512)),  # max over a dim: a reduction
        ("aten::max", [[16, 8], [16, 8]], "fp32", Cost(128, 3 * 128 * 4)),  # max of two tensors: element-wise
        # layer norm: one read, one write, weight and bias; 8 FLOPs per element
        (
            "aten::native_layer_norm",
            [[8, 128, 768], [], [768], [768], []],
            "fp32",
            Cost(8 * 786432, (2 * 786432 + 1536) * 4),
        ),
        # batch norm (training): statistics pass + normalize pass, plus the per-channel parameters
        (
            "aten::cudnn_batch_norm",
            [[8, 64, 32, 32], [64], [64], [64], [64], [], [], []],
            "fp32",
            Cost(8 * 524288, 3 * 524288 * 4 + 4 * 64 * 4),
        ),
        (
            "aten::cudnn_batch_norm_backward",
            [[8, 64, 32, 32], [8, 64, 32, 32], [64], [64], [64], [64], [64], []],
            "fp32",
            Cost(10 * 524288, 5 * 524288 * 4),
        ),
        # embedding bag: n rows of D gathered into B bags; int64 indices and offsets
        (
            "aten::_embedding_bag",
            [[1000, 64], [2048], [32], [], [], [], [], [], []],
            "fp32",
            Cost(2048 * 64, 2048 * 64 * 4 + 32 * 64 * 4 + (2048 + 32) * 8),
        ),
        (
            "aten::_embedding_bag_backward",
            [[32, 64], [2048], [32], [32], [], [], [], [], [], []],
            "fp32",
            Cost(2048 * 64, 32 * 64 * 4 + 2048 * 64 * 4 + 4 * 2048 * 8),
        ),
        # execution-trace tensor lists
        (
            "aten::_foreach_add_",
            [[(1024, 1024), (1024,)], [(1024, 1024), (1024,)], []],
            "fp32",
            Cost(1049600, 3 * 1049600 * 4),
        ),
        ("aten::cat", [[(2, 3), (4, 3)], []], "fp32", Cost(0, 2 * 18 * 4)),
    ],
)
def test_memory_bound_ops(op: str, shapes: list[Any], dtype: str, expected: Cost) -> None:
    assert op_cost(op, shapes, dtype) == expected


@pytest.mark.parametrize(
    ("op", "shapes"),
    [
        ("aten::frobnicate", [[10]]),  # unknown op
        ("fbgemm::permute_2D_sparse_data", [[24], [24, 16], [768], [], []]),  # other namespace
        ("aten::mm", [[64, 16], [17, 32]]),  # inner dims differ
        ("aten::mm", [[64, 16]]),  # too few arguments
        ("aten::cat", [[], []]),  # Kineto records tensor lists as []
        ("aten::add", [[4, 3], [5]]),  # does not broadcast
        ("AddmmBackward0", [[16, 256]]),  # the autograd node's own dims: only the gradient
        ("aten::mm", None),
    ],
)
def test_unpriceable_ops_give_none(op: str, shapes: Any) -> None:
    assert op_cost(op, shapes) is None


# ---------------------------------------------------------------- roofline


def test_roofline_both_regimes_by_hand() -> None:
    # A100 fp16: 312 TFLOP/s, 1555 GB/s -> 1 us is 3.12e8 FLOPs or 1.555e6 bytes
    assert roofline_us(Cost(3.12e8, 1e3), A100, "fp16") == pytest.approx(1.0)
    assert roofline_us(Cost(1e3, 1.555e6), A100, "fp16") == pytest.approx(1.0)
    assert roofline_us(Cost(6.24e8, 1.555e6), A100, "fp16") == pytest.approx(2.0)  # compute-bound
    assert roofline_us(Cost(3.12e8, 3.11e6), A100, "fp16") == pytest.approx(2.0)  # memory-bound
    assert roofline_us(Cost(3.12e8, 0), A100, "fp32") == pytest.approx(3.12e8 / 19.5e12 * 1e6)
    # a non-GEMM class computes on the fp32 vector units, whatever its storage dtype
    assert roofline_us(Cost(19.5e6, 0), A100, "fp16", "elementwise") == pytest.approx(1.0)
    with pytest.raises(DaydreamError, match="has no bf16"):
        roofline_us(Cost(1e9, 1e3), get_device("v100"), "bf16", "gemm")


def test_speedups_by_hand() -> None:
    assert dtype_speedup("a100", "fp32", "fp16", "gemm") == pytest.approx(312 / 19.5)
    assert dtype_speedup("a100", "fp32", "tf32", "conv") == pytest.approx(8.0)
    assert dtype_speedup("a100", "fp32", "bf16", "elementwise") == 2.0
    assert dtype_speedup("a100", "fp32", "fp16", "comm") == 2.0  # half the bytes
    with pytest.raises(DaydreamError, match="no bf16"):
        dtype_speedup("v100", "fp32", "bf16", "gemm")
    assert device_speedup("v100", "a100", "gemm", "fp16") == pytest.approx(312 / 125)
    assert device_speedup("v100", "a100", "elementwise") == pytest.approx(1555 / 900)
    assert device_speedup("v100", "h100", "memcpy") == pytest.approx(63.0 / 15.75)  # PCIe 3 -> 5
    with pytest.raises(DaydreamError, match="collective model"):
        device_speedup("v100", "a100", "comm")


class _Graph:
    """A small graph as the builder makes it: runtime calls on a CPU thread launching kernels on a stream."""

    def __init__(self, device: str | None = "NVIDIA A100-SXM4-40GB") -> None:
        self.g = nx.DiGraph(device=device)
        self.t = 0.0

    def op(self, op: str, shapes: Any, kernels: list[tuple[str, str, float]], **extra: Any) -> list[int]:
        """One op instance: a runtime call per kernel (name, class, duration)."""
        out = []
        for name, cls, dur in kernels:
            cpu, gpu = len(self.g), len(self.g) + 1
            self.g.add_node(
                cpu,
                kind="cpu",
                name="cudaLaunchKernel",
                thread="cpu:1/1",
                op=op,
                top_op=op,
                shapes=shapes,
                start=self.t,
                duration=5.0,
                **extra,
            )
            self.g.add_node(
                gpu,
                kind="gpu",
                name=name,
                thread="gpu:0/7",
                op=op,
                top_op=op,
                shapes=shapes,
                start=self.t + 6,
                duration=dur,
                **{"class": cls},
                **extra,
            )
            self.g.add_edge(cpu, gpu, kind="launch", lag=1.0)
            self.t += 10.0 + dur
            out.append(gpu)
        return out

    def separator(self) -> None:
        """A CPU op between two calls of the same op (as real traces have: the next op's own work)."""
        self.g.add_node(
            len(self.g),
            kind="cpu",
            name="aten::empty",
            thread="cpu:1/1",
            op="aten::empty",
            shapes=None,
            start=self.t,
            duration=1.0,
        )
        self.t += 2.0


def _mm_us(n: int, latency: float, eff: float) -> float:
    return latency + roofline_us(op_cost("aten::mm", [[n, n], [n, n]]), A100, "fp32", "gemm") / eff  # type: ignore[arg-type]


def test_calibration_recovers_known_latency_and_efficiency() -> None:
    b = _Graph()
    for n in (128, 256, 512, 1024, 2048, 4096):
        b.op("aten::mm", [[n, n], [n, n]], [(f"sgemm_{n}", "gemm", _mm_us(n, 4.0, 0.6))])
        b.separator()
    for n in (1 << 10, 1 << 14, 1 << 18, 1 << 22):
        t = 2.0 + roofline_us(op_cost("aten::add", [[n], [n], []]), A100, "fp32", "elementwise") / 0.8  # type: ignore[arg-type]
        b.op("aten::add", [[n], [n], []], [("vectorized_elementwise_kernel", "elementwise", t)])
        b.separator()
    cal = calibrate(b.g)
    assert cal.device.key == "a100-40gb" and cal.dtype == "fp32"
    gemm, ew = cal.classes["gemm"], cal.classes["elementwise"]
    assert (gemm.count, ew.count) == (6, 4)
    assert gemm.latency_us == pytest.approx(4.0, rel=1e-3) and gemm.efficiency == pytest.approx(0.6, rel=1e-3)
    assert ew.latency_us == pytest.approx(2.0, rel=1e-3) and ew.efficiency == pytest.approx(0.8, rel=1e-3)
    # the papers' efficiency: the median of roofline / observed
    ratios = sorted(o.efficiency for o in observations(b.g, A100) if o.kernel_class == "gemm")
    assert gemm.median_ratio == pytest.approx((ratios[2] + ratios[3]) / 2)
    assert cal.to_dict()["classes"]["gemm"]["n"] == 6


def test_fit_latency_on_synthetic_data_and_fallback() -> None:
    r = [0.5, 1, 2, 5, 10, 20, 50, 100]
    latency, eff = fit_latency(r, [3.0 + x / 0.25 for x in r])
    assert latency == pytest.approx(3.0, rel=1e-3) and eff == pytest.approx(0.25, rel=1e-3)
    # rooflines too alike to separate the terms: no latency, the median ratio
    assert fit_latency([10, 11, 12], [20, 22, 30]) == (0.0, pytest.approx(0.5))


def test_attribution_sums_one_ops_kernels_and_skips_ambiguous_runs() -> None:
    b = _Graph()
    # split-K GEMM: two gemm-class kernels of one op instance -> one observation, their sum
    split = b.op(
        "aten::mm", [[16, 512], [512, 512]], [("sgemm_splitk", "gemm", 9.0), ("splitKreduce_kernel", "gemm", 3.0)]
    )
    b.separator()
    # mixed classes in one op instance (a GEMV plus a copy): the cost cannot be split -> left out
    b.op(
        "aten::addmm", [[1], [16, 256], [256, 1], [], []], [("copy_kernel", "elementwise", 3.0), ("gemv", "gemm", 4.0)]
    )
    b.separator()
    # two back-to-back calls the graph cannot tell apart (same op, shapes; a kernel name repeats) -> left out
    b.op("aten::fill_", [[64], []], [("fill_kernel", "elementwise", 2.0)])
    b.op("aten::fill_", [[64], []], [("fill_kernel", "elementwise", 2.0)])
    b.separator()
    # an op the costs cannot price
    b.op("fbgemm::permute_2D_sparse_data", [[24], [24, 16]], [("permute_kernel", "other", 4.0)])
    obs = observations(b.g, A100)
    assert len(obs) == 1
    (o,) = obs
    assert (o.op, o.observed_us, o.tasks) == ("aten::mm", 12.0, tuple(split))
    assert o.cost == op_cost("aten::mm", [[16, 512], [512, 512]])
    # with execution-trace tensor ids the two fills are two instances
    b2 = _Graph()
    b2.op("aten::fill_", [[64], []], [("fill_kernel", "elementwise", 2.0)], tensors_in=(1,), tensors_out=(1,))
    b2.op("aten::fill_", [[64], []], [("fill_kernel", "elementwise", 2.0)], tensors_in=(2,), tensors_out=(2,))
    assert len(observations(b2.g, A100)) == 2


def test_calibrate_needs_a_known_device() -> None:
    with pytest.raises(DaydreamError, match="does not name its GPU"):
        calibrate(_Graph(device=None).g)
    with pytest.raises(DaydreamError, match="'Imaginary GPU 9000' is not in the device catalog"):
        calibrate(_Graph(device="Imaginary GPU 9000").g)
    assert calibrate(_Graph(device="Imaginary GPU 9000").g, device="h100").device.key == "h100-sxm"


def _calibration(latency: float = 0.0, eff: float = 0.5) -> Calibration:
    entry = ClassEfficiency(eff, latency, eff, 10, eff, eff)
    return Calibration(A100, "fp32", {"gemm": entry, "elementwise": entry})


def test_predict_moves_a_traced_task_by_the_work_ratio() -> None:
    from daydream.perf.kernels.device_model import swap

    big = {
        "op": "aten::mm",
        "shapes": [[4096, 4096], [4096, 4096]],
        "class": "gemm",
        "duration": 10000.0,
        "name": "sgemm",
    }
    # on another GPU, a GEMM by the measured-kernels model (test_device_model.py): not the peaks' 19.5 -> 67 TFLOP/s
    moved = swap("gemm", big["op"], big["shapes"], A100, get_device("h100"), "fp32", "fp32")
    assert moved is not None and moved.ratio != pytest.approx(19.5 / 67, rel=0.02)
    assert predict_us(big, _calibration(), "h100") == pytest.approx(10000 * moved.ratio)
    # amp on the same device: by the rooflines, 19.5 -> 312 TFLOP/s (still compute-bound)
    assert predict_us(big, _calibration(), dtype="fp16") == pytest.approx(10000 * 19.5 / 312)
    # with a calibrated latency only the part above it scales
    assert predict_us(big, _calibration(latency=4.0), "h100") == pytest.approx(4 + 9996 * moved.ratio)
    # a class the model does not price moves by its rooflines: a reduction by the HBM bandwidths, 1555 -> 3350 GB/s
    total = {
        "op": "aten::sum",
        "shapes": [[1 << 26]],
        "class": "reduction",
        "duration": 1000.0,
        "name": "reduce_kernel",
    }
    assert predict_us(total, _calibration(), "h100") == pytest.approx(1000 * 1555 / 3350)
    tiny = {"op": "aten::add", "shapes": [[16], [16], []], "class": "elementwise", "duration": 3.0, "name": "add"}
    assert predict_us(tiny, _calibration(latency=4.0), "h100") == 3.0  # all fixed cost: does not move


def test_predict_inserted_and_unpriced_tasks() -> None:
    inserted = {"op": "aten::mm", "shapes": [[4096, 4096], [4096, 4096]], "class": "gemm", "name": "new"}
    r = roofline_us(op_cost("aten::mm", [[4096, 4096], [4096, 4096]]), A100, "fp32", "gemm")  # type: ignore[arg-type]
    assert predict_us(inserted, _calibration(latency=4.0)) == pytest.approx(4.0 + r / 0.5)
    unpriced = {"op": "fbgemm::lookup", "shapes": [[3]], "class": "elementwise", "duration": 90.0, "name": "x"}
    assert predict_us(unpriced, _calibration(), "a100-80gb") == pytest.approx(90 * 1555 / 2039)
    assert predict_us(unpriced, _calibration(), dtype="fp16") == pytest.approx(45.0)
    with pytest.raises(DaydreamError, match="cannot price task 'y'"):
        predict_us({"op": "fbgemm::lookup", "class": "other", "name": "y"}, _calibration())
    with pytest.raises(DaydreamError, match="no calibrated efficiency for conv"):
        predict_us(
            {"op": "aten::conv2d", "shapes": [[1, 3, 8, 8], [4, 3, 3, 3]], "class": "conv", "name": "c"}, _calibration()
        )


@pytest.mark.parametrize(
    "name, dtype",
    [
        ("ampere_sgemm_128x64_nn", "fp32"),
        ("volta_sgemm_64x64_nt", "fp32"),
        ("cudnn_volta_scudnn_128x64_relu_small_nn_v1", "fp32"),
        ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16", "tf32"),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(...)", "tf32"),
        ("volta_h884gemm_128x128_ldg8_nn", "fp16"),
        ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_nn", "fp16"),
        ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_nn", "bf16"),
        ("sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128", "fp8"),
        ("Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1", "fp32"),
        ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32", "fp16"),
        ("Cijk_Ailk_Bljk_BBS_BH_MT128x128x32", "bf16"),
        ("void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>", "fp32"),
        ("void cublasLt::splitKreduce_kernel<32, 16, int, __half>", "fp16"),
        ("cask_cudnn::computeWgradBOffsetsKernel(cask_cudnn::ComputeWgradBOffsetsParams)", None),
    ],
)
def test_a_kernel_name_tells_its_precision(name: str, dtype: str | None) -> None:
    assert kernel_dtype(name) == dtype


def test_each_gpu_computes_in_a_precision_it_has() -> None:
    v100, h100 = get_device("v100-sxm2-32gb"), get_device("h100")
    assert native_dtype(h100, "tf32") == "tf32" and native_dtype(A100, "bf16") == "bf16"
    assert native_dtype(v100, "tf32") == "fp32"  # no TF32: PyTorch's allow_tf32 does nothing there
    assert native_dtype(v100, "bf16") == "fp32"  # no BF16 tensor cores
    assert native_dtype(A100, "fp8") == "bf16" and native_dtype(v100, "fp8") == "fp16"


def test_a_kernel_moves_by_its_own_roofline_in_its_own_precision() -> None:
    from daydream.perf.kernels.device_model import swap

    h100, v100 = get_device("h100"), get_device("v100-sxm2-32gb")
    empty = Calibration(A100, "fp32", {})
    # an FP32 GEMM and a GEMV (one row) move by the measured-kernels model's work ratio (test_device_model.py)
    big = {
        "op": "aten::mm",
        "shapes": [[4096, 4096], [4096, 4096]],
        "class": "gemm",
        "duration": 8000.0,
        "name": "ampere_sgemm_128x64_nn",
    }
    gemv = {**big, "shapes": [[1, 4096], [4096, 4096]], "duration": 80.0}
    for task in (big, gemv):
        moved = swap("gemm", "aten::mm", task["shapes"], A100, h100, "fp32", "fp32")
        assert moved is not None and move_us(task, empty, h100) == pytest.approx(task["duration"] * moved.ratio)
    # the same GEMM traced in TF32 (its kernel name says so), a dtype the model has no measured kernels of: by the
    # rooflines (the extrapolated efficiencies of both sides are the same), the TF32 peaks on an H100, FP32 on a V100
    tf32 = {**big, "name": "sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n_tilesize128x128x16"}
    assert move_us(tf32, empty, h100) == pytest.approx(8000 * 156 / 494.5)
    assert move_us(tf32, empty, v100) == pytest.approx(8000 * 156 / 15.7)
    # the target's precision given: FP32 on the H100 (a program that turns TF32 off there)
    assert move_us(tf32, empty, h100, "fp32") == pytest.approx(8000 * 156 / 67)
    # no priced op (no shapes): the class's peaks in each side's precision; memory-bound classes by bandwidth
    conv = {
        "op": "aten::cudnn_convolution",
        "shapes": None,
        "class": "conv",
        "duration": 300.0,
        "name": "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc",
    }
    assert move_us(conv, empty, v100) == pytest.approx(300 * 156 / 15.7)
    relu = {
        "op": "aten::relu",
        "shapes": None,
        "class": "elementwise",
        "duration": 50.0,
        "name": "vectorized_elementwise_kernel<float>",
    }
    assert move_us(relu, empty, v100) == pytest.approx(50 * 1555 / 900)
    assert move_us({**relu, "duration": 0.0}, empty, v100) == 0.0


def test_resolved_gmae_floors_errors_at_the_clock_step() -> None:
    assert timing_resolution_us([2.0, 3.0, 120.0]) == 1.0
    assert timing_resolution_us([2.5, 3.0]) == 1e-3
    # an exact hit on a 2 us kernel counts as 0.5 us off; a 1 us miss on a 4 us kernel stays 25%
    assert resolved_gmae([2.0, 5.0], [2.0, 4.0], 1.0) == pytest.approx(25.0)


def test_roofline_accuracy_on_real_traces(shared_traces: Path) -> None:
    from daydream.perf.kernels.roofline import accuracy

    results = {a.name: a for a in accuracy([shared_traces / "param/linear_kineto.json.gz"])}
    # measured: GEMM 4.9% held-out (n=31) on the 2080 Ti linear trace; element-wise 29% with the kernel classes
    # as the graph builder gives them today (7.4% once 'lambda' kernels stop being classed as optimizer)
    gemm = results["roofline/gemm/rtx-2080-ti"]
    assert gemm.n == 31 and gemm.gmae_pct < 8.0
    ew, ew_ratio = results["roofline/elementwise/rtx-2080-ti"], results["roofline-ratio/elementwise/rtx-2080-ti"]
    assert ew.gmae_pct < 35.0 and ew.gmae_pct < ew_ratio.gmae_pct / 2
    assert "a perfect prediction scores" in ew.data
    dlrm = {a.name: a for a in accuracy([shared_traces / "param/dlrm8/rank0.json.gz"], ratio_baseline=False)}
    assert not any(name.startswith("roofline-ratio/") for name in dlrm)
    # measured 23.5% (n=11): tiny GEMMs whose cuBLAS algorithm (gemv, split-K, sgemm) varies with the shape
    assert dlrm["roofline/gemm/v100-sxm2-32gb"].gmae_pct < 30.0
