"""Writing a simulated timeline as Chrome-trace JSON (opens in Perfetto and chrome://tracing)."""

from __future__ import annotations

import os
from typing import Any

import msgspec

from daydream.files import write_atomically
from daydream.simulation.timeline import Timeline

_CATS = {
    "cpu": "cpu_op",
    "dataloader": "dataloader",
    "gpu": "kernel",
    "comm": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
}


def timeline_events(timeline: Timeline) -> list[dict[str, Any]]:
    """Chrome-trace events: one process per CPU process / GPU device, one thread per CPU thread / stream."""
    g = timeline.graph
    origin = float(g.graph.get("origin_us", 0.0))
    pids: dict[str, int] = {}
    events: list[dict[str, Any]] = []
    for thread in timeline.threads:
        proc, _, lane = thread.partition("/")
        if proc not in pids:
            pids[proc] = len(pids)
            label = proc.replace("cpu:", "CPU process ").replace("gpu:", "GPU ")
            events.append({"ph": "M", "name": "process_name", "pid": pids[proc], "tid": 0, "args": {"name": label}})
        events.append({"ph": "M", "name": "thread_name", "pid": pids[proc], "tid": lane, "args": {"name": thread}})
    for i, node in enumerate(timeline.nodes):
        a = timeline.task_attrs[i]
        proc, _, lane = a["thread"].partition("/")
        args = {k: a[k] for k in ("op", "layer", "phase", "step", "class", "bytes") if a.get(k) is not None}
        args["task"] = node if isinstance(node, (int, str)) else str(node)
        events.append({
            "ph": "X", "cat": _CATS.get(a["kind"], a["kind"]), "name": a["name"], "pid": pids[proc], "tid": lane,
            "ts": origin + float(timeline.start[i]), "dur": float(timeline.end[i] - timeline.start[i]), "args": args,
        })  # fmt: skip
    return events


def export_chrome_trace(timeline: Timeline, path: str | os.PathLike[str]) -> None:
    """Write ``timeline`` as a Chrome-trace JSON file (gzip-compressed when ``path`` ends in .gz)."""
    doc = {
        "traceEvents": timeline_events(timeline),
        "displayTimeUnit": "ms",
        "otherData": {"generator": "daydream", "source": timeline.graph.graph.get("trace")},
    }
    data = msgspec.json.encode(doc)
    if str(path).endswith(".gz"):
        import gzip

        data = gzip.compress(data, compresslevel=6)
    write_atomically(path, data)
