"""Roofline model with efficiencies calibrated on the trace itself.

``roofline_us(cost, device, dtype)`` is the bound t = max(FLOPs / peak, bytes / bandwidth) of [P1, P2]. A real
kernel reaches a fraction of it: ``calibrate(graph)`` measures that fraction per kernel class on the graph's own
GPU tasks whose op and shapes give a cost, and ``predict_us`` moves a task to another device or dtype by the ratio
of its roofline bounds there and here, so the efficiency the trace showed carries over.

Calibration per class: ``median_ratio`` is the papers' efficiency, the median of roofline / observed. It cannot
describe small kernels: every kernel pays a fixed 2-5 us (launch, ramp-up, tail) whatever its size, so on real
traces, where most kernels are small, roofline / observed spans orders of magnitude within one class. The model
used is therefore t = latency + roofline / efficiency, both fitted per class (robustly, on log time); where the
class's rooflines span too narrow a range to separate the two terms, latency is 0 and efficiency the median
ratio. Within a class, an op whose large kernels (rate term at least twice the latency) number
``MIN_OP_COUNT`` or more gets its own efficiency on the class's latency (``addmm`` runs another cuBLAS kernel
than ``mm``). Efficiencies are fractions of the roofline (roofline / observed, at most about 1). A traced task
moves to another device or dtype as min(t, latency) + max(t - latency, 0) * ratio of rooflines: the fixed part
does not scale.

Which kernels are priced (attribution): an op's cost covers all the kernels the op launches. The graph has no
op-instance id, so an op instance is recovered as a run of consecutive runtime calls on one CPU thread with the
same op, shapes, top-level op and (with an execution trace) tensors. A run is priced when all its kernels are of
one class and no kernel name repeats in it; its observed time is the sum of its kernels (a split-K GEMM and its
reduction kernel are one GEMM). A run of several classes (``addmm`` as a GEMV plus a copy) cannot be split
without a guess and is left out, as is a run where a kernel repeats: two back-to-back calls of the same op on
same-shaped tensors, which the graph cannot tell apart, would be priced as one.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec
import networkx as nx

from daydream.errors import DaydreamError
from daydream.perf.kernels.costs import Cost, op_cost
from daydream.perf.kernels.devices import Device, device_of_graph, device_of_trace, get_device, peak_flops
from daydream.perf.kernels.roofline_bound import (
    HOST_LINK_CLASSES,
    MATMUL_CLASSES,
    MIN_ROOFLINE_SPAN,
    PCIE_GBPS,
    checked_dtype,
    compute_peak,
    fit_latency,
    memcpy_us,
    roofline_us,
)
from daydream.perf.trust.accuracy import Accuracy, gmae
from daydream.trace.sizes import dtype_bytes

# the bound itself and its constants are kernels/roofline_bound.py's (the device model fits on them too); they are
# importable from here as before
__all__ = [
    "HOST_LINK_CLASSES",
    "MATMUL_CLASSES",
    "MIN_ROOFLINE_SPAN",
    "PCIE_GBPS",
    "compute_peak",
    "fit_latency",
    "memcpy_us",
    "roofline_us",
]


@dataclass(frozen=True)
class Observation:
    """One priced op instance: its kernels (graph nodes), their total time and the op's cost."""

    kernel_class: str
    op: str
    shapes: Any
    dtype: str
    cost: Cost
    observed_us: float
    roofline_us: float
    start: float
    tasks: tuple[int, ...]

    @property
    def efficiency(self) -> float:
        return self.roofline_us / self.observed_us


class ClassEfficiency(msgspec.Struct, frozen=True):
    """How close one kernel class came to its roofline over ``count`` op instances: t = latency_us + roofline /
    efficiency; ``median_ratio`` (quartiles ``q1``, ``q3``): the median of roofline / observed. JSON: ``count`` is
    ``n``."""

    efficiency: float
    latency_us: float
    median_ratio: float
    count: int = msgspec.field(name="n")
    q1: float
    q3: float

    def predict_us(self, roofline: float) -> float:
        return self.latency_us + roofline / self.efficiency


