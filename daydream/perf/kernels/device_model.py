"""Device swaps from measured kernels: how much longer or shorter one kernel takes on another GPU.

A kernel's time on a GPU is modelled as ``fixed + work``: ``fixed`` does not depend on the kernel's size (launch,
ramp-up and tail; in the NeuSight data set also the ~30 us of the timed PyTorch call around it, which a trace's
kernel durations do not hold); ``work`` = its roofline on the GPU's datasheet figures (max(FLOPs / peak, bytes /
bandwidth)) divided by the GPU's **efficiency** for the class, times a **shape correction**. Fitted on measured
kernels of many GPUs (``daydream.perf.kernels.kernel_data``: the NeuSight data set, Lee et al., ASPLOS 2025):

- **anchors**: per GPU and class, (fixed, efficiency) fitted to that GPU's measured kernels
(``roofline_bound.fit_latency``).
  This is the part the datasheet does not say: a T4 or an L4 under its 70 W cap reaches about 0.4 of its FP32 peak on
  GEMMs where a 300 W A100 80GB reaches 0.85; CDNA's matrix cores 0.5. A GPU without measured kernels of a class
  takes those of a measured GPU of its chip (an H200 the H100 SXM's: :meth:`DeviceModel.measured_sibling`), else (an
  MI300X, a B200 today, or GEMMs in a tensor-core dtype: the data set is FP32) the median efficiency of the measured
  GPUs of its vendor for that class; either way it is marked **extrapolated**.
- **shape correction**: gradient-boosted trees per class on features normalized by the GPU (the work's compute and
  memory time at its anchored rates, their ratio, the data against its L2, waves of 64- and 128-wide tiles over its
  SMs and the last wave's fill, the geometry's sizes, the vendor), target log(work / anchored roofline). Shrunk by
  ``SHRINK`` per class (all of it for GEMMs, half for the rest: what leaving one GPU out measured best, docs/perf.md).
  Not applied to GEMM-like kernels in a dtype the data set lacks.

``device`` applies it as a **ratio** to the kernel's measured time: the fixed part the trace itself showed stays,
the rest is multiplied by work(target) / work(source) (:func:`swap`). The fitted model ships as data
(``kernels/data/device_model.json``: anchors, trees as arrays, the leave-one-GPU-out accuracy); predicting needs
numpy only. Refitting (scikit-learn, the ``[calibrate]`` extra): ``daydream models kernels --refit DATA``.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from daydream.errors import DaydreamError
from daydream.files import read_input, write_atomically
from daydream.perf.kernels.costs import op_cost, op_dims
from daydream.perf.kernels.devices import KERNELS_DIR, Device, get_device
from daydream.perf.kernels.kernel_data import CLASSES, Measurement
from daydream.perf.kernels.roofline_bound import MATMUL_CLASSES, compute_peak, fit_latency

MODEL_PATH = KERNELS_DIR / "data" / "device_model.json"
MAX_MODEL_BYTES = 64 * 1024 * 1024
# daydream's kernel classes -> the model's (softmax kernels are row reductions like a layer norm's)
MODEL_CLASS = {"gemm": "gemm", "conv": "conv", "elementwise": "elementwise", "norm": "norm", "softmax": "norm"}
MEMORY_CLASSES = frozenset({"elementwise", "norm"})  # their efficiency is the bandwidth's, the same in any dtype
FITTED_DTYPE = "fp32"  # what the data set measured
# The share of the trees' correction applied, per class: chosen between 0.5 and 1 by leaving one GPU out (docs/perf.md):
# GEMMs' shapes decide their efficiency (tiles, waves) in ways the trees learn across GPUs; the memory-bound classes'
# and convolutions' corrections carry over only in part (half is better than all or none on most GPUs).
SHRINK = {"gemm": 1.0, "conv": 0.5, "elementwise": 0.5, "norm": 0.5}
MIN_WORK_SHARE = 0.3  # a kernel teaches the shape correction only where its work is this share of its time or more
TREE_PARAMS: dict[str, Any] = {
    "max_iter": 200,
    "learning_rate": 0.1,
    "max_leaf_nodes": 31,
    "min_samples_leaf": 20,
    "random_state": 0,
}
TILES = (64, 128)
FEATURES = (
    "log compute us",
    "log memory us",
    "log compute/memory",
    "log bytes/L2",
    "log waves64",
    "log waves128",
    "last wave fill64",
    "last wave fill128",
    "log batch",
    "log m",
    "log n",
    "log k",
    "amd",
)


class Geometry(msgspec.Struct, frozen=True):
    """One kernel's work: its model class, FLOPs and bytes (in its dtype), and (batch, m, n, k) as
    :func:`daydream.perf.kernels.costs.op_dims` lays it out."""

    kernel_class: str
    flops: float
    bytes: float
    batch: int
    m: int
    n: int
    k: int


class Anchor(msgspec.Struct, frozen=True):
    """A GPU's fitted figures for a class: the fixed time, us, and the efficiency (datasheet roofline / work)."""

    latency_us: float
    efficiency: float
    kernels: int = 0  # how many measured kernels it was fitted on (0: extrapolated)


