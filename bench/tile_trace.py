"""Tile a real Kineto trace to a target number of events (for benchmarks).

Each copy is shifted past the previous one in time, with correlation / external / flow ids and
ProfilerStep numbers offset so the copies stay distinct iterations of one long run.

    python bench/tile_trace.py ../shared/traces/hta/nccl_parser_config_nccl_data.json.gz /tmp/tiled.json.gz --events
    1000000
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import math
import re

_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def tile(doc: dict, target_events: int) -> dict:
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + e.get("dur", 0) for e in timed)
    period = (t1 - t0) * 1.001 + 10
    max_corr = (
        max((e.get("args", {}).get("correlation", 0) for e in events if isinstance(e.get("args"), dict)), default=0) + 1
    )
    max_ext = (
        max((e.get("args", {}).get("External id", 0) for e in events if isinstance(e.get("args"), dict)), default=0) + 1
    )
    max_flow = max((e["id"] for e in events if isinstance(e.get("id"), int)), default=0) + 1
    steps = sorted({int(m.group(1)) for e in events if (m := _STEP.match(str(e.get("name", ""))))})
    nsteps = (steps[-1] - steps[0] + 1) if steps else 0
    copies = max(1, math.ceil(target_events / len(events)))
    out = []
    for k in range(copies):
        for e in events:
            if e.get("ph") == "M":
                if k == 0:
                    out.append(e)
                continue
            c = copy.copy(e)
            if "ts" in c:
                c["ts"] = e["ts"] + k * period
            if isinstance(e.get("id"), int):
                c["id"] = e["id"] + k * max_flow
            args = e.get("args")
            if isinstance(args, dict):
                a = dict(args)
                if isinstance(a.get("correlation"), int):
                    a["correlation"] += k * max_corr
                if isinstance(a.get("External id"), int):
                    a["External id"] += k * max_ext
                c["args"] = a
            m = _STEP.match(str(e.get("name", "")))
            if m:
                c["name"] = f"ProfilerStep#{int(m.group(1)) + k * nsteps}"
            out.append(c)
    result = dict(doc)
    result["traceEvents"] = out
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--events", type=int, default=1_000_000)
    args = p.parse_args()
    opener = gzip.open if args.src.endswith(".gz") else open
    with opener(args.src, "rt") as fh:
        doc = json.load(fh)
    tiled = tile(doc, args.events)
    opener = gzip.open if args.dst.endswith(".gz") else open
    with opener(args.dst, "wt") as fh:
        json.dump(tiled, fh, separators=(",", ":"))
    print(f"{args.dst}: {len(tiled['traceEvents']):,} events")


if __name__ == "__main__":
    main()