@dataclass(frozen=True)
class Calibration:
    """Per-class efficiencies measured on one device; ``dtype``: what the traced kernels computed in."""

    device: Device
    dtype: str
    classes: Mapping[str, ClassEfficiency]
    ops: Mapping[tuple[str, str], ClassEfficiency] = field(default_factory=dict)

    def entry(self, kernel_class: str, op: str | None = None) -> ClassEfficiency | None:
        """The op's own calibration within the class where it had ``MIN_OP_COUNT`` instances, else the class's."""
        if op is not None and (own := self.ops.get((kernel_class, op))) is not None and own.count >= MIN_OP_COUNT:
            return own
        return self.classes.get(kernel_class)

    def to_dict(self) -> dict[str, Any]:
        """The device by its catalog key; each op's entry with its class and name first."""
        return {
            "device": self.device.key,
            "dtype": self.dtype,
            "classes": msgspec.to_builtins(dict(self.classes)),
            "ops": [{"class": cls, "op": op, **msgspec.to_builtins(v)} for (cls, op), v in self.ops.items()],
        }


def task_dtype(attrs: Mapping[str, Any], default: str = "fp32") -> str:
    """A task's dtype: its own ``dtype`` attribute where a builder or a transform set one, else ``default``
    (Kineto's "Input Dims" carry no dtypes)."""
    dt = attrs.get("dtype")
    return checked_dtype(dt if isinstance(dt, str) and dt else default)


def _shape_key(shapes: Any) -> Any:
    if isinstance(shapes, (list, tuple)):
        return tuple(_shape_key(s) for s in shapes)
    return shapes


def _op_runs(graph: nx.DiGraph) -> dict[int, int]:
    """Each launching CPU task -> the id of its op instance (see the module docstring)."""
    by_thread: dict[Any, list[int]] = defaultdict(list)
    for node, a in graph.nodes(data=True):
        if a.get("kind") == "cpu":
            by_thread[a.get("thread")].append(node)
    run_of: dict[int, int] = {}
    run = 0
    for nodes in by_thread.values():
        nodes.sort(key=lambda n: (graph.nodes[n].get("start") or 0.0, n))
        previous: Any = None
        for node in nodes:
            a = graph.nodes[node]
            key = (a.get("op"), a.get("top_op"), _shape_key(a.get("shapes")), a.get("tensors_in"), a.get("tensors_out"))
            if a.get("op") is None or key != previous:
                run += 1
            previous = key
            run_of[node] = run
    return run_of


def observations(graph: nx.DiGraph, device: Device, dtype: str = "fp32") -> list[Observation]:
    """The graph's priced op instances (kernel tasks grouped as the module docstring says), in start order."""
    run_of = _op_runs(graph)
    kernels: dict[int, list[int]] = defaultdict(list)
    for node, a in graph.nodes(data=True):
        if a.get("kind") != "gpu":
            continue
        launch = next((p for p in graph.predecessors(node) if graph.edges[p, node].get("kind") == "launch"), None)
        if launch is not None and launch in run_of:
            kernels[run_of[launch]].append(node)
    out: list[Observation] = []
    for nodes in kernels.values():
        attrs = [graph.nodes[n] for n in nodes]
        first = attrs[0]
        classes = {a.get("class") for a in attrs}
        names = [a.get("name") for a in attrs]
        if len(classes) != 1 or len(set(names)) != len(names) or not first.get("op") or not first.get("shapes"):
            continue
        dt = task_dtype(first, dtype)
        cost = op_cost(first["op"], first["shapes"], dt)
        observed = sum(float(a.get("duration") or 0.0) for a in attrs)
        if cost is None or observed <= 0:
            continue
        cls = str(first.get("class"))
        out.append(
            Observation(
                cls,
                first["op"],
                first["shapes"],
                dt,
                cost,
                observed,
                roofline_us(cost, device, dt, cls),
                min(float(a.get("start") or 0.0) for a in attrs),
                tuple(sorted(nodes)),
            )
        )
    out.sort(key=lambda o: (o.start, o.tasks))
    return out


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


# An op's own calibration is used (instead of its class's) from this many instances on.
MIN_OP_COUNT = 3


def _entry(items: Sequence[Observation]) -> ClassEfficiency:
    effs = [o.efficiency for o in items]
    q1, q3 = _quartiles(effs)
    latency, eff = fit_latency([o.roofline_us for o in items], [o.observed_us for o in items])
    return ClassEfficiency(eff, latency, statistics.median(effs), len(items), q1, q3)


