"""Time each script of the optimization library on a large graph, the script alone: how its time grows with the graph.

    python bench/bench_library.py [TRACE ...] [--events 1000000] [--scripts dgc,fsdp,...] [--json OUT]

Without TRACE it tiles ../shared/traces/hta/nccl_parser_config_nccl_data.json.gz to --events events (1M: 326k tasks
with --step all; 100k: 39k tasks). One process loads and builds each graph once, then runs each script in a fresh
session on it (the session copies the graph, predicts its baseline, then runs the script: only the script is timed)
and prints the time and the predicted step time; a script the trace does not suit says why instead. Run it on two
sizes to see the growth (docs/speed.md: the library's scripts, 2026-11-27).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench_simulate import tiled  # the tiling of the shared trace, as the other benchmarks make it


def time_scripts(trace: str, scripts: list[str]) -> list[dict[str, object]]:
    from daydream import build_graph, load_trace
    from daydream.dsl import Session
    from daydream.errors import DaydreamError

    graph = build_graph(load_trace(trace), "all")
    rows: list[dict[str, object]] = []
    for name in scripts:
        session = Session(graph)
        session.baseline  # noqa: B018 - the baseline's simulation (and numba's loading) is not the script's time
        t0 = time.perf_counter()
        try:
            session.run(name)
            outcome = f"{session.predicted_us / 1e3:,.3f} ms"
        except DaydreamError as exc:  # the script does not apply to this trace (or stopped): it says why
            outcome = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
        seconds = time.perf_counter() - t0
        rows.append(
            {"trace": trace, "tasks": len(graph), "script": name, "seconds": round(seconds, 3), "outcome": outcome}
        )
        print(f"{len(graph):>9,} tasks  {name:26s} {seconds:8.2f} s  {outcome}", flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="*")
    p.add_argument("--events", type=int, default=1_000_000, help="events of the tiling made without TRACE")
    p.add_argument("--scripts", help="comma-separated library names (default: all of them)")
    p.add_argument("--json", help="write the rows here as JSON")
    args = p.parse_args()

    from daydream.dsl.library import library_names

    scripts = args.scripts.split(",") if args.scripts else library_names()
    rows = []
    for trace in args.traces or [tiled(args.events, tempfile.mkdtemp())]:
        rows += time_scripts(trace, scripts)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