class Trees(msgspec.Struct, frozen=True):
    """A fitted ensemble of regression trees as arrays: per tree, each node's feature, threshold, children (-1 at a
    leaf) and value; a row goes left where its feature is <= the threshold."""

    baseline: float
    feature: list[list[int]]
    threshold: list[list[float]]
    left: list[list[int]]
    right: list[list[int]]
    value: list[list[float]]

    def predict(self, x: np.ndarray) -> np.ndarray:
        out = np.full(len(x), self.baseline)
        rows = np.arange(len(x))
        for feat, thr, left, right, value in zip(self.feature, self.threshold, self.left, self.right, self.value):
            f, t, lo, hi = np.asarray(feat), np.asarray(thr), np.asarray(left), np.asarray(right)
            node = np.zeros(len(x), dtype=np.int64)
            while True:
                inner = lo[node] >= 0
                if not inner.any():
                    break
                go_left = x[rows, np.maximum(f[node], 0)] <= t[node]
                node = np.where(inner, np.where(go_left, lo[node], hi[node]), node)
            out += np.asarray(value)[node]
        return out

    def predict_one(self, x: Sequence[float]) -> float:
        """One row's prediction: a walk per tree (faster than :meth:`predict` for a single kernel)."""
        total = self.baseline
        for feat, thr, left, right, value in zip(self.feature, self.threshold, self.left, self.right, self.value):
            node = 0
            while left[node] >= 0:
                node = left[node] if x[feat[node]] <= thr[node] else right[node]
            total += value[node]
        return total


class AccuracyRow(msgspec.Struct, frozen=True):
    """Leave one GPU out, one class, one target: the geometric-mean relative error of the predicted target/source
    time of every kernel measured on the target and another GPU, with the target's anchors extrapolated
    (``gmae_pct``: the datasheet alone) or fitted on its kernels (``calibrated_gmae_pct``: one sweep of the target),
    next to the ratio of datasheet rooflines (``roofline_gmae_pct``, the rule before this model)."""

    kernel_class: str
    target: str
    vendor: str
    pairs: int
    gmae_pct: float
    calibrated_gmae_pct: float
    roofline_gmae_pct: float


