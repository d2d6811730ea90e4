"""Collective-communication cost models: the nccl-tests formula, the piecewise model of Lin et al. (TPDS), and
their fit to benchmark sweeps and to the NCCL kernels of real traces: the collectives room of daydream.perf, this
package the model itself, beside it the sweeps parsed (:mod:`daydream.perf.collectives.nccl_tests`: nccl-tests and
PARAM output) and a multi-rank job's collectives priced (:mod:`daydream.perf.collectives.job`).

Message size ``nbytes`` follows nccl-tests (see :mod:`daydream.perf.collectives.nccl_tests`): the per-rank buffer for
all-reduce / broadcast / reduce / send-recv, the gathered output for all-gather, the scattered input for
reduce-scatter, the per-rank send buffer for all-to-all. The graph's comm tasks carry the same quantity in ``bytes``.

Bus bandwidth normalizes what each rank moves: ``time = nbytes / algbw`` and ``busbw = algbw x factor``, factor
2(n-1)/n for all-reduce, (n-1)/n for all-gather / reduce-scatter / all-to-all, 1 for broadcast / reduce /
send-recv. Bus bandwidth is what a link sustains whatever the rank count, so a model fitted on n ranks prices
m ranks by changing the factor only (nccl-tests' premise; it holds for rings).
"""

from __future__ import annotations

import math
import sys
import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import networkx as nx
import numpy as np

from daydream.errors import DaydreamError, did_you_mean
from daydream.graph.kernel_class import is_comm_kernel
from daydream.perf.collectives.nccl_tests import Sweep, load_sweep, normalize_collective
from daydream.perf.paths import DATA_DIR, KERNELS_DIR
from daydream.perf.trust.accuracy import Accuracy, gmae
from daydream.trace import load_trace
from daydream.trace.model import Trace
from daydream.trace.sizes import message_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "AlphaBeta",
    "Link",
    "PiecewiseModel",
    "Topology",
    "TraceCollectiveCosts",
    "TracedCollective",
    "accuracy",
    "bus_factor",
    "collective_us",
    "fit_collective_model",
    "fit_from_trace",
    "intra_node_link",
    "links",
    "model_from_dict",
    "normalize_collective",
    "resolve_link",
    "sweep_accuracy",
    "topology_collective_us",
    "trace_accuracy",
    "traced_collectives",
]

# ---- the nccl-tests formula -------------------------------------------------------------------------------------


def bus_factor(collective: str, ranks: int) -> float:
    """busbw / algbw for ``collective`` on ``ranks`` ranks (nccl-tests doc/PERFORMANCE.md)."""
    name = normalize_collective(collective)
    if ranks < 1:
        raise DaydreamError(f"ranks must be at least 1, got {ranks}")
    if name == "allreduce":
        return 2.0 * (ranks - 1) / ranks
    if name in ("allgather", "reducescatter", "alltoall"):
        return (ranks - 1) / ranks
    return 1.0  # broadcast, reduce, sendrecv: the whole buffer crosses one link


@dataclass(frozen=True)
class Link:
    """An interconnect: the bus bandwidth nccl-tests reaches over it (GB/s) and a small-message latency (us)."""

    name: str
    bus_bw_gbs: float
    latency_us: float
    peak_gbs: float | None = None
    note: str = ""


@cache
def links() -> dict[str, Link]:
    """The presets of ``kernels/links.toml``, by name."""
    path = KERNELS_DIR / "links.toml"
    with path.open("rb") as f:
        table = tomllib.load(f)
    return {
        name: Link(name, float(v["bus_bw_gbs"]), float(v["latency_us"]), v.get("peak_gbs"), v.get("note", ""))
        for name, v in table.items()
    }


# 1 MB/s to 1 ZB/s: the top is past any wire, a link that costs nothing (tests and what-ifs price one so: 1e9)
MIN_LINK_GBS, MAX_LINK_GBS = 1e-3, 1e12


