"""FAE's epoch (Adnan et al., PVLDB 2022): hot mini-batches entirely on the GPU, cold ones hybrid, and the hot rows
synced between.

FAE keeps the hot embedding rows on every GPU and reorders the training data into pure hot and pure cold
mini-batches. A hot batch runs entirely on the GPU(s), a cold batch as hybrid CPU-GPU training ran it, and every
switch between the two kinds copies the hot rows over PCIe so that both sides train on the same values. An epoch of
``batches`` mini-batches, a share ``hot_fraction`` of them hot, then takes

    N_cold * T_cold + N_hot * T_hot + N_swaps * T_sync

with T_cold and T_hot the iteration times of the two kinds (daydream simulates the traced hybrid iteration and the
hot-batch graph ``transforms/fae.whatif`` makes of it) and T_sync the copy of the hot rows at a switch.

Choices made here, each for a reason given where it is made:

- N_hot is ``hot_fraction * batches`` rounded to the nearest whole batch (:func:`batch_counts`).
- The swap schedule is a run length (:func:`swap_count`): FAE's scheduler starts cold and alternates runs of
  ``switch_every`` batches of each kind until one kind runs out. ``switch_every = 1`` is FAE's R(1) (alternate every
  batch); ``None`` (or any length of at least N_cold) is R(100) (all cold batches, then all hot).
  FAE changes its rate during training from the test loss; a fixed run length is the rate it would settle on, and
  R(1) and R(100) bound the swap time of any rate.
- A swap copies the hot rows both ways (:func:`swap_us`): the GPU's updated hot rows back to the CPU and the CPU's
  back to the GPU, each over the device's PCIe link as the project's memcpy model prices it.
"""

from __future__ import annotations

import math

from daydream.errors import DaydreamError
from daydream.perf.kernels.devices import Device
from daydream.perf.kernels.roofline import memcpy_us


