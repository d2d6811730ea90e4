"""Load / build / simulate seconds and peak memory on a large trace, and the whole CLI run.

    python bench/bench_simulate.py [TRACE] [--events 1000000]

Without TRACE it tiles ../shared/traces/hta/nccl_parser_config_nccl_data.json.gz to ~1M events first.
Bound (issue 2): `daydream simulate --step all --json` on that tiling in <= 10 s and <= 1.5 GB on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared" / "traces" / "hta" / "nccl_parser_config_nccl_data.json.gz"


def phases(trace: str) -> dict[str, float]:
    """Seconds per phase, in this process (the CLI run below measures memory in a fresh one)."""
    from daydream import build_graph, load_trace, simulate

    t0 = time.perf_counter()
    tr = load_trace(trace)
    t1 = time.perf_counter()
    g = build_graph(tr, "all")
    t2 = time.perf_counter()
    tl = simulate(g)
    t3 = time.perf_counter()
    return {"events": tr.event_count, "tasks": g.number_of_nodes(), "edges": g.number_of_edges(),
            "load_s": t1 - t0, "build_s": t2 - t1, "simulate_s": t3 - t2, "baseline_ms": tl.makespan() / 1e3}  # fmt: skip


def cli_run(trace: str) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "daydream", "simulate", trace, "--step", "all", "--json"], capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    d = json.loads(out.stdout)
    return {
        "cli_wall_s": wall,
        "cli_peak_rss_mb": max(peak_kb, before) / 1024,
        "steps": len(d["steps"]),
        "error_pct": d["error_pct"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", nargs="?")
    p.add_argument("--events", type=int, default=1_000_000)
    args = p.parse_args()
    trace = args.trace
    tmp = None
    if trace is None:
        if not DEFAULT_SOURCE.is_file():
            raise SystemExit(f"{DEFAULT_SOURCE} not found: pass a trace")
        tmp = tempfile.mkdtemp()
        trace = os.path.join(tmp, "tiled.json.gz")
        subprocess.run(
            [sys.executable, str(HERE / "tile_trace.py"), str(DEFAULT_SOURCE), trace, "--events", str(args.events)], check=True
        )
    result = {"trace": trace, "cpus": os.cpu_count(), **cli_run(trace), **phases(trace)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