class DeviceModel(msgspec.Struct, frozen=True):
    data: str  # what it was fitted on
    dtype: str
    shrink: dict[str, float]  # class -> share of the trees' correction applied
    anchors: dict[str, dict[str, Anchor]]  # catalog key -> class -> anchor
    trees: dict[str, Trees]
    accuracy: list[AccuracyRow]

    def anchor(self, device: Device, kernel_class: str, dtype: str) -> Anchor:
        """The device's anchor for the class: fitted where its kernels were measured (in this dtype, or any dtype for
        a memory-bound class), else the median of the measured GPUs of its vendor (``kernels`` 0)."""
        own = self.anchors.get(device.key, {}).get(kernel_class)
        if own is not None and (dtype == self.dtype or kernel_class in MEMORY_CLASSES):
            return own
        return self.extrapolated(device, kernel_class)

    def extrapolated(self, device: Device, kernel_class: str, same_chip: bool = True) -> Anchor:
        """The anchor of a GPU without measured kernels of the class: a measured GPU of the same chip's (the same SMs,
        clock and peaks: an H200 is an H100 SXM with faster memory; an A100 80GB PCIe an A100 40GB PCIe), else the
        median of its vendor's measured GPUs (only that with ``same_chip`` False)."""
        measured = [(key, a[kernel_class]) for key, a in self.anchors.items() if kernel_class in a]
        twin = self.measured_sibling(device, kernel_class) if same_chip else None
        if twin is not None:
            # measured on that GPU, not on this one: the swap's error stays the extrapolated one (kernels 0)
            a = self.anchors[twin.key][kernel_class]
            return Anchor(a.latency_us, a.efficiency, 0)
        same = [(k, a) for k, a in measured if _vendor(k) == device.vendor] or measured
        if not same:
            raise DaydreamError(f"the device model has no measured {kernel_class} kernels")
        return Anchor(
            statistics.median(a.latency_us for _, a in same), statistics.median(a.efficiency for _, a in same), 0
        )

    def _paired(self, key: str, kernel_class: str) -> bool:
        """Whether another measured GPU of this class shares ``key``'s chip (left out, it was read as that one)."""
        try:
            device = get_device(key)
        except DaydreamError:
            return False
        return any(k != key and kernel_class in a and _same_chip(k, device) for k, a in self.anchors.items())

    def measured_sibling(self, device: Device, kernel_class: str) -> Device | None:
        """The measured GPU of ``device``'s chip that stands in for it in this class (None where its own kernels
        were measured, or no such GPU was): its anchors, and the features its shape correction is read at."""
        if kernel_class in self.anchors.get(device.key, {}):
            return None
        for key, anchors in self.anchors.items():
            if kernel_class in anchors and _same_chip(key, device):
                return get_device(key)
        return None

    def error_pct(self, target: Device, kernel_class: str, measured: bool) -> float:
        """The per-kernel error to expect of a swap to ``target``: its own leave-one-GPU-out error where the target's
        kernels were measured (calibrated); read as its chip's measured sibling, the worst of the GPUs left out and
        read so; else the class's worst over every GPU with the datasheet alone."""
        rows = [r for r in self.accuracy if r.kernel_class == kernel_class]
        own = [r.calibrated_gmae_pct for r in rows if r.target == target.key]
        if measured and own:
            return own[0]
        if self.measured_sibling(target, kernel_class) is not None:
            # read as its chip's measured sibling: the error measured where that was done, each GPU of a measured
            # pair left out and read as the other (the two A100 PCIe parts)
            paired = [r.gmae_pct for r in rows if self._paired(r.target, kernel_class)]
            if paired:
                return max(paired)
        return max((max(r.gmae_pct, r.roofline_gmae_pct) for r in rows), default=50.0)


def _same_chip(key: str, device: Device) -> bool:
    """Whether catalog GPU ``key`` is ``device``'s chip with other memory (or ``device`` itself): the same vendor,
    SMs, boost clock and peak rates; memory size and bandwidth may differ."""
    try:
        other = get_device(key)
    except DaydreamError:
        return False
    return (other.vendor, other.sms, other.clock_mhz, dict(other.peak_tflops), other.vector_tflops) == (
        device.vendor,
        device.sms,
        device.clock_mhz,
        dict(device.peak_tflops),
        device.vector_tflops,
    )


def _vendor(key: str) -> str:
    try:
        return get_device(key).vendor
    except DaydreamError:
        return ""


class Swap(msgspec.Struct, frozen=True):
    """What moving one kernel to another GPU does to its work: the ratio (target / source), whether both GPUs'
    anchors were measured, the per-kernel error to expect (%), and the measured GPU the target was read as where it
    was (its chip's sibling: an H200 as the H100 SXM)."""

    ratio: float
    measured: bool
    error_pct: float
    kernel_class: str
    read_as: str | None = None


# -- features ------------------------------------------------------------------------------------------------------


