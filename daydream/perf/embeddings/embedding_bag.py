"""Batched embedding-bag lookup time: the heuristic of Lin et al. [P1] (HiPC 2022), with its L2 hit-rate term.

One warp group computes one pooled output vector; a batched lookup over ``tables`` tables of ``rows`` rows
(dim ``dim``, fp32) for a batch of ``batch`` samples, ``pooling`` lookups per bag, runs batch * tables groups.
Each group moves (bytes, rounded up to 32-byte sectors):

    table_offsets 32, offsets 64, indices ceil(4L/32)*32, outputs ceil(4D/32)*32,
    weights  forward  L * ceil(4D/32)*32   (each of the L rows; the paper's printed formula drops the L, the
                                            authors' code has it)
             backward ceil(2*4*L*D/32)*32   (each row read and written back)

Plain model: t = B * T * (sum of the above) / DRAM bandwidth.

L2-aware model: the tables being read at once share the L2. With ``rows_per_block`` warps resident per SM,
SMs * rows_per_block groups run at once, which is ceil(SMs * rows_per_block / B) tables; each keeps
X = floor(0.9 * L2 / (tables_at_once * D * 4)) rows cached (at most E; 0.9 of the L2 as in the authors' code).
A bag hits in L2 when all its L rows are among the cached ones: p = C(X, L) / C(E, L), computed as the product
prod_{i<L} (X - i) / (E - i) (the binomials themselves overflow). Then per group

    L2 bytes   = table_offsets + offsets + p * weights
    DRAM bytes = indices + outputs + (1 - p) * weights

Sum or max: the paper adds the two times, t = B * T * (DRAM / DRAM_BW + L2 / L2_BW) (the traffic is issued by
the same warps, which wait on both); the authors' code takes the max (the two overlap). ``combine="sum"`` is
the default here, as printed in the paper; ``combine="max"`` gives the code's variant.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec

from daydream.errors import DaydreamError
from daydream.perf.kernels.devices import Device, get_device

SECTOR = 32  # bytes: the DRAM/L2 access granularity the byte counts round to
TABLE_OFFSETS_BYTES = 32
OFFSETS_BYTES = 64
L2_USABLE = 0.9  # of the L2 holds table rows (the authors' code)
# Warps resident per SM in the authors' FBGEMM setting: 64 warps x 0.71 achieved occupancy.
DEFAULT_ROWS_PER_BLOCK = 45


def _sectors(nbytes: int) -> int:
    return math.ceil(nbytes / SECTOR) * SECTOR


def group_bytes(pooling: int, dim: int, backward: bool = False) -> dict[str, int]:
    """Bytes one warp group moves, by kind (see the module docstring)."""
    weights = _sectors(2 * 4 * pooling * dim) if backward else pooling * _sectors(4 * dim)
    return {
        "table_offsets": TABLE_OFFSETS_BYTES,
        "offsets": OFFSETS_BYTES,
        "indices": _sectors(4 * pooling),
        "outputs": _sectors(4 * dim),
        "weights": weights,
    }


def tables_at_once(batch: int, sms: int, rows_per_block: int = DEFAULT_ROWS_PER_BLOCK) -> int:
    """How many tables are read at the same time: resident warp groups / groups per table (the batch)."""
    return max(1, math.ceil(sms * rows_per_block / batch))


def cached_rows(l2_bytes: float, rows: int, dim: int, tables: int) -> int:
    """Rows of each table the L2 holds when ``tables`` tables share 0.9 of it (at most the table's rows)."""
    return min(math.floor(L2_USABLE * l2_bytes / (tables * dim * 4)), rows)


def hit_rate(cached: int, rows: int, pooling: int) -> float:
    """C(cached, L) / C(rows, L): the chance that all L rows of a bag are cached, as a product of ratios."""
    if cached >= rows:
        return 1.0
    p = 1.0
    for i in range(pooling):
        if cached - i <= 0:
            return 0.0
        p *= (cached - i) / (rows - i)
    return p


class BagModel(msgspec.Struct, frozen=True):
    """The embedding-bag model's settings: ``l2_aware`` (the rows the L2 holds read at its bandwidth; False: every
    byte from DRAM), ``rows_per_block`` (the rows one thread block reads at once), ``l2_gbps`` / ``dram_gbps``
    (override the catalog's bandwidths: the paper uses the best bandwidth measured by microbenchmarks; the L2-aware
    model needs an L2 bandwidth, which the catalog has for some parts only), ``combine`` (the L2 and DRAM times
    added, or the larger taken)."""

    l2_aware: bool = True
    rows_per_block: int = DEFAULT_ROWS_PER_BLOCK
    l2_gbps: float | None = None
    dram_gbps: float | None = None
    combine: Literal["sum", "max"] = "sum"


def embedding_bag_us(
    batch: int,
    rows: int,
    tables: int,
    pooling: int,
    dim: int,
    device: Device | str,
    backward: bool = False,
    model: BagModel | None = None,
) -> float:
    """Time of one batched embedding-bag kernel (forward, or ``backward``: the gradient update), microseconds, as
    ``model`` says (:class:`BagModel`; default: L2-aware at the catalog's bandwidths)."""
    m = model or BagModel()
    l2_aware, rows_per_block, l2_gbps, dram_gbps, combine = (
        m.l2_aware,
        m.rows_per_block,
        m.l2_gbps,
        m.dram_gbps,
        m.combine,
    )
    dev = device if isinstance(device, Device) else get_device(device)
    for name, value in (("batch", batch), ("rows", rows), ("tables", tables), ("pooling", pooling), ("dim", dim)):
        if int(value) != value or value < 1:
            raise DaydreamError(f"embedding_bag: {name} must be a positive integer, not {value!r}")
    if combine not in ("sum", "max"):
        raise DaydreamError(f"embedding_bag: combine is 'sum' or 'max', not {combine!r}")
    dram_bw = (dram_gbps if dram_gbps is not None else dev.hbm_gbps) * 1e9
    b = group_bytes(pooling, dim, backward)
    groups = batch * tables
    if not l2_aware:
        return groups * sum(b.values()) / dram_bw * 1e6
    l2_rate = l2_gbps if l2_gbps is not None else dev.l2_gbps
    if l2_rate is None:
        raise DaydreamError(f"embedding_bag: the catalog has no L2 bandwidth for {dev.key}: give BagModel(l2_gbps=...)")
    x = cached_rows(dev.l2_bytes, rows, dim, tables_at_once(batch, dev.sms, rows_per_block))
    p = hit_rate(x, rows, pooling)
    l2_t = groups * (b["table_offsets"] + b["offsets"] + p * b["weights"]) / (l2_rate * 1e9)
    dram_t = groups * (b["indices"] + b["outputs"] + (1 - p) * b["weights"]) / dram_bw
    return (l2_t + dram_t if combine == "sum" else max(l2_t, dram_t)) * 1e6


def bag_shape(shapes: Any) -> tuple[int, int, float, int] | None:
    """(rows, dim, pooling, batch) of one ``aten::embedding_bag`` call, from the input dims the profiler recorded
    (a task's ``shapes``): the weight ``[rows, dim]``, then either 1-D indices ``[N]`` with offsets ``[B]`` (bags of
    N / B lookups on average) or 2-D indices ``[B, P]`` (fixed bags). None where the dims say neither (not recorded,
    another op). With ``include_last_offset`` the offsets hold one more entry than there are bags, which the dims do
    not show: the batch then reads one too many, a 1/B error."""
    if not isinstance(shapes, list) or len(shapes) < 2:
        return None
    weight, indices = shapes[0], shapes[1]
    if not _dims(weight, 2) or not isinstance(indices, list):
        return None
    if _dims(indices, 2):
        batch, pooling = indices
        lookups = batch * pooling
    elif _dims(indices, 1) and len(shapes) > 2 and _dims(shapes[2], 1):
        lookups, batch = indices[0], shapes[2][0]
    else:
        return None
    if batch < 1 or lookups < 1:
        return None
    return weight[0], weight[1], lookups / batch, batch


def _dims(value: Any, n: int) -> bool:
    """Whether ``value`` is the dims of an n-D tensor, every one >= 1 (a bool is no dimension)."""
    return isinstance(value, list) and len(value) == n and all(type(d) is int and d >= 1 for d in value)