def _op_entry(items: Sequence[Observation], cls_entry: ClassEfficiency) -> ClassEfficiency | None:
    """An op's own efficiency on top of its class's latency, from its large instances only: those whose
    size-dependent time under the class model (roofline / efficiency) is at least twice the latency. A small kernel
    that is slower than its class shows a slower fixed cost, not a slower rate: extrapolating that as a rate
    would multiply a larger kernel's time. None when the op has fewer than ``MIN_OP_COUNT`` large instances."""
    a = cls_entry.latency_us
    big = [
        o for o in items if o.roofline_us / cls_entry.efficiency >= 2 * a and o.observed_us > a and o.roofline_us > 0
    ]
    if len(big) < MIN_OP_COUNT:
        return None
    effs = [o.roofline_us / (o.observed_us - a) for o in big]
    q1, q3 = _quartiles([o.efficiency for o in big])
    return ClassEfficiency(statistics.median(effs), a, statistics.median(o.efficiency for o in big), len(big), q1, q3)


def fit_calibration(obs: Iterable[Observation], device: Device, dtype: str = "fp32") -> Calibration:
    """Per-class latency and efficiency of these observations (see ``fit_latency``), with the median ratio; and
    per op within a class, the op's own efficiency where its kernels are large enough to show it (one op's
    kernels can differ from the rest of the class: ``addmm`` runs another cuBLAS kernel than ``mm``)."""
    by_class: dict[str, list[Observation]] = defaultdict(list)
    by_op: dict[tuple[str, str], list[Observation]] = defaultdict(list)
    for o in obs:
        by_class[o.kernel_class].append(o)
        by_op[(o.kernel_class, o.op)].append(o)
    classes = {cls: _entry(items) for cls, items in sorted(by_class.items())}
    ops = {key: e for key, items in sorted(by_op.items()) if (e := _op_entry(items, classes[key[0]])) is not None}
    return Calibration(device, checked_dtype(dtype), classes, ops)


def _device_of(graph: nx.DiGraph) -> Device:
    name = graph.graph.get("device")
    if not name:
        raise DaydreamError("the graph does not name its GPU (the trace has no deviceProperties): cannot calibrate")
    device = device_of_graph(graph)
    if device is None:
        raise DaydreamError(f"the graph's GPU '{name}' is not in the device catalog: cannot calibrate")
    return device


def calibrate(graph: nx.DiGraph, dtype: str = "fp32", device: Device | str | None = None) -> Calibration:
    """Per-class efficiencies of the graph's priced kernels on the graph's own GPU (or ``device``, for a trace
    whose GPU name the catalog cannot resolve alone)."""
    dev = _resolve(device) if device is not None else _device_of(graph)
    return fit_calibration(observations(graph, dev, dtype), dev, dtype)


def _resolve(device: Device | str) -> Device:
    return device if isinstance(device, Device) else get_device(device)