def features(g: Geometry, device: Device, anchor: Anchor, dtype: str) -> list[float]:
    """The trees' inputs (:data:`FEATURES`): the kernel's times at the GPU's anchored rates, its data against the
    GPU's L2, how its tiles fill the GPU's SMs, its sizes."""
    cls = "gemm" if g.kernel_class in MATMUL_CLASSES else g.kernel_class
    eff = max(anchor.efficiency, 1e-6)
    tc = g.flops / compute_peak(device, dtype, cls) * 1e6 / eff + 1e-9
    tm = g.bytes / device.hbm_bytes_per_s * 1e6 / eff + 1e-9
    if g.kernel_class in MEMORY_CLASSES:
        waves = [g.m * g.n / (device.sms * 2048), g.m / device.sms]  # an element per thread; a row per block
    else:
        waves = [g.batch * math.ceil(g.m / t) * math.ceil(g.n / t) / device.sms for t in TILES]
    fill = [w / math.ceil(w) if w > 0 else 0.0 for w in waves]
    return [
        math.log(tc),
        math.log(tm),
        math.log(tc / tm),
        math.log(max(g.bytes, 1.0) / device.l2_bytes),
        *(math.log(w + 1e-9) for w in waves),
        *fill,
        math.log(max(g.batch, 1)),
        math.log(max(g.m, 1)),
        math.log(max(g.n, 1)),
        math.log(max(g.k, 1)),
        float(device.vendor == "amd"),
    ]


def anchored_roofline_us(g: Geometry, device: Device, anchor: Anchor, dtype: str) -> float:
    """The work's time at the GPU's anchored rates: its datasheet roofline over its efficiency."""
    cls = "gemm" if g.kernel_class in MATMUL_CLASSES else g.kernel_class
    roof = max(g.flops / compute_peak(device, dtype, cls), g.bytes / device.hbm_bytes_per_s) * 1e6
    return roof / max(anchor.efficiency, 1e-6)


def corrects(model: DeviceModel, kernel_class: str, *dtypes: str) -> bool:
    """Whether the shape correction applies to a kernel of this class in these dtypes: a memory-bound class in any,
    a GEMM-like one only in the dtype the model was fitted on (on both sides of a swap, or the ratio is skewed)."""
    return kernel_class in model.trees and (kernel_class in MEMORY_CLASSES or all(d == model.dtype for d in dtypes))


def work_us(
    model: DeviceModel,
    geoms: Sequence[Geometry],
    device: Device,
    dtype: str,
    anchor: Anchor | None = None,
    correct: bool | None = None,
) -> np.ndarray:
    """Each kernel's modelled work on ``device`` (us): its anchored roofline times the shrunk shape correction
    (``correct``: default :func:`corrects` of this dtype)."""
    if not geoms:
        return np.zeros(0)
    cls = geoms[0].kernel_class
    a = anchor if anchor is not None else model.anchor(device, cls, dtype)
    roof = np.array([anchored_roofline_us(g, device, a, dtype) for g in geoms])
    trees = model.trees.get(cls)
    if trees is None or not (corrects(model, cls, dtype) if correct is None else correct):
        return roof
    # a GPU read as its chip's measured sibling is read so by the trees too: its own figures (an H200's 4.8 TB/s) can
    # lie outside what they were fitted on, and its roofline already holds what differs (the memory)
    seen_as = model.measured_sibling(device, cls) or device
    rows = [features(g, seen_as, a, dtype) for g in geoms]
    correction = [trees.predict_one(rows[0])] if len(rows) == 1 else trees.predict(np.array(rows))
    return roof * np.exp(model.shrink.get(cls, 0.0) * np.asarray(correction))


# -- predicting ------------------------------------------------------------------------------------------------------


@cache
def shipped_model() -> DeviceModel | None:
    """The model that ships with daydream (``kernels/data/device_model.json``); None where it is absent."""
    return read_model(MODEL_PATH) if MODEL_PATH.is_file() else None


def roofline_error_pct() -> float:
    """The error to expect of a kernel the model does not price (moved by its class's roofline ratio): the roofline
    ratio's worst leave-one-GPU-out error on the model's data (50% without a model)."""
    model = shipped_model()
    return max((r.roofline_gmae_pct for r in model.accuracy), default=50.0) if model is not None else 50.0