def resolve_link(link: str | float | Link) -> Link:
    """A preset by name (``nvlink4``, ``ib-ndr``; case, ``_`` and spaces ignored), or a number: a bus bandwidth in
    GB/s with no latency term."""
    if isinstance(link, Link):
        return link
    if isinstance(link, (int, float)) and not isinstance(link, bool):
        # a bandwidth past these is no link: 1e-300 GB/s would print a 230-digit time, inf one of 0
        if not MIN_LINK_GBS <= link <= MAX_LINK_GBS:
            raise DaydreamError(
                f"a link given as a number is a bus bandwidth in GB/s, from {MIN_LINK_GBS:g} to "
                f"{MAX_LINK_GBS:,.0f}; got {link:g}"
            )
        return Link(f"{link:g} GB/s", float(link), 0.0)
    key = str(link).strip().lower().replace("_", "-").replace(" ", "-")
    known = links()
    if key in known:
        return known[key]
    if (
        key.isascii()
    ):  # float() reads full-width and other scripts' digits too ("１２"): a bandwidth is written in ASCII
        try:
            return resolve_link(float(key))
        except (ValueError, OverflowError):
            pass
    hint = did_you_mean(key, known)
    raise DaydreamError(
        f"unknown link {link!r}"
        + (f"; {hint}" if hint else "")
        + f"; known: {', '.join(known)}, or a bus bandwidth in GB/s"
    )


def collective_us(
    collective: str, nbytes: float, ranks: int, link: str | float | Link, latency_us: float | None = None
) -> float:
    """Time of one collective by the nccl-tests formula: latency + factor x nbytes / bus bandwidth, in us.

    ``latency_us`` overrides the link's latency (a link given as a number has none)."""
    if nbytes < 0:
        raise DaydreamError(f"message size must not be negative, got {nbytes}")
    lk = resolve_link(link)
    latency = lk.latency_us if latency_us is None else latency_us
    return latency + bus_factor(collective, ranks) * nbytes / (lk.bus_bw_gbs * 1e3)  # GB/s = 1e3 bytes/us


