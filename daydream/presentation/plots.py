"""The report's figures (matplotlib, written as PNG and SVG): the breakdown before and after, time per layer, and
each timeline. matplotlib is imported here only, with the Agg backend (no display needed)."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from daydream.api.analyses import Analysis
from daydream.files import write_atomically
from daydream.graph.schema import GPU_KINDS
from daydream.names import markup_text, track_label
from daydream.simulation import Timeline
from daydream.simulation.timeline import BREAKDOWN_PARTS, union_intervals
from daydream.units import ms, nbytes

_PART_COLOURS = {
    "cpu_only_us": "#4c72b0",
    "gpu_only_us": "#55a868",
    "cpu_gpu_overlap_us": "#8172b2",
    "idle_us": "#c8c8c8",
}
_KIND_COLOURS = {
    "cpu": "#4c72b0",
    "dataloader": "#dd8452",
    "gpu": "#55a868",
    "comm": "#c44e52",
    "memcpy": "#937860",
    "memset": "#da8bc3",
}
MAX_LANES = 40  # timeline rows drawn: the busiest threads and streams
MAX_LABEL = 40


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, out_dir: str, stem: str) -> list[str]:
    """``stem``.png and ``stem``.svg in ``out_dir``, each written atomically."""
    plt = _pyplot()
    paths = []
    for ext in ("png", "svg"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=110, bbox_inches="tight", metadata={"Date": None} if ext == "svg" else None)
        path = os.path.join(out_dir, f"{stem}.{ext}")
        data = buf.getvalue()
        if (
            ext == "svg"
        ):  # matplotlib writes a label's control characters into the XML as they are: one makes it unreadable
            data = markup_text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        write_atomically(path, data)
        paths.append(path)
    plt.close(fig)
    return paths


def _short(text: str, limit: int = MAX_LABEL) -> str:
    """A name from a trace as a label: cut to ``limit``, and with ``$`` escaped, so that matplotlib draws it as text
    (an op named ``$a^^b$`` would otherwise be parsed as math, and fail the report)."""
    text = text.removeprefix("autograd::engine::evaluate_function: ")
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return markup_text(text).replace("$", r"\$")  # control characters drawn as \xNN, as the page and SVG show them


def _doing(timeline: Timeline, kinds: dict[str, list[int]]) -> str | None:
    """What a thread or stream mostly does, by time: its GPU tasks' class, or its CPU tasks' phase."""
    time: dict[str, float] = {}
    for kind, ix in kinds.items():
        for i in ix:
            a = timeline.task_attrs[i]
            key = a.get("class") if kind in GPU_KINDS else a.get("phase")
            if key and key != "other":
                time[key] = time.get(key, 0.0) + float(timeline.end[i] - timeline.start[i])
    return max(time, key=time.__getitem__) if time else None


def breakdown_figure(analyses: Sequence[Analysis], out_dir: str, intervals: Sequence[Any] = ()) -> list[str]:
    """Stacked bars, one per timeline (baseline, predicted): CPU only / GPU only / overlap / idle, in ms; each
    bar's 90% interval (``intervals``, one per analysis: daydream.perf.trust.uncertainty.Interval) as an error bar."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.6 * len(analyses)))
    labels = [a.label for a in analyses]
    left = np.zeros(len(analyses))
    for key, name in BREAKDOWN_PARTS.items():
        values = np.array([a.breakdown[key] / 1e3 for a in analyses])
        ax.barh(labels, values, left=left, label=name, color=_PART_COLOURS[key])
        left += values
    for y, (a, iv) in enumerate(zip(analyses, intervals)):
        if iv.half_width_pct:  # around the step time, as far as the interval reaches each way
            total = a.step_us / 1e3
            ax.errorbar(
                [total],
                [y],
                xerr=[[total - iv.low_us / 1e3], [iv.high_us / 1e3 - total]],
                fmt="none",
                ecolor="#222222",
                capsize=4,
                lw=1.2,
                label="90% interval" if y == 0 else None,
            )
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_title("Where the step's time goes")
    ax.legend(
        ncol=4,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.35 if len(analyses) > 1 else -0.6),
        frameon=False,
        fontsize=8,
    )
    return _save(fig, out_dir, "breakdown")