def read_model(path: str | Path) -> DeviceModel:
    try:
        return msgspec.json.decode(read_input(path, "device model", MAX_MODEL_BYTES), type=DeviceModel)
    except msgspec.DecodeError as exc:
        raise DaydreamError(f"{path}: not a device model ({exc})") from None


def geometry(kernel_class: str, op: str | None, shapes: Any, dtype: str) -> Geometry | None:
    """A traced kernel's geometry from its op and shapes, where the model has its class and the shapes price it."""
    cls = MODEL_CLASS.get(kernel_class)
    if cls is None or not op or not shapes:
        return None
    cost, dims = op_cost(op, shapes, dtype), op_dims(op, shapes)
    if cost is None or dims is None:
        return None
    return Geometry(cls, cost.flops, cost.bytes, *dims)


def _frozen(x: Any) -> Any:
    return tuple(_frozen(v) for v in x) if isinstance(x, (list, tuple)) else x


def swap(
    kernel_class: str,
    op: str | None,
    shapes: Any,
    src: Device,
    dst: Device,
    src_dtype: str,
    dst_dtype: str,
    model: DeviceModel | None = None,
) -> Swap | None:
    """Moving one traced kernel from ``src`` to ``dst``: its work's ratio there and here, or None where the model
    does not price it (a class it was not fitted on, an op whose shapes give no FLOPs and bytes, no model)."""
    if model is not None:
        return _swap(kernel_class, op, shapes, src, dst, src_dtype, dst_dtype, model)
    if kernel_class not in MODEL_CLASS or not op or not shapes:
        return None
    try:
        key = _frozen(shapes)
        hash(key)
    except TypeError:
        return None
    return _shipped_swap(kernel_class, op, key, src, dst, src_dtype, dst_dtype)


@lru_cache(maxsize=65536)  # a trace repeats its kernels' shapes layer after layer, step after step
def _shipped_swap(
    kernel_class: str, op: str, shapes: Any, src: Device, dst: Device, src_dtype: str, dst_dtype: str
) -> Swap | None:
    model = shipped_model()
    return None if model is None else _swap(kernel_class, op, shapes, src, dst, src_dtype, dst_dtype, model)


def _swap(
    kernel_class: str,
    op: str | None,
    shapes: Any,
    src: Device,
    dst: Device,
    src_dtype: str,
    dst_dtype: str,
    model: DeviceModel,
) -> Swap | None:
    here, there = geometry(kernel_class, op, shapes, src_dtype), geometry(kernel_class, op, shapes, dst_dtype)
    if model is None or here is None or there is None:
        return None
    cls = here.kernel_class
    correct = corrects(model, cls, src_dtype, dst_dtype)
    if correct:
        a_src, a_dst = model.anchor(src, cls, src_dtype), model.anchor(dst, cls, dst_dtype)
    else:  # a GEMM-like kernel in a dtype with no measured kernels on one side: neither side's own efficiency is
        # known in it, so each its vendor's median (the same GPU's FP32 figure would mix two kinds of unit)
        a_src, a_dst = model.extrapolated(src, cls, same_chip=False), model.extrapolated(dst, cls, same_chip=False)
    w_src = float(work_us(model, [here], src, src_dtype, a_src, correct)[0])
    w_dst = float(work_us(model, [there], dst, dst_dtype, a_dst, correct)[0])
    if not (w_src > 0 and math.isfinite(w_src) and math.isfinite(w_dst)):
        return None
    measured = a_src.kernels > 0 and a_dst.kernels > 0
    twin = model.measured_sibling(dst, cls) if correct else None  # the sibling only where the anchors took it
    return Swap(w_dst / w_src, measured, model.error_pct(dst, cls, measured), cls, twin.key if twin else None)


# -- fitting and leave-one-GPU-out -----------------------------------------------------------------------------------