def _whole(value: float, what: str, low: int = 0) -> int:
    """``value`` as an int >= ``low`` (a float without a fraction counts), or a DaydreamError naming ``what``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value != int(value)
    ):
        raise DaydreamError(f"fae: {what} must be a whole number, not {value!r}")
    if value < low:
        raise DaydreamError(f"fae: {what} must be at least {low}, not {value:g}")
    return int(value)


def _time(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise DaydreamError(f"fae: {what} must be a finite time >= 0 (microseconds), not {value!r}")
    return float(value)


def _fraction(hot_fraction: float) -> float:
    if isinstance(hot_fraction, bool) or not isinstance(hot_fraction, (int, float)) or not 0 <= hot_fraction <= 1:
        raise DaydreamError(
            f"fae: hot_fraction is the share of mini-batches that are hot, in [0, 1], not {hot_fraction!r}"
        )
    return float(hot_fraction)


def batch_counts(batches: int, hot_fraction: float) -> tuple[int, int]:
    """(N_hot, N_cold) of an epoch of ``batches`` mini-batches, ``hot_fraction`` of them hot.

    N_hot is ``hot_fraction * batches`` rounded half up, not floored: the fraction ``daydream embeddings profile``
    reports is whole hot batches over whole batches, so over the same epoch the product is a whole number up to
    floating-point error (0.29 * 100 = 28.999999999999996), which flooring would turn into one batch too few."""
    n = _whole(batches, "batches", 1)
    hot = min(n, math.floor(_fraction(hot_fraction) * n + 0.5))
    return hot, n - hot


def max_swaps(n_hot: int, n_cold: int) -> int:
    """The most hot<->cold switches an epoch can have: every batch of the scarcer kind between two of the other."""
    return 2 * min(_whole(n_hot, "N_hot"), _whole(n_cold, "N_cold"))


def min_swaps(n_hot: int, n_cold: int) -> int:
    """The fewest: one when both kinds run (all of one, then all of the other), none when one kind is absent."""
    return 1 if _whole(n_hot, "N_hot") > 0 and _whole(n_cold, "N_cold") > 0 else 0


def swap_count(n_hot: int, n_cold: int, switch_every: int | None = None) -> int:
    """Switches in an epoch whose schedule starts cold and alternates runs of ``switch_every`` batches of each kind
    until one kind runs out, the rest of the other kind following in one run (``None``: one run of each, R(100)).

    With a = ceil(N_cold / L) cold runs and b = ceil(N_hot / L) hot runs, the runs alternate c h c h ...: when the
    cold runs outnumber the hot ones the epoch ends cold and each hot run costs two switches (2b); otherwise it ends
    hot, and the first cold run has no switch before it (2a - 1). Starting cold is FAE's rule (cold batches touch
    more rows, so they go first). A next epoch's first cold batch after one that ended hot is one more switch,
    which is not counted here: at most one per epoch."""
    hot, cold = _whole(n_hot, "N_hot"), _whole(n_cold, "N_cold")
    if hot == 0 or cold == 0:
        return 0
    run = max(hot, cold) if switch_every is None else _whole(switch_every, "switch_every", 1)
    cold_runs, hot_runs = math.ceil(cold / run), math.ceil(hot / run)
    return 2 * hot_runs if cold_runs > hot_runs else 2 * cold_runs - 1


def swap_us(hot_bytes: float, device: Device, round_trip: bool = True) -> float:
    """T_sync: the time of one switch, the hot rows over the device's PCIe link (the memcpy model).

    ``round_trip`` (FAE's "embedding sync"): the GPU's hot rows are written back to the CPU (D2H) and the CPU's
    refreshed to the GPU (H2D) at every switch, so neither side trains on stale rows whichever way the switch goes.
    Without it, one copy per switch: strictly, a cold->hot switch needs only the refresh and a hot->cold switch
    only the write-back, which halves the sync time; the PCIe model is symmetric, so the one copy is priced as H2D."""
    if (
        isinstance(hot_bytes, bool)
        or not isinstance(hot_bytes, (int, float))
        or not math.isfinite(hot_bytes)
        or hot_bytes < 0
    ):
        raise DaydreamError(f"fae: hot_bytes must be a finite size >= 0 (bytes), not {hot_bytes!r}")
    refresh = memcpy_us(hot_bytes, "h2d", device)
    return refresh + memcpy_us(hot_bytes, "d2h", device) if round_trip else refresh


def epoch_us(t_cold_us: float, t_hot_us: float, batches: int, hot_fraction: float, swaps: int, swap_us: float) -> float:
    """N_cold * T_cold + N_hot * T_hot + N_swaps * T_sync, microseconds; N_hot and N_cold from
    :func:`batch_counts`. ``swaps`` must be possible for those counts (:func:`min_swaps` to :func:`max_swaps`):
    a count outside them is a wrong input, not an epoch."""
    t_cold, t_hot, t_sync = _time(t_cold_us, "T_cold"), _time(t_hot_us, "T_hot"), _time(swap_us, "the swap time")
    hot, cold = batch_counts(batches, hot_fraction)
    n_swaps = _whole(swaps, "swaps")
    low, high = min_swaps(hot, cold), max_swaps(hot, cold)
    if not low <= n_swaps <= high:
        raise DaydreamError(
            f"fae: {n_swaps} swaps are impossible with {hot} hot and {cold} cold batches: between {low} and {high} "
            "(one when both kinds run, at most two per batch of the scarcer kind)"
        )
    return cold * t_cold + hot * t_hot + n_swaps * t_sync


def all_cold_epoch_us(t_cold_us: float, batches: int) -> float:
    """The epoch of hybrid training without FAE: every batch as traced."""
    return _whole(batches, "batches", 1) * _time(t_cold_us, "T_cold")


def speedup(t_cold_us: float, t_hot_us: float, batches: int, hot_fraction: float, swaps: int, swap_us: float) -> float:
    """The all-cold (hybrid) epoch over the FAE epoch: how much faster an epoch gets."""
    fae = epoch_us(t_cold_us, t_hot_us, batches, hot_fraction, swaps, swap_us)
    if fae <= 0:
        raise DaydreamError("fae: the FAE epoch takes no time (T_cold and T_hot are 0): there is no speedup to give")
    return all_cold_epoch_us(t_cold_us, batches) / fae


def steady_speedup(hot_fraction: float, ratio: float) -> float:
    """1 / ((1 - f) + f * r): the speedup with swaps free and many batches, r = T_hot / T_cold. The paper's
    1.52x over hybrid training with f ~ 0.8 means r ~ 0.57 (docs/fae.md)."""
    f = _fraction(hot_fraction)
    r = _time(ratio, "T_hot / T_cold")
    denominator = (1 - f) + f * r
    if denominator <= 0:
        raise DaydreamError("fae: every batch hot and T_hot 0: the epoch takes no time")
    return 1 / denominator