def layers_figure(analyses: Sequence[Analysis], out_dir: str, top: int = 15) -> list[str]:
    """Per layer (op and phase), its time on the step's critical path - held by its kernels (GPU) or its CPU tasks -
    for the ``top`` layers of the first timeline; each timeline's bars side by side. A timeline's bars over all its
    layers add up to its step."""
    plt = _pyplot()
    first = analyses[0].layers[:top]
    keys = [(r.name, r.phase) for r in first]
    fig, ax = plt.subplots(figsize=(8, 1.0 + 0.38 * max(1, len(keys)) * len(analyses)))
    height = 0.8 / len(analyses)
    y = np.arange(len(keys))
    for j, a in enumerate(analyses):
        rows = {(r.name, r.phase): r for r in a.layers}
        gpu = np.array([rows[k].critical_gpu_us / 1e3 if k in rows else 0.0 for k in keys])
        cpu = np.array([(rows[k].critical_us - rows[k].critical_gpu_us) / 1e3 if k in rows else 0.0 for k in keys])
        pos = y + j * height
        ax.barh(pos, gpu, height, color="#55a868", alpha=1.0 - 0.45 * j, label=f"{a.label}: its kernels")
        ax.barh(pos, cpu, height, left=gpu, color="#4c72b0", alpha=1.0 - 0.45 * j, label=f"{a.label}: its CPU tasks")
    ax.set_yticks(y + height * (len(analyses) - 1) / 2, [_short(f"{n} ({p})") for n, p in keys], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms on the step's critical path (all layers of a timeline add up to its step)")
    ax.set_title("Layers: time holding the step")
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    return _save(fig, out_dir, "layers")


def timeline_figure(timeline: Timeline, label: str, out_dir: str, stem: str, span_us: float | None = None) -> list[str]:
    """The timeline as rows of bars, one per CPU thread and GPU stream (the busiest MAX_LANES), coloured by kind.
    Bars closer than a pixel merge, so the figure stays small on a million tasks. ``span_us``: a common x range
    for figures drawn side by side."""
    plt = _pyplot()
    t0 = float(timeline.start.min()) if len(timeline.nodes) else 0.0
    span = span_us or timeline.makespan() or 1.0
    lanes: dict[str, dict[str, list[int]]] = {}
    for i, a in enumerate(timeline.task_attrs):
        lanes.setdefault(a["thread"], {}).setdefault(a["kind"], []).append(i)
    busy = {lane: sum(len(ix) for ix in kinds.values()) for lane, kinds in lanes.items()}
    shown = sorted(
        sorted(lanes, key=lambda lane: -busy[lane])[:MAX_LANES], key=lambda lane: (lane.startswith("gpu"), lane)
    )
    fig, ax = plt.subplots(figsize=(11, 1.0 + 0.32 * max(1, len(shown))))
    pixel = span / 1500  # merge bars closer than this
    for row, lane in enumerate(shown):
        for kind, ix in lanes[lane].items():
            arr = np.stack([timeline.start[ix] - t0, timeline.end[ix] - t0 + pixel], axis=1) / 1e3
            s, e = union_intervals(arr)
            ax.broken_barh(
                list(zip(s.tolist(), (e - s - pixel / 1e3).clip(min=pixel / 1e3).tolist())),
                (row - 0.4, 0.8),
                facecolors=_KIND_COLOURS.get(kind, "#999999"),
                linewidth=0,
            )
    ax.set_yticks(
        range(len(shown)), [_short(track_label(lane, _doing(timeline, lanes[lane])), 40) for lane in shown], fontsize=7
    )
    ax.invert_yaxis()
    ax.set_xlim(0, span / 1e3)
    ax.set_xlabel("ms from the first simulated task's start")
    hidden = len(lanes) - len(shown)
    w0, w1, measured = timeline.step_window()
    steps = len(timeline.step_periods())
    drawn = f"{label} timeline: {ms(timeline.makespan())} drawn" + (f", {steps} simulated steps" if steps > 1 else "")
    if measured and (w0 > t0 or steps > 1):  # the window the step is measured over, shaded
        ax.axvspan((w0 - t0) / 1e3, (w1 - t0) / 1e3, color="#f0e442", alpha=0.18, lw=0)
        which = "the measured step" if measured == 1 else f"the {measured} measured steps"
        drawn += (
            f"; shaded, {which}: {(w0 - t0) / 1e3:,.3f}-{(w1 - t0) / 1e3:,.3f} ms (step time {ms(timeline.step_us())})"
        )
    ax.set_title(drawn + (f"; {hidden} quieter rows not drawn" if hidden else ""), fontsize=9)
    kinds = sorted({k for lane in shown for k in lanes[lane]})
    from matplotlib.patches import Patch

    ax.legend(
        handles=[Patch(color=_KIND_COLOURS.get(k, "#999999"), label=k) for k in kinds],
        fontsize=7,
        ncol=len(kinds),
        loc="upper center",
        bbox_to_anchor=(0.5, -0.12 - 0.5 / max(1, len(shown))),
        frameon=False,
    )
    return _save(fig, out_dir, stem)


def memory_figure(series: Sequence[tuple[str, Any]], out_dir: str, capacity_bytes: float | None = None) -> list[str]:
    """The step's memory, one line per timeline (``series``: a label and its daydream.simulation.memory.MemoryTimeline),
    each from its step's window start, its peak marked; the device's memory as a line where it is known."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 3.2))
    colours = ("#4c72b0", "#dd8452")
    scale, unit = (1 << 30, "GiB") if max(float(m.peak_bytes) for _, m in series) >= 1 << 30 else (1 << 20, "MiB")
    for k, (label, m) in enumerate(series):
        t = (np.asarray(m.times_us, np.float64) - float(m.times_us[0])) / 1e3 if len(m.times_us) else np.zeros(1)
        level = np.asarray(m.levels, np.float64) / scale if len(m.levels) else np.zeros(1)
        ax.step(
            t,
            level,
            where="post",
            color=colours[k % 2],
            lw=1.2,
            label=f"{label}: peak {m.peak_bytes / scale:,.2f} {unit}",
        )
        at = (float(m.peak_us) - float(m.times_us[0])) / 1e3 if len(m.times_us) else 0.0
        ax.plot([at], [m.peak_bytes / scale], "o", color=colours[k % 2], ms=4)
    top = max(float(m.peak_bytes) for _, m in series)
    if capacity_bytes and capacity_bytes <= 4 * top:  # a line of the device's memory where it is on the plot's scale
        ax.axhline(
            capacity_bytes / scale,
            color="#c44e52",
            lw=1,
            ls="--",
            label=f"device memory {capacity_bytes / scale:,.1f} {unit}",
        )
    elif capacity_bytes:
        ax.plot([], [], " ", label=f"device memory {nbytes(capacity_bytes)}, off this scale")
    ax.set_xlabel("ms from the step's start (the end of the step before)")
    ax.set_ylabel(unit)
    device = series[0][1].device if series else "-"
    ax.set_title(f"Memory over the step on {device}: the step's window, each timeline's own", fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="upper left")
    return _save(fig, out_dir, "memory")
