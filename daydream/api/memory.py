"""A step's peak memory before and after a what-if, as the JSON and the screens give it (issue: "will it fit?").

From the trace's own allocator events where it holds them (``source = "trace"``: a trace recorded with
``torch.profiler.profile(profile_memory=True)``), else estimated from its shapes (``source = "shapes"``,
:func:`daydream.graph.memory.estimate_memory`). The baseline's peak is the unchanged graph's simulated step; the
prediction's the changed graph's, its tensors changed by the scripts' memory statements (docs/language.md, "Memory").
The predicted peak has a 90% interval as a predicted time does (daydream.perf.trust.uncertainty): the trace's own
step-to-step spread of the peak, and each script's error on the ledger's memory cases (``daydream validate``);
"does not fit" where it passes the device's memory (``--memory-gb``, else the trace's GPU's, else a device swap's
target's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec
import networkx as nx

from daydream.graph import derived
from daydream.graph.memory import GraphMemory, estimate_memory, memory_of
from daydream.perf.trust.uncertainty import Part, interval, memory_parts, noise_part
from daydream.simulation import Timeline
from daydream.simulation.memory import MemoryTimeline, memory_timeline
from daydream.units import brief_repr

GiB = float(1 << 30)


class MemoryInterval(msgspec.Struct):
    """A 90% interval of a predicted peak, in bytes, and the parts it is made of (as a time's)."""

    __repr__ = brief_repr  # one screen, whatever it holds

    low_bytes: float
    high_bytes: float
    half_width_pct: float
    driver: str
    extrapolated: bool
    parts: list[Part]


class MemoryReplay(msgspec.Struct):
    """The unchanged step's memory: what ``daydream simulate --json`` gives under ``memory``."""

    __repr__ = brief_repr  # one screen, whatever it holds

    source: str  # "trace": the trace's allocator events; "shapes": estimated from its shapes
    device: str
    counted: str  # what the figures count from (the profiler's count on a CPU; the allocator's total on a GPU)
    capacity_bytes: float | None
    measured_peak_bytes: float | None  # the trace's own largest total over the measured step
    baseline_peak_bytes: float  # the unchanged graph's, simulated
    at_peak: dict[str, float]  # bytes by category at the baseline's peak (they add up to it)
    step_peaks_bytes: dict[str, float]  # each step's peak as the trace measured it


class MemoryChange(msgspec.Struct):
    """The step's memory before and after a what-if: what ``daydream run --json`` gives under ``memory``."""

    __repr__ = brief_repr  # one screen, whatever it holds

    source: str
    device: str
    counted: str
    capacity_bytes: float | None
    measured_peak_bytes: float | None
    baseline_peak_bytes: float
    predicted_peak_bytes: float
    predicted_interval: MemoryInterval
    fits: bool | None  # the predicted peak within capacity_bytes (None: no capacity known)
    baseline_at_peak: dict[str, float]
    predicted_at_peak: dict[str, float]


def graph_memory(graph: nx.DiGraph) -> GraphMemory | None:
    """The graph's tensors: from its trace's allocator events, else estimated from shapes (kept on the graph, which
    scripts then change); None where neither is possible (no events, no gradient sizes)."""
    found = memory_of(graph)
    if found is None and "memory" not in graph.graph and not graph.graph.get("ranks"):
        found = estimate_memory(graph)
        graph.graph["memory"] = found
    return found


def replay_memory(timeline: Timeline, estimate: bool = False) -> MemoryReplay | None:
    """The unchanged step's memory (the trace's measured peak and the simulated one); None without memory (a trace
    without allocator events, unless ``estimate``: its shapes')."""
    memory = graph_memory(timeline.graph) if estimate else memory_of(timeline.graph)
    if memory is None:
        return None
    mt = memory_timeline(timeline, memory)
    if mt is None:
        return None
    dev = memory.devices[memory.main_device()]
    return MemoryReplay(
        memory.source,
        mt.device,
        dev.counted,
        mt.capacity_bytes,
        dev.measured_peak_bytes,
        mt.peak_bytes,
        mt.at_peak,
        dict(dev.step_peaks),
    )


def memory_change(
    before: MemoryTimeline | None,
    predicted: Timeline,
    scripts: Sequence[str | None],
    params: dict[str, Any],
    capacity_bytes: float | None = None,
) -> MemoryChange | None:
    """The step's peak before (``before``: the unchanged graph's memory, taken before the scripts changed it) and
    after (``predicted``, the changed graph's timeline): each with what holds it, the prediction's 90% interval (the
    trace's spread of the peak and the scripts' memory errors on the ledger) and whether it fits ``capacity_bytes``
    (default: the trace's GPU's, or a device swap's target's)."""
    memory = memory_of(predicted.graph)
    if before is None or memory is None:
        return None
    after = memory_timeline(predicted, memory)
    if after is None:
        return None
    dev = memory.devices[memory.main_device()]
    noise = noise_part(list(dev.step_peaks.values()))
    parts = [p for p in [noise, *memory_parts(scripts, params)] if p is not None]
    iv = interval(after.peak_bytes, parts)
    capacity = capacity_bytes if capacity_bytes is not None else _capacity(predicted.graph, after)
    return MemoryChange(
        source=memory.source,
        device=after.device,
        counted=dev.counted,
        capacity_bytes=capacity,
        measured_peak_bytes=dev.measured_peak_bytes,
        baseline_peak_bytes=before.peak_bytes,
        predicted_peak_bytes=after.peak_bytes,
        predicted_interval=MemoryInterval(
            iv.low_us, iv.high_us, iv.half_width_pct, iv.driver, iv.extrapolated, iv.parts
        ),
        fits=None if capacity is None else after.peak_bytes <= capacity,
        baseline_at_peak=before.at_peak,
        predicted_at_peak=after.at_peak,
    )


def with_capacity(change: MemoryChange | None, capacity_bytes: float | None) -> MemoryChange | None:
    """``change`` judged against ``capacity_bytes`` of device memory (``--memory-gb``) instead of the device's own;
    as it is where either is None."""
    if change is None or capacity_bytes is None:
        return change
    return msgspec.structs.replace(
        change, capacity_bytes=capacity_bytes, fits=change.predicted_peak_bytes <= capacity_bytes
    )


def _capacity(graph: nx.DiGraph, after: MemoryTimeline) -> float | None:
    """The device's memory: a device swap's target's (the `device` script), else the trace's GPU's; none for a CPU."""
    if not after.gpu:
        return None
    swaps = derived.cached(graph, "device_swaps", ()) or {}
    if len(swaps) == 1:
        from daydream.perf.kernels.devices import get_device

        try:
            return get_device(next(iter(swaps))).memory_gb * GiB  # a GPU's "80 GB" of HBM is 80 GiB
        except Exception:  # noqa: BLE001 - a key the catalog no longer knows: the trace's own
            pass
    return after.capacity_bytes if after.capacity_bytes and math.isfinite(after.capacity_bytes) else None


def gib(nbytes: float | None) -> str:
    """``1.234 GiB`` (a byte count as people read a device's memory)."""
    return "-" if nbytes is None else f"{nbytes / GiB:,.3f} GiB"