def predict_us(
    task_attrs: Mapping[str, Any],
    calibration: Calibration,
    device: Device | str | None = None,
    dtype: str | None = None,
    tally: dict[str, Any] | None = None,
) -> float:
    """A task's time on ``device`` (default: the calibration's) computing in ``dtype`` (default: its own).

    - op priced and duration traced: the part above the class's calibrated latency times the work's ratio there and
      here, plus the latency. On another GPU, for a class the measured-kernels model prices (GEMMs, convolutions,
      element-wise, norms, softmax: :mod:`daydream.perf.kernels.device_model`), its ratio; else (and for a dtype change
      on
      the same GPU) roofline(there) / roofline(here) - the efficiency the task itself showed carries over. Every
      kernel moved to another GPU is counted into ``tally`` (:func:`count_swap`);
    - op priced, no duration (an inserted task): the class's latency + roofline(there) / its efficiency;
    - op not priced, duration traced: the duration divided by the class's device and dtype speedups;
    - neither: DaydreamError.
    """
    src, dst = calibration.device, _resolve(device) if device is not None else calibration.device
    src_dt = task_dtype(task_attrs, calibration.dtype)
    dst_dt = checked_dtype(dtype) if dtype is not None else src_dt
    cls = str(task_attrs.get("class") or "other")
    duration = task_attrs.get("duration")
    op, shapes = task_attrs.get("op"), task_attrs.get("shapes")
    cost_src = op_cost(op, shapes, src_dt) if op and shapes else None
    cost_dst = op_cost(op, shapes, dst_dt) if op and shapes else None
    if cost_src is not None and cost_dst is not None:
        there = roofline_us(cost_dst, dst, dst_dt, cls)
        if duration:
            entry = calibration.entry(cls, op)
            t, fixed = float(duration), entry.latency_us if entry else 0.0
            here = roofline_us(cost_src, src, src_dt, cls)
            if src.key == dst.key:  # a dtype change on the traced GPU: the rooflines
                return min(t, fixed) + max(t - fixed, 0.0) * (there / here if here > 0 else 1.0)
            from daydream.perf.kernels.device_model import swap  # reads its data file on the first swap

            priced = swap(cls, str(op), shapes, src, dst, src_dt, dst_dt)
            ratio = priced.ratio if priced is not None else there / here if here > 0 else 1.0
            moved = min(t, fixed) + max(t - fixed, 0.0) * ratio
            if tally is not None:
                count_swap(tally, moved, priced)
            return moved
        entry = calibration.entry(cls, op)
        if entry is None:
            raise DaydreamError(f"no calibrated efficiency for {cls} kernels on {src.key}: cannot price {op}")
        return entry.predict_us(there)
    if duration:
        if cls in MATMUL_CLASSES:  # each side's own peak (the target may lack the source's dtype: TF32 on a V100)
            moved = float(duration) * peak_flops(src, src_dt) / peak_flops(dst, dst_dt)
        else:
            moved = float(duration) / (device_speedup(src, dst, cls, src_dt) * dtype_speedup(dst, src_dt, dst_dt, cls))
        if tally is not None and src.key != dst.key:
            count_swap(tally, moved, None)
        return moved
    raise DaydreamError(f"cannot price task '{task_attrs.get('name')}': no duration and no cost for op {op!r}")


# What a GEMM-like kernel's name says about the precision it computes in (cuBLAS, cuBLASLt, CUTLASS, cuDNN, rocBLAS /
# Tensile); first match wins. Names that say nothing (a split-K reduction, a Winograd transform) are left to the caller.
_KERNEL_DTYPES = (
    (re.compile(r"e4m3|e5m2|fp8", re.I), "fp8"),
    (re.compile(r"bf16|Cijk_\w*?_B[BS]S?_", re.I), "bf16"),
    (re.compile(r"tf32|xf32|_80_tensorop_s1688"), "tf32"),  # on sm80 a 16x8x8 fp32-accumulating MMA is TF32
    (re.compile(r"fp16|f16|h884|h1688|h16816|hgemm|half|Cijk_\w*?_H[BHS]S?_"), "fp16"),
    (re.compile(r"sgemm|scudnn|f32f32_f32|Cijk_\w*?_S[BS]?_|[<,] ?float\b"), "fp32"),
)


@lru_cache(maxsize=1 << 14)
def kernel_dtype(name: str) -> str | None:
    """The precision a kernel computes in, as its name tells (``ampere_sgemm_128x64_nn`` fp32,
    ``sm80_xmma_fprop_implicit_gemm_tf32f32_...`` tf32, ``volta_h884gemm_...`` fp16), or None where it does not.
    Cached: a trace's kernels share a few hundred names (a sweep of a 1M-event trace's GEMMs tried every pattern on
    each, 0.35 s of `run amp`)."""
    for pattern, dtype in _KERNEL_DTYPES:
        if pattern.search(name):
            return dtype
    return None


def native_dtype(device: Device, dtype: str) -> str:
    """The precision ``device`` runs a GEMM of ``dtype`` in: the dtype itself where the device has a peak for it;
    else what frameworks fall back to there (TF32 on a GPU without it is FP32, as PyTorch's allow_tf32 then does
    nothing; BF16 and FP16 without tensor cores for them compute at the FP32 rate; FP8 without it runs in BF16 or
    FP16)."""
    dt = checked_dtype(dtype)
    fallbacks = {"tf32": ("fp32",), "bf16": ("fp32",), "fp16": ("fp32",), "fp8": ("bf16", "fp16", "fp32")}
    for candidate in (dt, *fallbacks.get(dt, ())):
        if candidate in device.peak_tflops:
            return candidate
    return dt