# ---- a topology of nodes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Topology:
    """Where a job's ranks sit: nodes of ``gpus_per_node`` GPUs joined by ``intra`` (NVLink, PCIe), nodes joined by
    ``inter`` (the network, one NIC's bus bandwidth) through ``nics_per_node`` NICs each (0: one per GPU)."""

    intra: Link
    inter: Link | None = None
    gpus_per_node: int = 8
    nics_per_node: int = 0

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1 or self.nics_per_node < 0:
            raise DaydreamError(
                f"a node holds at least one GPU and no negative NIC count, got gpus_per_node = {self.gpus_per_node}, "
                f"nics_per_node = {self.nics_per_node}"
            )

    def nodes(self, ranks: int) -> int:
        return -(-ranks // self.gpus_per_node)

    def node_bw_gbs(self) -> float:
        """The network bus bandwidth out of one node: all its NICs together (GB/s)."""
        if self.inter is None:
            raise DaydreamError("the ranks span several nodes: name the network between them (a link preset)")
        return (self.nics_per_node or self.gpus_per_node) * self.inter.bus_bw_gbs


def topology_collective_us(
    collective: str, nbytes: float, ranks: int, topology: Topology, latency_us: float | None = None
) -> float:
    """Time of one collective on ``ranks`` ranks placed on nodes of ``topology`` (in us).

    Within one node: :func:`collective_us` over the intra-node link. Across M nodes of G GPUs (what NCCL does,
    nccl-tests' conventions for ``nbytes``):

    - all-reduce: the faster of a ring through every GPU, whose bus bandwidth is the slower of the intra-node link
      and a node's NICs together (each node sends 2(n-1)/n x bytes through its NICs), and the hierarchical
      (tree) algorithm: within each node reduce-scatter and all-gather (2(G-1)/G x bytes over the intra-node link),
      across nodes an all-reduce of the node's data split over its NICs (2(M-1)/M x bytes), the two pipelined;
    - all-gather, reduce-scatter, broadcast, reduce: the ring, as above (NCCL has no tree for them);
    - all-to-all: each rank sends (G-1)/n of its buffer to its node's peers over the intra-node link and G(n-G)/n
      of it through the node's NICs, at once;
    - send/recv: one NIC.

    Latency: the intra-node link's plus the network's once per doubling of the node count (a tree's depth): an
    estimate. On the bundled 2-node sweeps (kernels/data/nccl) the large-message bus bandwidth it gives is within
    25% of the measured (docs/multigpu.md lists each).
    """
    if nbytes < 0:
        raise DaydreamError(f"message size must not be negative, got {nbytes}")
    name = normalize_collective(collective)
    nodes = topology.nodes(ranks)
    if nodes <= 1:
        return collective_us(name, nbytes, ranks, topology.intra, latency_us)
    g = topology.gpus_per_node
    intra = topology.intra.bus_bw_gbs * 1e3  # bytes/us
    node = topology.node_bw_gbs() * 1e3
    assert topology.inter is not None  # node_bw_gbs checked it
    latency = latency_us
    if latency is None:
        latency = topology.intra.latency_us + topology.inter.latency_us * math.ceil(math.log2(nodes))
    ring = bus_factor(name, ranks) * nbytes / min(intra, node)
    if name == "allreduce":
        tree = max(2.0 * (g - 1) / g * nbytes / intra, 2.0 * (nodes - 1) / nodes * nbytes / node)
        return latency + min(ring, tree)
    if name == "alltoall":
        return latency + max((g - 1) / ranks * nbytes / intra, g * (ranks - g) / ranks * nbytes / node)
    if name == "sendrecv":
        return latency + nbytes / (topology.inter.bus_bw_gbs * 1e3)
    return latency + ring


def intra_node_link(device: Any, gpus_per_node: int = 8) -> Link:
    """The link between the GPUs of one node of ``device`` (a catalog entry, daydream.perf.kernels.devices): its NVLink
    (AMD: Infinity Fabric) where that joins every GPU of the node: the NVLink preset within 15% of its peer
    bandwidth per direction, else (and on AMD) a link of that bandwidth with the presets' bus fraction (0.8) and
    latency; PCIe of
    its generation where it has no NVLink for that many GPUs (a bridge joins a card to one other: ``nvlink_peers``)."""
    per_direction = device.nvlink_gbps / 2.0
    if per_direction > 0 and gpus_per_node - 1 <= device.nvlink_peers:
        nvlinks = [lk for key, lk in links().items() if key.startswith("nvlink") and lk.peak_gbs]
        near = min(nvlinks, key=lambda lk: abs(math.log(float(lk.peak_gbs) / per_direction)))
        if device.vendor == "nvidia" and abs(math.log(float(near.peak_gbs) / per_direction)) <= math.log(1.15):
            return near
        note = (
            f"{device.full_name}: {device.nvlink_gbps:g} GB/s to its peers (catalog), bus_bw = 0.8 x peak as the"
            " presets"
        )
        return Link(f"{device.key} link", 0.8 * per_direction, near.latency_us, per_direction, note)
    key = f"pcie{device.pcie_gen}"
    return links().get(key) or links()["pcie3"]


# ---- fitted models ----------------------------------------------------------------------------------------------


def _envelope(sizes: Iterable[float], times_us: Iterable[float]) -> tuple[np.ndarray, np.ndarray]:
    """Sizes ascending, each with its least time: repeated measurements of one size differ by waiting, not work."""
    best: dict[float, float] = {}
    for m, t in zip(sizes, times_us, strict=True):
        if not (m > 0 and t > 0):
            raise DaydreamError(f"sizes and times must be positive, got size {m} and time {t}")
        best[m] = min(t, best.get(m, math.inf))
    ms = sorted(best)
    return np.array(ms, dtype=float), np.array([best[m] for m in ms], dtype=float)


def _check_ranks(collective: str, ranks: int) -> str:
    name = normalize_collective(collective)
    if bus_factor(name, ranks) <= 0:
        raise DaydreamError(f"a {name} over {ranks} rank moves no data: fit needs at least 2 ranks")
    return name


class AlphaBeta(msgspec.Struct, frozen=True, tag_field="kind", tag="alpha-beta"):
    """t = latency + factor x nbytes / bus bandwidth, fitted: the nccl-tests formula with measured constants. JSON
    (to_dict, :func:`model_from_dict`): ``kind`` first, then the fields."""

    collective: str
    ranks: int
    latency_us: float
    bus_bw_gbs: float

    def predict_us(self, nbytes: float, ranks: int | None = None) -> float:
        if nbytes < 0:
            raise DaydreamError(f"message size must not be negative, got {nbytes}")
        return self.latency_us + bus_factor(self.collective, ranks or self.ranks) * nbytes / (self.bus_bw_gbs * 1e3)

    @classmethod
    def fit(cls, sizes: Sequence[float], times_us: Sequence[float], collective: str, ranks: int) -> AlphaBeta:
        """Least squares on relative error (small and large messages weigh alike), both constants non-negative.
        One distinct size cannot separate latency from bandwidth: it is taken as bandwidth-bound."""
        name = _check_ranks(collective, ranks)
        m, t = _envelope(sizes, times_us)
        if len(m) == 0:
            raise DaydreamError("fitting a collective model needs at least one measurement")
        factor = bus_factor(name, ranks)
        if len(m) == 1:
            latency, per_byte = 0.0, t[0] / m[0]
        else:
            from scipy.optimize import nnls  # scipy is slow to import: only when a model is fitted

            (latency, per_byte), _ = nnls(np.column_stack([1.0 / t, m / t]), np.ones_like(t))
        if per_byte <= 0:  # every size took the same time: bandwidth too high to see
            per_byte = 1e-12
        return cls(name, ranks, float(latency), float(factor / (per_byte * 1e3)))

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


def _sigmoid(x: np.ndarray | float, big_l: float, x0: float, k: float, b: float) -> Any:
    return big_l / (1.0 + np.exp(-k * (x - x0))) + b


def _sigmoid_jacobian(x: np.ndarray, big_l: float, x0: float, k: float, b: float) -> np.ndarray:
    s = 1.0 / (1.0 + np.exp(-k * (x - x0)))
    slope = big_l * s * (1.0 - s)
    return np.column_stack([s, -k * slope, (x - x0) * slope, np.ones_like(x)])


_SIGMOID_MIN_POINTS = 4  # its four parameters


# Grid for the sigmoid's centre (relative to the fitted span, in log2 bytes) and steepness: for each pair the
# height and offset follow by linear least squares (the model is linear in them), which finds the basin that a
# plain local fit from one start often misses; Levenberg-Marquardt then polishes the best pair.
_X0_GRID = np.linspace(-8.0, 8.0, 65)
_K_GRID = np.geomspace(0.02, 8.0, 48)


def _fit_sigmoid(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    """log10(bus GB/s) against log2(bytes): the S-shaped middle of the curve (Lin et al., TPDS, eq. 3-4)."""
    lo, hi = float(x.min()), float(x.max())
    x0 = (lo + hi) / 2 + _X0_GRID * max(hi - lo, 1.0) / 8.0
    s = 1.0 / (1.0 + np.exp(-_K_GRID[None, :, None] * (x[None, None, :] - x0[:, None, None])))  # x0 by k by point
    s_mean = s.mean(axis=2, keepdims=True)
    s_var = ((s - s_mean) ** 2).sum(axis=2)
    height = ((s - s_mean) * (y - y.mean())).sum(axis=2) / np.where(s_var > 1e-12, s_var, np.inf)
    height = np.maximum(height, 0.0)  # bandwidth grows with size; a falling "sigmoid" is not this model
    offset = y.mean() - height * s_mean[..., 0]
    sse = ((y - height[..., None] * s - offset[..., None]) ** 2).sum(axis=2)
    a, b = np.unravel_index(int(np.argmin(sse)), sse.shape)
    start = (float(height[a, b]), float(x0[a]), float(_K_GRID[b]), float(offset[a, b]))
    from scipy.optimize import OptimizeWarning, curve_fit  # slow to import: only when a model is fitted

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            popt, _ = curve_fit(_sigmoid, x, y, p0=start, method="lm", jac=_sigmoid_jacobian, maxfev=200)
    except (RuntimeError, ValueError):
        return start
    polished = (float(popt[0]), float(popt[1]), float(popt[2]), float(popt[3]))
    sse_polished = float(((_sigmoid(x, *polished) - y) ** 2).sum())
    if not all(math.isfinite(v) for v in polished) or polished[0] < 0 or polished[2] <= 0 or sse_polished > sse[a, b]:
        return start
    return polished


class PiecewiseModel(msgspec.Struct, frozen=True, tag_field="kind", tag="piecewise"):
    """Seed 002's collective model (section IV-A): three regions of message size. JSON as :class:`AlphaBeta`'s.

    - ``nbytes <= m1``: constant latency ``latency_us`` (launch and handshake dominate);
    - ``m1 < nbytes < m2``: bus bandwidth follows a sigmoid, log10(busbw) = L / (1 + e^(-k (log2 m - x0))) + b,
      and t = factor x m / busbw;
    - ``nbytes >= m2``: saturated, t = latency + factor x m / ``max_bus_bw_gbs``. ``m2`` is None when the sweep never
      saturated: the sigmoid then covers every larger size, and ``max_bus_bw_gbs`` is only the highest bus
      bandwidth measured.
    """

    collective: str
    ranks: int
    m1: float
    m2: float | None
    latency_us: float
    max_bus_bw_gbs: float
    sigmoid: tuple[float, float, float, float]

    def bus_bw_gbs(self, nbytes: float) -> float:
        """The model's bus bandwidth in the S-shaped region (the sigmoid), GB/s."""
        return float(10.0 ** _sigmoid(math.log2(nbytes), *self.sigmoid))

    def predict_us(self, nbytes: float, ranks: int | None = None) -> float:
        if nbytes < 0:
            raise DaydreamError(f"message size must not be negative, got {nbytes}")
        factor = bus_factor(self.collective, ranks or self.ranks)
        if nbytes <= self.m1:
            return self.latency_us
        if self.m2 is None or nbytes < self.m2:
            return factor * nbytes / (self.bus_bw_gbs(nbytes) * 1e3)
        return self.latency_us + factor * nbytes / (self.max_bus_bw_gbs * 1e3)

    @classmethod
    def fit(cls, sizes: Sequence[float], times_us: Sequence[float], collective: str, ranks: int) -> PiecewiseModel:
        """Fit to a sweep. The region boundaries are chosen among the measured sizes by least squares on log time:
        every split with at least four sizes in the middle region is tried (the sigmoid has four parameters), the
        latency is the geometric mean of the first region, the saturated bandwidth the median of
        factor x m / (t - latency) over the last. Repeated sizes keep their least time."""
        name = _check_ranks(collective, ranks)
        m, t = _envelope(sizes, times_us)
        n = len(m)
        if n < _SIGMOID_MIN_POINTS + 2:
            raise DaydreamError(f"the piecewise model needs at least {_SIGMOID_MIN_POINTS + 2} message sizes, got {n}")
        factor = bus_factor(name, ranks)
        x, y = np.log2(m), np.log10(factor * m / (t * 1e3))
        log_t = np.log(t)
        best: tuple[float, PiecewiseModel] | None = None
        for i in range(n - _SIGMOID_MIN_POINTS):
            # A first region whose times have doubled is no longer flat: stop growing it.
            if t[i] > 2.0 * t[: i + 1].min():
                break
            latency = float(np.exp(log_t[: i + 1].mean()))
            for j in range(i + 1 + _SIGMOID_MIN_POINTS, n + 1):
                sig = _fit_sigmoid(x[i + 1 : j], y[i + 1 : j])
                if j < n:
                    if np.any(t[j:] <= latency):
                        continue
                    bw_max = float(np.median(factor * m[j:] / ((t[j:] - latency) * 1e3)))
                else:
                    bw_max = float(10.0 ** y.max())
                model = cls(name, ranks, float(m[i]), float(m[j]) if j < n else None, latency, bw_max, sig)
                err = float(sum((math.log(model.predict_us(mk)) - lt) ** 2 for mk, lt in zip(m, log_t, strict=True)))
                if best is None or err < best[0]:
                    best = (err, model)
        if best is None:
            raise DaydreamError(f"could not fit the piecewise model to {n} sizes of {name}")
        return best[1]

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PiecewiseModel:
        return _model_from_dict(d, *_KINDS["piecewise"])


CollectiveModel = AlphaBeta | PiecewiseModel
_KINDS: dict[str, tuple[type[CollectiveModel], str]] = {
    "piecewise": (PiecewiseModel, "a piecewise"),
    "alpha-beta": (AlphaBeta, "an alpha-beta"),
}


def model_from_dict(d: dict[str, Any]) -> CollectiveModel:
    """A model saved with ``to_dict`` (JSON-able)."""
    kind = d.get("kind") if isinstance(d, dict) else None
    if kind not in _KINDS:
        raise DaydreamError(f"unknown collective model kind {kind!r}: piecewise or alpha-beta")
    return _model_from_dict(d, *_KINDS[kind])


def _model_from_dict(d: dict[str, Any], cls: type[CollectiveModel], what: str) -> CollectiveModel:
    try:
        model = msgspec.convert(d, cls)
    except msgspec.ValidationError as e:
        raise DaydreamError(f"not {what} collective model: {e}") from None
    return msgspec.structs.replace(model, collective=normalize_collective(model.collective))


def fit_collective_model(
    sizes: Sequence[float], times_us: Sequence[float], collective: str, ranks: int
) -> CollectiveModel:
    """The piecewise model where there are enough distinct sizes for it, else the alpha-beta formula."""
    if len(set(sizes)) >= _SIGMOID_MIN_POINTS + 2:
        return PiecewiseModel.fit(sizes, times_us, collective, ranks)
    return AlphaBeta.fit(sizes, times_us, collective, ranks)


# ---- bundled sweeps ---------------------------------------------------------------------------------------------

NCCL_DATA = DATA_DIR / "nccl"


@dataclass(frozen=True)
class BundledSweep:
    """A published sweep shipped in kernels/data/nccl (its source is in that folder's README.md)."""

    file: str
    hardware: str
    collective: str | None = None
    ranks: int | None = None


# Only what the files themselves do not say: the AWS excerpts print neither the binary nor the rank lines.
BUNDLED_SWEEPS: tuple[BundledSweep, ...] = (
    BundledSweep("a100-sxm4-40gb_x8_all_reduce.txt", "8x A100-SXM4-40GB, one node, NVLink3/NVSwitch"),
    BundledSweep("l40s_x2_all_reduce.txt", "2x L40S, one node, PCIe"),
    BundledSweep("p4de_2x8_a100-80gb_efa_all_reduce.txt", "2x AWS p4de.24xlarge (16x A100-80GB), EFA", "allreduce"),
    BundledSweep("p5_2x8_h100_efa_all_reduce.txt", "2x AWS p5.48xlarge (16x H100), EFA", "allreduce"),
    BundledSweep("a3-ultragpu_2x8_h200_all_gather.txt", "2x GCP a3-ultragpu-8g (16x H200), GPUDirect-RDMA"),
)


def bundled_sweep(entry: BundledSweep) -> Sweep:
    return load_sweep(NCCL_DATA / entry.file, entry.collective, entry.ranks)


def sweep_accuracy(sweep: Sweep, label: str) -> Accuracy:
    """Fit the piecewise model on every other size of ``sweep`` (the 1st, 3rd, ...), check it on the others."""
    if sweep.ranks is None:
        raise DaydreamError(f"{sweep.source}: the rank count is unknown; give it explicitly")
    train, test = sweep.points[0::2], sweep.points[1::2]
    model = PiecewiseModel.fit([p.nbytes for p in train], [p.time_us for p in train], sweep.collective, sweep.ranks)
    err = gmae([model.predict_us(p.nbytes) for p in test], [p.time_us for p in test])
    return Accuracy(
        f"collective-piecewise/{Path(sweep.source).stem}",
        err,
        len(test),
        f"{label}: nccl-tests {sweep.collective}, {sweep.ranks} ranks, fit on every other size",
    )


# ---- real traces ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TracedCollective:
    """One collective in real traces.

    ``duration_us`` is what the collective itself took: where every rank's trace is given, the duration of the
    kernel that started last (NCCL kernels end together on all ranks, so the earlier ones spent the difference
    waiting for it: the inter-rank synchronization of Lin et al., TPDS); with one rank's trace, its kernel's duration,
    waiting
    included (``aligned`` False). ``nbytes`` is the largest per-rank size (the all-to-all input size of Lin et al.,
    TPDS).
    """

    collective: str
    nbytes: int
    ranks: int
    duration_us: float
    aligned: bool
    rank_durations_us: tuple[float, ...] = field(default=())


@dataclass(frozen=True)
class _Comm:
    collective: str
    nbytes: int | None
    ts: float
    dur: float
    ranks: int


def _rank_comms(trace: Trace) -> list[_Comm]:
    """The trace's NCCL kernels in start order, each with the collective and size its launching op recorded."""
    launch_at = {e.args.correlation: e for e in trace.runtime if e.args is not None and e.args.correlation is not None}
    # The ranges that describe a collective on the CPU: PyTorch's record_param_comms op and its nccl:<name> range.
    ranges: dict[Any, list[Any]] = defaultdict(list)
    for e in (*trace.cpu_ops, *trace.annotations):
        if e.name == "record_param_comms" or e.name.startswith("nccl:"):
            ranges[(e.pid, e.tid)].append(e)
    comms = []
    for k in trace.gpu:
        if not is_comm_kernel(k.name) or k.ts is None or k.dur is None:
            continue
        call = launch_at.get(k.args.correlation) if k.args is not None else None
        around = []
        if call is not None and call.ts is not None:
            around = [r for r in ranges.get((call.pid, call.tid), ()) if r.ts <= call.ts <= r.ts + (r.dur or 0.0)]
        described = _describe(k.name, around)
        if described is None:
            continue  # an NCCL kernel that is no collective we model
        collective, nbytes, group = described
        comms.append(_Comm(collective, nbytes, k.ts, k.dur, group or trace.world_size))
    comms.sort(key=lambda c: c.ts)
    return comms


def _known_collective(name: str) -> str | None:
    try:
        return normalize_collective(name)
    except DaydreamError:
        return None


def _describe(kernel: str, around: list[Any]) -> tuple[str, int | None, int | None] | None:
    collective = _known_collective(kernel)
    nbytes: int | None = None
    group: int | None = None
    for r in around:
        a = r.args
        if a is None:
            continue
        # all_to_all runs as SendRecv kernels: the op that launched them says which collective it was.
        named = _known_collective(r.name[5:]) if r.name.startswith("nccl:") else None
        if named is None and a.collective_name:
            named = _known_collective(a.collective_name)
        collective = named or collective
        if isinstance(a.group_size, (int, float)):
            group = int(a.group_size)
        if nbytes is None:
            nbytes = message_bytes(a)
    return None if collective is None else (collective, nbytes, group)


def traced_collectives(traces: Sequence[Trace]) -> list[TracedCollective]:
    """The collectives of a job's traces. The traces of all ranks of one job, with the same sequence of NCCL
    kernels, are aligned collective by collective; anything else is read rank by rank, waits included.
    Kernels whose size the trace does not record are left out."""
    per_rank = [_rank_comms(t) for t in traces]
    rank_ids = [t.rank for t in traces]
    aligned = (
        len(traces) > 1
        and len(set(rank_ids)) == len(traces) == traces[0].world_size  # a missing rank could be the one waited for
        and len({len(c) for c in per_rank}) == 1
        and all([c.collective for c in comms] == [c.collective for c in per_rank[0]] for comms in per_rank)
    )
    out: list[TracedCollective] = []
    if aligned:
        for group in zip(*per_rank, strict=True):
            sizes = [c.nbytes for c in group if c.nbytes is not None]
            if not sizes:
                continue
            last = max(group, key=lambda c: c.ts)
            out.append(
                TracedCollective(last.collective, max(sizes), last.ranks, last.dur, True, tuple(c.dur for c in group))
            )
        return out
    for comms in per_rank:
        out.extend(
            TracedCollective(c.collective, c.nbytes, c.ranks, c.dur, False, (c.dur,))
            for c in comms
            if c.nbytes is not None
        )
    return out


def _leave_one_size_out(items: Sequence[TracedCollective]) -> tuple[list[float], list[float]]:
    """Alpha-beta fitted on all sizes but one, checked on that one; observations are the least time per size."""
    m, t = _envelope([c.nbytes for c in items], [c.duration_us for c in items])
    ranks, name = items[0].ranks, items[0].collective
    predicted, observed = [], []
    for k in range(len(m)):
        keep = np.arange(len(m)) != k
        model = AlphaBeta.fit(list(m[keep]), list(t[keep]), name, ranks)
        predicted.append(model.predict_us(m[k]))
        observed.append(float(t[k]))
    return predicted, observed


def trace_accuracy(traces: Sequence[Trace], label: str, key: str = "trace") -> list[Accuracy]:
    """Held-out error of the alpha-beta formula on a job's traced collectives: leave one message size out, per
    collective with at least three distinct sizes (two to fit, one to check). Named
    ``collective-alphabeta/<collective>/<key>``; ``label`` says where the traces came from."""
    groups: dict[tuple[str, int], list[TracedCollective]] = defaultdict(list)
    for c in traced_collectives(traces):
        groups[(c.collective, c.ranks)].append(c)
    result = []
    for (name, ranks), items in sorted(groups.items()):
        if len({c.nbytes for c in items}) < 3 or ranks < 2:
            continue
        predicted, observed = _leave_one_size_out(items)
        how = "aligned across ranks (last starter)" if items[0].aligned else "one rank, least time per size"
        result.append(
            Accuracy(
                f"collective-alphabeta/{name}/{key}",
                gmae(predicted, observed),
                len(observed),
                f"{label}: {len(observed)} sizes of {name} on {ranks} ranks, {how}, leave-one-size-out",
            )
        )
    return result


class TraceCollectiveCosts(msgspec.Struct, frozen=True):
    """Collective models fitted to one trace's NCCL kernels, by collective: prices collectives like the trace's. JSON
    (to_dict): each model's, by collective name in order."""

    models: dict[str, CollectiveModel]

    def predict_us(self, collective: str, nbytes: float, ranks: int | None = None) -> float:
        name = normalize_collective(collective)
        if name not in self.models:
            known = ", ".join(sorted(self.models)) or "none"
            raise DaydreamError(f"the trace has no {name} to fit a model to (it has: {known})")
        return self.models[name].predict_us(nbytes, ranks)

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self.models, order="deterministic")


def fit_from_trace(graph: nx.DiGraph, ranks: int | None = None) -> TraceCollectiveCosts:
    """Fit one model per collective to the comm tasks of a graph (those with ``bytes``), least time per size so
    that waiting for other ranks counts as little as this one trace allows. ``ranks`` defaults to the trace's
    world size."""
    n = ranks or int(graph.graph.get("world_size") or 1)
    sizes: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for _, a in graph.nodes(data=True):
        if a.get("kind") == "comm" and a.get("bytes") and a.get("duration", 0) > 0 and a.get("collective"):
            sizes[normalize_collective(a["collective"])].append((a["bytes"], a["duration"]))
    if not sizes:
        raise DaydreamError("the graph has no communication kernels with message sizes to fit collective models to")
    if n < 2:
        raise DaydreamError("the trace names no world size above 1: give ranks")
    return TraceCollectiveCosts(
        {name: fit_collective_model([m for m, _ in pts], [t for _, t in pts], name, n) for name, pts in sizes.items()}
    )


# ---- everything -------------------------------------------------------------------------------------------------


def _trace_jobs(paths: Sequence[str | Path]) -> list[list[Path]]:
    """Trace files grouped by folder: the ranks of one job sit side by side."""
    jobs: dict[Path, list[Path]] = defaultdict(list)
    for p in paths:
        jobs[Path(p).resolve().parent].append(Path(p))
    return [sorted(v) for _, v in sorted(jobs.items())]


def accuracy(trace_paths: Sequence[str | Path] = ()) -> list[Accuracy]:
    """Held-out error of the collective models: the piecewise model on each bundled nccl-tests sweep (always), and
    the alpha-beta formula on the NCCL kernels of the given traces (files of one folder are one job's ranks)."""
    result = [sweep_accuracy(bundled_sweep(s), f"kernels/data/nccl/{s.file} ({s.hardware})") for s in BUNDLED_SWEEPS]
    for job in _trace_jobs(trace_paths):
        traces = [load_trace(p) for p in job]
        if len(job) == 1:
            label, key = str(job[0]), job[0].name.split(".")[0]
        else:
            label, key = f"{job[0].parent}/ ({len(job)} rank traces)", job[0].parent.name
        result.extend(trace_accuracy(traces, label, key))
    return result