def measured_geometry(m: Measurement) -> Geometry:
    """A data set kernel's geometry (its dims as :func:`daydream.perf.kernels.costs.op_dims` would lay them out)."""
    d = m.dims
    if m.kernel_class == "gemm":
        dims = d
    elif m.kernel_class == "conv":
        b, c, f, r = d[:4]
        dims = (1, b * m.conv_out() ** 2, f, c * r * r)
    else:
        dims = (1, d[0], d[1], 1)
    cost = m.cost()
    return Geometry(m.kernel_class, cost.flops, cost.bytes, *dims)


def _datasheet_roofline_us(g: Geometry, device: Device) -> float:
    return anchored_roofline_us(g, device, Anchor(0.0, 1.0), FITTED_DTYPE)


def fit_anchor(geoms: Sequence[Geometry], times_us: Sequence[float], device: Device) -> Anchor:
    latency, eff = fit_latency([_datasheet_roofline_us(g, device) for g in geoms], list(times_us))
    return Anchor(latency, eff, len(geoms))


def _fit_trees(x: np.ndarray, y: np.ndarray) -> Trees:
    from sklearn.ensemble import HistGradientBoostingRegressor

    est = HistGradientBoostingRegressor(**TREE_PARAMS).fit(x, y)
    feature, threshold, left, right, value = [], [], [], [], []
    for (predictor,) in est._predictors:  # one predictor per iteration for a regression
        nodes = predictor.nodes
        leaf = nodes["is_leaf"].astype(bool)
        feature.append([int(v) for v in nodes["feature_idx"]])
        threshold.append([float(v) for v in nodes["num_threshold"]])
        left.append([-1 if lf else int(v) for v, lf in zip(nodes["left"], leaf)])
        right.append([-1 if lf else int(v) for v, lf in zip(nodes["right"], leaf)])
        value.append([float(v) if lf else 0.0 for v, lf in zip(nodes["value"], leaf)])
    return Trees(float(np.ravel(est._baseline_prediction)[0]), feature, threshold, left, right, value)