def count_swap(tally: dict[str, Any], moved_us: float, priced: Any) -> None:
    """Add one kernel moved to another GPU to ``tally`` (plain data, kept on the graph for the interval): its new
    time, and where the measured-kernels model priced it, that time times the error to expect of it, whether the
    target was extrapolated and the measured GPU it was read as (``read_as``)."""
    from daydream.perf.kernels.device_model import roofline_error_pct

    tally["kernels"] = tally.get("kernels", 0) + 1
    tally["time_us"] = tally.get("time_us", 0.0) + moved_us
    if priced is None:  # the roofline ratio: its error as measured on the model's data, extrapolated
        tally["error_us"] = tally.get("error_us", 0.0) + moved_us * roofline_error_pct() / 100
        tally["extrapolated_us"] = tally.get("extrapolated_us", 0.0) + moved_us
        return
    tally["modelled"] = tally.get("modelled", 0) + 1
    tally["modelled_us"] = tally.get("modelled_us", 0.0) + moved_us
    tally["error_us"] = tally.get("error_us", 0.0) + moved_us * priced.error_pct / 100
    if not priced.measured:
        tally["extrapolated_us"] = tally.get("extrapolated_us", 0.0) + moved_us
    if priced.read_as is not None:
        tally["read_as"] = priced.read_as


def move_us(
    task_attrs: Mapping[str, Any],
    calibration: Calibration,
    device: Device | str,
    dtype: str | None = None,
    tally: dict[str, Any] | None = None,
) -> float:
    """A traced GPU task's time on ``device``, each side in its own precision: the task's ``dtype`` (default: what
    its kernel name says, else the calibration's) on the traced GPU; on ``device`` the same where it has it, else
    its fallback (:func:`native_dtype`) for GEMM-like classes, or ``dtype`` where given. Priced ops (op and
    shapes give FLOPs and bytes) keep their calibrated fixed time and scale the rest by the ratio of their own
    rooflines (a memory-bound GEMM by the bandwidth ratio, a compute-bound one by the peak ratio); the rest by their
    class's ratio (:func:`predict_us`)."""
    dst = _resolve(device)
    if task_attrs.get("duration") == 0:
        return 0.0  # a traced task of no time (an empty copy) stays so
    src_dt = task_dtype(task_attrs, kernel_dtype(str(task_attrs.get("name") or "")) or calibration.dtype)
    cls = str(task_attrs.get("class") or "other")
    if cls in MATMUL_CLASSES:
        src_dt = native_dtype(calibration.device, src_dt)
    if dtype is not None:
        dst_dt = checked_dtype(dtype)
    elif cls in MATMUL_CLASSES:
        dst_dt = native_dtype(dst, src_dt)
    else:
        dst_dt = src_dt
    return predict_us({**task_attrs, "dtype": src_dt}, calibration, dst, dst_dt, tally)


def dtype_speedup(device: Device | str, from_dtype: str, to_dtype: str, kernel_class: str) -> float:
    """How much faster a kernel of ``kernel_class`` runs in ``to_dtype`` than in ``from_dtype`` on ``device``
    (the factor of an amp what-if): GEMM-like classes by the ratio of tensor peaks, the rest (memory-bound,
    copies and collectives included) by the ratio of element sizes."""
    dev = _resolve(device)
    if kernel_class in MATMUL_CLASSES:
        return peak_flops(dev, to_dtype) / peak_flops(dev, from_dtype)
    return dtype_bytes(checked_dtype(from_dtype)) / dtype_bytes(checked_dtype(to_dtype))


def device_speedup(src: Device | str, dst: Device | str, kernel_class: str, dtype: str = "fp32") -> float:
    """How much faster a kernel of ``kernel_class`` runs on ``dst`` than on ``src``: GEMM-like classes by the
    ratio of ``dtype`` peaks, host copies by PCIe bandwidth, every other class by memory bandwidth (element-wise,
    reductions, norms, embedding lookups and copies are memory-bound; an unclassified kernel is assumed so).
    Collectives are priced by the collective model, not by a ratio: DaydreamError."""
    s, d = _resolve(src), _resolve(dst)
    if kernel_class == "comm":
        raise DaydreamError("communication kernels are priced by the collective model, not by a device ratio")
    if kernel_class in MATMUL_CLASSES:
        return peak_flops(d, dtype) / peak_flops(s, dtype)
    if kernel_class in HOST_LINK_CLASSES:
        return PCIE_GBPS[d.pcie_gen] / PCIE_GBPS[s.pcie_gen]
    return d.hbm_gbps / s.hbm_gbps


