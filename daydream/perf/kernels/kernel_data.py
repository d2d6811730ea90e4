"""Measured kernel latencies of many GPUs with their shapes: the data a cross-device kernel model is fitted and tested
on (leave one GPU out).

It reads the layout of the NeuSight data set (Lee et al., "Forecasting GPU Performance for Deep Learning Training and
Inference", ASPLOS 2025; ../shared/calibration/neusight, README there): per op a CSV of rows with the op's dims, the
device and the latency (ms), and ``device_configs/*.json`` with each GPU's SMs, clock, FP32 peak, memory bandwidth
and L2. Rows become :class:`Measurement` (class, op, shape, device, latency in us); devices :class:`Gpu`.

Classes, as daydream's kernel classes name them: ``gemm`` (``linear``: B x M x K by K x N; ``bmm``), ``conv``,
``elementwise`` (``add``, ``mul``, ``div``, ``pow`` and their unary ``...u`` forms, ``relu``, ``gelu``, ``tanh``: B x H
FP32 elements), ``norm`` (``ln``, ``softmax``: B rows of H). Every latency is FP32.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec

from daydream.errors import DaydreamError
from daydream.files import read_input
from daydream.perf.kernels.costs import Cost, elementwise_cost, gemm_cost

CLASSES = ("gemm", "conv", "elementwise", "norm")
OP_CLASS = {
    "linear": "gemm",
    "bmm": "gemm",
    "conv": "conv",
    "ln": "norm",
    "softmax": "norm",
    **{
        op: "elementwise" for op in ("add", "addu", "mul", "mulu", "div", "divu", "pow", "powu", "relu", "gelu", "tanh")
    },
}
# what a data set's CSV holds: a few MB; a bound so that a wrong path cannot take the memory
MAX_CSV_BYTES = 256 * 1024 * 1024
FP32_BYTES = 4


class Gpu(msgspec.Struct, frozen=True):
    """One GPU's features as the data set's device configs give them."""

    name: str
    sms: int
    cores_per_sm: int
    clock_mhz: float
    fp32_gflops: float  # the FP32 peak (AMD: its matrix-core rate for GEMMs)
    vector_gflops: float  # the FP32 rate element-wise kernels run at (NVIDIA: the same)
    memory_gbps: float
    l2_mb: float
    vendor: str


class Measurement(msgspec.Struct, frozen=True):
    """One kernel measured on one GPU: its class, op, dims (``B, M, N, K``; conv: ``B, C, F, R, S, stride, pad``;
    element-wise and norm: ``B, H``), the GPU's name and the latency, us."""

    kernel_class: str
    op: str
    dims: tuple[int, ...]
    device: str
    latency_us: float

    def cost(self) -> Cost:
        """FLOPs (a fused multiply-add counts two) and the bytes the op must move at least, its inputs read once and
        its output written once, in FP32: :mod:`daydream.perf.kernels.costs`' rules where it has one for the op."""
        d = self.dims
        if self.kernel_class == "gemm":
            b, m, n, k = d
            return gemm_cost(m, n, k, "fp32", batch=b)
        if self.kernel_class == "conv":
            b, c, f, r, s, _, _ = d
            out = self.conv_out()
            return Cost(
                2.0 * b * f * c * r * r * out * out, FP32_BYTES * (b * c * s * s + f * c * r * r + b * f * out * out)
            )
        reads = 1 if self.op.endswith("u") or self.op in ("relu", "gelu", "tanh", "ln", "softmax") else 2
        return elementwise_cost(d[0] * d[1], "fp32", 5 if self.kernel_class == "norm" else 1, reads=reads)

    def conv_out(self) -> int:
        """A convolution's output size (its side: square inputs and windows), from its dims."""
        _, _, _, r, s, stride, pad = self.dims
        return max((s + 2 * pad - r) // max(stride, 1) + 1, 1)

    def flops(self) -> float:
        return self.cost().flops

    def bytes(self) -> float:
        return self.cost().bytes

    def key(self) -> tuple[str, tuple[int, ...]]:
        """What the same kernel is on another GPU: its op and dims."""
        return (self.op, self.dims)


def read_gpus(root: str | Path) -> dict[str, Gpu]:
    """Every GPU of ``root``'s ``device_configs`` (the tensor-parallel variants, ``*_TP.json``, left out), by name."""
    out: dict[str, Gpu] = {}
    for path in sorted(Path(root).glob("**/device_configs/*.json")):
        if path.name.endswith("_TP.json"):
            continue
        d = json.loads(read_input(path, "device config", 1 << 20))
        amd = "SingleFLOPsMM" in d
        gemm = float(d["SingleFLOPsMM"] if amd else d["SingleFLOPs"])
        out[d["Device"]] = Gpu(
            name=d["Device"],
            sms=int(d["Num_Sm"]),
            cores_per_sm=int(d["Core_Per_SM"]),
            clock_mhz=float(d["Freq"]),
            fp32_gflops=gemm,
            vector_gflops=float(d["SingleFLOPsVEC"]) if amd else gemm,
            memory_gbps=float(d["Mem_Bw"]),
            l2_mb=float(d["L2Cache"]),
            vendor="amd" if amd else "nvidia",
        )
    return out


_DIMS = {
    "gemm": ("B", "M", "N", "K"),
    "conv": ("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"),
    "elementwise": ("B", "H"),
    "norm": ("B", "H"),
}


def read_sources(roots: Sequence[str | Path]) -> list[Measurement]:
    """The measured kernels of several data sets (the NeuSight set, a GPU's kernel tables such as
    ``kernels/data/h100-sxm``), each GPU and class from the first root that holds it: two measurement sessions of one
    GPU (other software, another machine, a timed call against a timed kernel) are not mixed in one anchor."""
    out: list[Measurement] = []
    taken: dict[tuple[str, str], int] = {}
    for k, root in enumerate(roots):
        for m in read_measurements(root):
            if taken.setdefault((m.device, m.kernel_class), k) == k:
                out.append(m)
    return out


def read_measurements(root: str | Path) -> Iterator[Measurement]:
    """Every measured kernel under ``root`` (train and test, NVIDIA and AMD), each once: a row repeated in several
    files (the test set's ``vec`` and ``habitat`` repeat ``elem``, ``ln`` and ``softmax``) counts once. A table with
    a ``DType`` column (bench/calibrate_gpu.py's) gives its FP32 rows."""
    seen: set[tuple[str, tuple[int, ...], str]] = set()
    files = [p for p in sorted(Path(root).glob("**/*.csv.gz")) if "/dims/" not in str(p)]
    if not files:
        raise DaydreamError(f"{root}: no measured kernels (*.csv.gz in the NeuSight layout) under it")
    for path in files:
        text = gzip.decompress(read_input(path, "kernel table", MAX_CSV_BYTES)).decode("utf-8", "replace")
        for row in csv.DictReader(io.StringIO(text)):
            op = row.get("OPName", "")
            cls = OP_CLASS.get(op)
            if cls is None or not row.get("Device") or not row.get("Latency"):
                continue
            if row.get("DType", "fp32") != "fp32":  # a sweep's other dtypes (bench/calibrate_gpu.py): FP32 only here
                continue
            try:
                dims = tuple(int(float(row[k])) for k in _DIMS[cls])
                latency = float(row["Latency"]) * 1e3
            except (KeyError, ValueError):
                continue
            if not (math.isfinite(latency) and latency > 0 and all(v >= 0 for v in dims)):
                continue
            ident = (op, dims, row["Device"])
            if ident in seen:
                continue
            seen.add(ident)
            yield Measurement(cls, op, dims, row["Device"], latency)
