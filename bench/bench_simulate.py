"""Load / build / simulate seconds and peak memory on a large trace, and the whole CLI run; how each grows with size.

    python bench/bench_simulate.py [TRACE]                      # one trace (default: the shared trace tiled to ~1M
    events)
    python bench/bench_simulate.py --scaling 100000,1000000,10000000   # the shared trace tiled to each size: a table
    python bench/bench_simulate.py --repeat 3                   # the CLI run three times: the median and the range

Bounds (issue 22): `daydream simulate --step all --json` on the 1M-event tiling in <= 5 s and <= 1 GB, on the
10M-event tiling in <= 60 s and <= 6 GB, on 2 cores. Each phase runs in a fresh process of its own, after the CLI
run, so that each peak is the phase's own (a peak includes the phases before it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared" / "traces" / "hta" / "nccl_parser_config_nccl_data.json.gz"


def phases(trace: str) -> dict[str, float]:
    """Seconds per phase and the peak memory once each has run, in this process, as the CLI runs them."""
    from daydream import build_graph, load_trace
    from daydream.api.replay import replay_graph

    def peak_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    t0 = time.perf_counter()
    tr = load_trace(trace)
    t1 = time.perf_counter()
    load_peak = peak_mb()
    events = tr.event_count
    g = build_graph(tr, "all", release_events=True)  # as replay() builds, and drops the trace after
    t2 = time.perf_counter()
    build_peak = peak_mb()
    del tr
    result = replay_graph(g)
    t3 = time.perf_counter()
    simulate_peak = peak_mb()
    text = json.dumps(result.to_dict())
    t4 = time.perf_counter()
    return {
        "events": events,
        "tasks": g.number_of_nodes(),
        "edges": g.number_of_edges(),
        "load_s": t1 - t0,
        "build_s": t2 - t1,
        "simulate_s": t3 - t2,
        "report_s": t4 - t3,
        "load_peak_mb": load_peak,
        "build_peak_mb": build_peak,
        "simulate_peak_mb": simulate_peak,
        "report_peak_mb": peak_mb(),
        "baseline_ms": result.baseline_us / 1e3,
        "json_bytes": len(text),
    }


def compile_bytecode() -> None:
    """Compile daydream's bytecode where it is missing or stale, as ``pip install`` does when it installs the package.
    Python compiles a module from source whenever its bytecode is missing, and writes it for the next run unless told
    not to: an editable install on a machine that sets PYTHONDONTWRITEBYTECODE (this one does) compiles its ~60
    modules in every run, 0.15 s of a 1M-event run here, which no installed copy pays. The benches time the CLI as
    installed. (compileall skips a module whose bytecode is up to date, and writes whatever the setting.)"""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("daydream")
    assert spec is not None and spec.submodule_search_locations
    compileall.compile_dir(next(iter(spec.submodule_search_locations)), quiet=2)


def run_child(argv: list[str]) -> tuple[float, Any, bytes]:
    """Run ``argv``: its wall time from outside, its own rusage (wait4's, of that child alone: the children's maximum
    would count earlier children's) and its stdout; exits with its stderr where it fails."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(argv)}:\n{err.read().decode(errors='replace')[-2000:]}")
        return wall, usage, out.read()


def cli_run(trace: str) -> dict[str, float]:
    """The whole CLI run: its wall time and its own peak memory."""
    wall, usage, text = run_child([sys.executable, "-m", "daydream", "simulate", trace, "--step", "all", "--json"])
    d = json.loads(text)
    return {
        "cli_wall_s": wall,
        "cli_peak_rss_mb": usage.ru_maxrss / 1024,
        "steps": len(d["steps"]),
        "error_pct": d["error_pct"],
        "cli_page_faults": usage.ru_minflt,
        "cli_system_s": usage.ru_stime,
    }


def measure(trace: str, repeat: int = 1) -> dict[str, Any]:
    """The CLI run (``repeat`` times: the median wall time, and the range), then the phases in a fresh process; with
    the machine's speed that day at this kind of work (:func:`reference_s`)."""
    runs = [cli_run(trace) for _ in range(repeat)]
    out = subprocess.run([sys.executable, __file__, "--phases", trace], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    walls = sorted(r["cli_wall_s"] for r in runs)
    cli = {
        **runs[0],
        "cli_wall_s": statistics.median(walls),
        "cli_wall_range_s": [walls[0], walls[-1]],
        "cli_peak_rss_mb": max(r["cli_peak_rss_mb"] for r in runs),
    }
    return {"trace": trace, "cpus": os.cpu_count(), "reference_s": reference_s(), **cli, **json.loads(out.stdout)}


def reference_s() -> float:
    """Seconds to load, build and simulate the untiled shared trace (40.6k events), the best of three in a fresh
    process: how fast this machine ran this kind of work that day. The development VM's speed varies by 1.5x from
    one hour to the next (the 10M-event run 120 s one day, 189 s another, the code the same but for 10%), and a
    plain Python loop does not show it (0.24 s on the slow day, 0.42-1.05 s on faster ones): figures compare
    through this one."""
    code = (
        "import time, sys\nfrom daydream.api.replay import replay\nbest = 1e9\nfor _ in range(3):\n"
        "    t = time.perf_counter(); replay(sys.argv[1], step='all'); best = min(best, time.perf_counter() - t)\n"
        "print(best)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(DEFAULT_SOURCE)], capture_output=True, text=True)
    return float(out.stdout) if out.returncode == 0 else math.nan


def tiled(events: int, folder: str) -> str:
    if not DEFAULT_SOURCE.is_file():
        raise SystemExit(f"{DEFAULT_SOURCE} not found: pass a trace")
    trace = os.path.join(folder, f"tiled_{events}.json.gz")
    if not os.path.isfile(trace):
        subprocess.run(
            [sys.executable, str(HERE / "tile_trace.py"), str(DEFAULT_SOURCE), trace, "--events", str(events)],
            check=True,
        )
    return trace


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        (
            "| events | tasks | load | build | simulate | report | CLI run | CLI peak | peak per event | page faults"
            " (system time) | replay error |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['events']:,} | {r['tasks']:,} | {r['load_s']:.2f} s | {r['build_s']:.2f} s | {r['simulate_s']:.2f} s"
            f" | {r['report_s']:.2f} s | {_wall(r)} | {r['cli_peak_rss_mb'] / 1024:.2f} GiB |"
            f" {r['cli_peak_rss_mb'] * 1024 * 1024 / r['events']:.0f} B | {r['cli_page_faults']:,}"
            f" ({r['cli_system_s']:.1f} s) | {r['error_pct']:+.2f}% |"
        )
    refs = ", ".join(f"{r['reference_s']:.2f}" for r in rows)
    return (
        "\n".join(lines)
        + f"\n\nreference (the untiled trace, load + build + simulate): {refs} s, at each row's measurement"
    )


def _wall(row: dict[str, Any]) -> str:
    low, high = row["cli_wall_range_s"]
    return f"{row['cli_wall_s']:.1f} s" if low == high else f"{row['cli_wall_s']:.1f} s ({low:.1f}-{high:.1f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", nargs="?")
    p.add_argument("--events", type=int, default=1_000_000, help="the size to tile to, without TRACE")
    p.add_argument("--scaling", help="sizes to tile to, comma-separated: one row each")
    p.add_argument("--keep", help="a folder to keep the tiled traces in (they take minutes to write at 10M events)")
    p.add_argument("--repeat", type=int, default=1, help="CLI runs per trace: the median wall time, and the range")
    p.add_argument("--phases", action="store_true", help=argparse.SUPPRESS)  # the child process: phases of TRACE
    args = p.parse_args()
    if args.phases:
        print(json.dumps(phases(args.trace)))
        return
    compile_bytecode()
    folder = args.keep or tempfile.mkdtemp()
    if args.scaling:
        rows = [measure(tiled(int(n), folder), args.repeat) for n in args.scaling.split(",")]
        print(json.dumps(rows, indent=2))
        print(table(rows))
        return
    print(json.dumps(measure(args.trace or tiled(args.events, folder), args.repeat), indent=2))


if __name__ == "__main__":
    main()