def timing_resolution_us(durations: Iterable[float]) -> float:
    """The clock step of a trace's durations: 1 us when all are whole microseconds (2021-era Kineto rounds to
    1 us), else 1 ns."""
    return 1.0 if all(float(d).is_integer() for d in durations) else 1e-3


def resolved_gmae(predicted: Sequence[float], observed: Sequence[float], resolution_us: float) -> float:
    """GMAE (percent) with each absolute error floored at half the clock step: a prediction that lands on a
    rounded duration is right only to within the rounding. (Counting such hits as exact would let the many
    2 us and 3 us kernels of a rounded trace drive the geometric mean towards zero.)"""
    floor = resolution_us / 2
    adjusted = [o + (1.0 if p >= o else -1.0) * max(abs(p - o), floor) for p, o in zip(predicted, observed)]
    return gmae(adjusted, observed)


@dataclass(frozen=True)
class HoldOut:
    """One class's held-out check: GMAE (percent) of the calibrated model and of the papers' pure ratio; what a
    perfect prediction scores at the trace's clock step (``floor_pct``, 0 for nanosecond clocks); the held-out
    count and the class's total."""

    kernel_class: str
    model_pct: float
    ratio_pct: float
    floor_pct: float
    n: int
    total: int


def holdout_gmae(obs: Sequence[Observation], device: Device, dtype: str = "fp32") -> list[HoldOut]:
    """Per class: calibrate on every other op instance (in start order) and predict the rest (errors floored at
    half the trace's clock step, see ``resolved_gmae``). Classes with fewer than 3 instances per half are left
    out."""
    resolution = timing_resolution_us(o.observed_us for o in obs)
    by_class: dict[str, list[Observation]] = defaultdict(list)
    for o in obs:
        by_class[o.kernel_class].append(o)
    out: list[HoldOut] = []
    for cls, items in sorted(by_class.items()):
        fit, held = items[0::2], items[1::2]
        if len(fit) < 3 or len(held) < 3:
            continue
        cal = fit_calibration(fit, device, dtype)
        observed = [o.observed_us for o in held]
        model = [e.predict_us(o.roofline_us) for o in held if (e := cal.entry(cls, o.op)) is not None]
        ratio = [o.roofline_us / cal.classes[cls].median_ratio for o in held]
        floor = resolved_gmae(observed, observed, resolution) if resolution >= 1.0 else 0.0
        out.append(
            HoldOut(
                cls,
                resolved_gmae(model, observed, resolution),
                resolved_gmae(ratio, observed, resolution),
                floor,
                len(held),
                len(items),
            )
        )
    return out


def accuracy(paths: Iterable[str | Path], dtype: str = "fp32", ratio_baseline: bool = True) -> list[Accuracy]:
    """Roofline-calibrated cross-check on real traces: per trace and kernel class, the GMAE of predicting the
    held-out half of the priced op instances from the calibration of the other half (``roofline/...``) and, with
    ``ratio_baseline``, of the papers' pure ratio (``roofline-ratio/...``). A trace whose ops carry no shapes (and
    has no execution trace beside it) gives nothing; one on a GPU the catalog lacks, an error."""
    from daydream.graph import build_graph
    from daydream.trace import load_trace

    results: list[Accuracy] = []
    for path in paths:
        trace = load_trace(path)
        device = device_of_trace(trace)
        if device is None:
            if not trace.device_name:
                raise DaydreamError(f"{path}: the trace does not name its GPU (no deviceProperties)")
            raise DaydreamError(f"{path}: GPU '{trace.device_name}' is not in the device catalog")
        obs = observations(build_graph(trace, step="all"), device, dtype)
        for h in holdout_gmae(obs, device, dtype):
            data = f"{Path(path).name}: held-out half of {h.total} op instances"
            if h.floor_pct:
                data += f" (1 us clock: a perfect prediction scores {h.floor_pct:.1f}%)"
            results.append(Accuracy(f"roofline/{h.kernel_class}/{device.key}", h.model_pct, h.n, data))
            if ratio_baseline:
                results.append(Accuracy(f"roofline-ratio/{h.kernel_class}/{device.key}", h.ratio_pct, h.n, data))
    return results