class _ClassData:
    """One class's measured kernels, by GPU (catalog key), with each GPU's fitted anchor."""

    def __init__(self, rows: Iterable[Measurement], devices: Mapping[str, Device]) -> None:
        self.by_device: dict[str, list[tuple[Measurement, Geometry]]] = defaultdict(list)
        for m in rows:
            self.by_device[devices[m.device].key].append((m, measured_geometry(m)))
        self.devices = {devices[name].key: devices[name] for name in devices}
        self.anchors = {
            key: fit_anchor([g for _, g in ms], [m.latency_us for m, _ in ms], self.devices[key])
            for key, ms in self.by_device.items()
        }

    def training(self, keys: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        xs, ys = [], []
        for key in keys:
            dev, a = self.devices[key], self.anchors[key]
            for m, g in self.by_device[key]:
                work = m.latency_us - a.latency_us
                if work < MIN_WORK_SHARE * m.latency_us:
                    continue  # its time is mostly the fixed part: it says little of the work's shape
                xs.append(features(g, dev, a, FITTED_DTYPE))
                ys.append(math.log(work / anchored_roofline_us(g, dev, a, FITTED_DTYPE)))
        return np.array(xs), np.array(ys)


def _gmae(errors: Sequence[float]) -> float:
    e = np.maximum(np.abs(np.asarray(errors, dtype=float)), 1e-4)
    return 100 * math.exp(float(np.mean(np.log(e)))) if len(e) else math.nan


def _leave_out(data: _ClassData, cls: str, target: str) -> AccuracyRow | None:
    others = [k for k in data.by_device if k != target]
    x, y = data.training(others)
    if len(x) < 100:
        return None
    model = DeviceModel("", FITTED_DTYPE, SHRINK, {}, {cls: _fit_trees(x, y)}, [])
    dev_t = data.devices[target]
    measured_t = data.anchors[target]
    # the target's anchor as a GPU without measured kernels gets it: from the others' alone
    without = DeviceModel(
        model.data, model.dtype, model.shrink, {k: {cls: data.anchors[k]} for k in others}, model.trees, []
    )
    sheet_t = without.anchor(dev_t, cls, FITTED_DTYPE)
    on_target = {m.key(): (m, g) for m, g in data.by_device[target]}
    pairs: list[tuple[float, float, float, float]] = []  # predicted (datasheet, calibrated, roofline), measured
    for src in others:
        shared = [(ms, gs, on_target[ms.key()]) for ms, gs in data.by_device[src] if ms.key() in on_target]
        if not shared:
            continue
        dev_s, a_s = data.devices[src], data.anchors[src]
        w_s = work_us(model, [gs for _, gs, _ in shared], dev_s, FITTED_DTYPE, a_s)
        w_sheet = work_us(without, [gt for _, _, (_, gt) in shared], dev_t, FITTED_DTYPE, sheet_t)
        w_meas = work_us(model, [gt for _, _, (_, gt) in shared], dev_t, FITTED_DTYPE, measured_t)
        for i, (ms, gs, (mt, gt)) in enumerate(shared):
            work = max(ms.latency_us - a_s.latency_us, 0.0)
            pred_sheet = sheet_t.latency_us + work * w_sheet[i] / w_s[i]
            pred_meas = measured_t.latency_us + work * w_meas[i] / w_s[i]
            roof = ms.latency_us * _datasheet_roofline_us(gt, dev_t) / _datasheet_roofline_us(gs, dev_s)
            pairs.append((pred_sheet, pred_meas, roof, mt.latency_us))
    if not pairs:
        return None
    p = np.array(pairs)
    return AccuracyRow(
        cls,
        target,
        dev_t.vendor,
        len(pairs),
        _gmae(p[:, 0] / p[:, 3] - 1),
        _gmae(p[:, 1] / p[:, 3] - 1),
        _gmae(p[:, 2] / p[:, 3] - 1),
    )


def fit(
    measurements: Iterable[Measurement],
    source: str,
    classes: Sequence[str] = CLASSES,
    progress: Callable[[AccuracyRow], None] | None = None,
) -> DeviceModel:
    """Fit the model on every GPU's measured kernels and measure it leaving each GPU out in turn (scikit-learn)."""
    rows = list(measurements)
    devices: dict[str, Device] = {}
    for name in sorted({m.device for m in rows}):
        try:
            devices[name] = get_device(name)
        except DaydreamError:
            continue  # a GPU the catalog lacks: its datasheet figures are unknown
    anchors: dict[str, dict[str, Anchor]] = defaultdict(dict)
    trees: dict[str, Trees] = {}
    accuracy: list[AccuracyRow] = []
    for cls in classes:
        data = _ClassData((m for m in rows if m.kernel_class == cls and m.device in devices), devices)
        for key, a in data.anchors.items():
            anchors[key][cls] = a
        for target in sorted(data.by_device):
            row = _leave_out(data, cls, target)
            if row is not None:
                accuracy.append(row)
                if progress is not None:
                    progress(row)
        x, y = data.training(data.by_device)
        trees[cls] = _fit_trees(x, y)
    return DeviceModel(
        data=source, dtype=FITTED_DTYPE, shrink=SHRINK, anchors=dict(anchors), trees=trees, accuracy=accuracy
    )


def write_model(path: str | Path, model: DeviceModel) -> None:
    write_atomically(path, msgspec.json.encode(model) + b"\n", "--out")


def refit(
    data: str | Path | Sequence[str | Path],
    out: str | Path,
    classes: Sequence[str] = CLASSES,
    progress: Callable[[AccuracyRow], None] | None = None,
) -> DeviceModel:
    """``daydream models kernels --refit DATA...``: fit on data sets of measured kernels (the NeuSight layout,
    :mod:`daydream.perf.kernels.kernel_data`; each GPU and class from the first that holds it), measure each GPU left
    out,
    write the model to ``out``."""
    from daydream.perf.kernels.kernel_data import read_sources

    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise DaydreamError(
            "refitting the device model needs scikit-learn: pip install 'daydream-whatif[calibrate]'"
        ) from None
    roots = [data] if isinstance(data, (str, Path)) else list(data)
    model = fit(read_sources(roots), " + ".join(Path(r).name for r in roots), classes, progress)
    write_model(out, model)
    if Path(out).resolve() == MODEL_PATH.resolve():
        shipped_model.cache_clear()
        _shipped_swap.cache_clear()
    return model
