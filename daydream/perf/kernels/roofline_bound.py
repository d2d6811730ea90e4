"""The roofline bound of a kernel: t = max(FLOPs / peak, bytes / bandwidth) on a device's datasheet figures, a copy
over its PCIe link, and the fit of t = latency + roofline / efficiency to observed times.

What the calibrated roofline (:mod:`daydream.perf.kernels.roofline`) and the device model fitted on measured kernels
(:mod:`daydream.perf.kernels.device_model`) both build on, so that neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from daydream.errors import DaydreamError
from daydream.perf.kernels.costs import Cost
from daydream.perf.kernels.devices import Device, peak_flops
from daydream.trace.sizes import normalize_dtype

# Kernels whose inner loop runs on tensor/matrix cores: bounded by the dtype's tensor peak.
MATMUL_CLASSES = frozenset({"gemm", "conv", "attention"})
# Kernels that move data between the host and the device: bounded by the PCIe link on a device swap.
HOST_LINK_CLASSES = frozenset({"memcpy"})
# Per-direction x16 PCIe bandwidth by generation, GB/s (PCI-SIG: 8, 16, 32, 64 GT/s per lane, 128b/130b).
PCIE_GBPS = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}


def checked_dtype(dtype: str) -> str:
    """``dtype`` in its normal name (``float16`` -> ``fp16``); :class:`DaydreamError` for one daydream does not know."""
    try:
        return normalize_dtype(dtype)
    except ValueError as exc:
        raise DaydreamError(str(exc)) from None


def compute_peak(device: Device, dtype: str, kernel_class: str | None = None) -> float:
    """FLOP/s a kernel of ``kernel_class`` can reach: the dtype's tensor/matrix peak for GEMM-like classes (and
    when no class is given); the FP32 vector rate for the rest, since PyTorch computes fp16/bf16 element-wise
    math in fp32 (fp64 kernels use the fp64 rate)."""
    dt = checked_dtype(dtype)
    if kernel_class is None or kernel_class in MATMUL_CLASSES or dt == "fp64":
        return peak_flops(device, dt)
    return device.vector_tflops * 1e12


def roofline_us(cost: Cost, device: Device, dtype: str = "fp32", kernel_class: str | None = None) -> float:
    """max(FLOPs / peak, bytes / memory bandwidth), in microseconds."""
    compute_s = cost.flops / compute_peak(device, dtype, kernel_class) if cost.flops > 0 else 0.0
    memory_s = cost.bytes / device.hbm_bytes_per_s
    return max(compute_s, memory_s) * 1e6


def memcpy_us(nbytes: float, direction: str, device: Device) -> float:
    """Microseconds to copy ``nbytes`` over the device's x16 PCIe link (``h2d``, ``d2h``, each at its per-direction
    peak) or within its memory (``d2d``: read and write at the memory bandwidth). Peak rates, no fixed cost: the
    copies priced this way (offloaded activations, hot embedding rows) run to hundreds of MB, where the microseconds
    of a copy's setup do not show."""
    if nbytes < 0:
        raise DaydreamError(f"memcpy: bytes must be >= 0, not {nbytes:g}")
    way = direction.lower()
    if way in ("h2d", "d2h"):
        return nbytes / (PCIE_GBPS[device.pcie_gen] * 1e3)  # GB/s = 1e3 bytes/us
    if way == "d2d":
        return 2 * nbytes / (device.hbm_gbps * 1e3)
    raise DaydreamError(f'memcpy: direction is "h2d", "d2h" or "d2d", not {direction!r}')


# The two terms are told apart only when the class's rooflines span at least this factor.
MIN_ROOFLINE_SPAN = 8.0


def fit_latency(roofline: Sequence[float], observed: Sequence[float]) -> tuple[float, float]:
    """(latency_us, efficiency) of t = latency + roofline / efficiency fitted to these pairs: least squares on
    log time with a soft-L1 loss (one odd kernel, a different algorithm or a cold cache, does not drag the fit),
    0 <= latency <= the fastest observation. Falls back to (0, median ratio) when the rooflines span less than
    ``MIN_ROOFLINE_SPAN``."""
    r, t = np.asarray(roofline, dtype=float), np.asarray(observed, dtype=float)
    ratio = float(np.median(r / t))
    positive = r[r > 0]
    if len(r) < 3 or len(positive) < 3 or positive.max() < MIN_ROOFLINE_SPAN * positive.min():
        return 0.0, ratio
    a0 = 0.5 * float(t.min())
    big = r >= np.median(positive)  # the size-dependent part shows best on the larger kernels
    inv0 = max(float(np.median(np.maximum(t[big] - a0, 1e-3) / r[big])), 1e-6)

    def residual(x: np.ndarray) -> np.ndarray:
        return np.log(x[0] + r * np.exp(x[1])) - np.log(t)

    from scipy.optimize import least_squares  # slow to import: only when a curve is fitted

    fit = least_squares(
        residual, [a0, np.log(inv0)], bounds=([0.0, -30.0], [float(t.min()), 30.0]), loss="soft_l1", f_scale=0.05
    )
    return float(fit.x[0]), float(np.exp(-fit.x[1]))
