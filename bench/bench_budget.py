"""What a unit of the work budget costs in time, per kind of work: the budget is meant to track time (a unit a
microsecond, at most), so that its default ends a runaway script in about a minute on any graph.

    python bench/bench_budget.py [TRACE] [--events 400000] [--seconds 2] [--json OUT]

Without TRACE it tiles ../shared/traces/hta/nccl_parser_config_nccl_data.json.gz to --events events (400k: ~130k tasks
with --step all, the size of graph the issue's runaway loop ran on). Each kind of work is a loop of one statement
run for about --seconds; the table gives the units it was charged, the time it took and their ratio (us per unit),
and fails (exit 1) where a unit costs more than MAX_US_PER_UNIT: the charge of that kind of work is too low. Then
each library script's units on the graph, against the default budget (limits.default_budget).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench_simulate import tiled

# a unit stands for at most this much of the interpreter's time (limits.py: "about a microsecond, never more than 2")
MAX_US_PER_UNIT = 2.0

# one statement per kind of work, run in a loop; `N` is the iteration count, sized to the time asked for
KINDS = {
    "where-clause, regex": 'let n = count(select cpu where name ~ "q.*z")',
    "where-clause, comparison": "let n = count(select cpu where duration > 10us)",
    "where-clause, in list": 'let n = count(select gpu where class in ["gemm", "conv"])',
    "where-clause, 6 terms": 'let n = count(select cpu where duration > 1 and duration < 1e9 and name != "x" and '
    "duration != 5 and start >= 0 and duration != 7)",
    "where-clause, index": 'let n = count(select where name == "aten::mm")',
    "kind word": "let n = count(gpu)",
    "selection algebra": "let n = count(gpu - comm)",
    "attribute of a selection": "let n = sum(gpu.duration)",
    "scale": "scale gpu by 1",
    "set": "set gpu.mark = 1",
    "insert": 'insert cpu "x" after last(cpu) duration 1us',
    "remove": 'remove select cpu where name == "nothing"',
    "predicted": "let p = predicted",
    "empty loop": "for j in range(1000) {}",
    "list": "let xs = range(1000) + range(1000)",
    "string": 'let s = "ab" * 10000',
    "print": 'print "x"',
}


def measure(graph: object, statement: str, seconds: float) -> dict[str, object]:
    from daydream.dsl import Session

    def run(n: int) -> tuple[int, float]:
        session = Session(graph, budget=10**15, on_print=lambda _line: None)  # type: ignore[arg-type]
        session.baseline  # noqa: B018 - numba and the baseline: not the loop's time
        t0 = time.perf_counter()
        session.execute(f"for i in range({n}) {{\n    {statement}\n}}")
        return session.budget.used, time.perf_counter() - t0

    run(1)  # warm: the first run builds the graph's indexes, compiles the regex
    n = 1
    units, took = run(n)
    while took < seconds / 2 and n < 10**7:
        n = max(n * 2, int(n * seconds / max(took, 1e-4) / 2))
        units, took = run(n)
    return {"statement": statement, "iterations": n, "units": units, "seconds": round(took, 3),
            "us_per_unit": round(took * 1e6 / max(units, 1), 3)}  # fmt: skip


def script_units(graph: object, scripts: list[str]) -> list[dict[str, object]]:
    from daydream.dsl import Session
    from daydream.errors import DaydreamError

    rows = []
    for name in scripts:
        session = Session(graph, budget=10**15)  # type: ignore[arg-type]
        session.baseline  # noqa: B018
        t0 = time.perf_counter()
        try:
            session.run(name)
            outcome = "ok"
        except DaydreamError as exc:
            outcome = f"{type(exc).__name__}"
        rows.append(
            {"script": name, "units": session.budget.used, "seconds": round(time.perf_counter() - t0, 3), "outcome": outcome}
        )
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", nargs="?")
    p.add_argument("--events", type=int, default=400_000)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--kinds", help="kinds separated by semicolons (default: all)")
    p.add_argument("--no-scripts", action="store_true", help="skip the library scripts' units")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()

    from daydream import build_graph, load_trace
    from daydream.dsl.library import library_names
    from daydream.dsl.limits import default_budget

    trace = args.trace or tiled(args.events, tempfile.mkdtemp())
    graph = build_graph(load_trace(trace), "all")
    print(f"{trace}: {len(graph):,} tasks; default budget {default_budget(len(graph)):,} units", flush=True)
    kinds = args.kinds.split(";") if args.kinds else list(KINDS)
    rows, worst = [], 0.0
    print("| work | units | seconds | us per unit |\n| --- | --- | --- | --- |")
    for kind in kinds:
        r = measure(graph, KINDS[kind], args.seconds)
        r["kind"] = kind
        rows.append(r)
        worst = max(worst, float(r["us_per_unit"]))  # type: ignore[arg-type]
        print(f"| {kind} (`{KINDS[kind]}`) | {r['units']:,} | {r['seconds']:.2f} | {r['us_per_unit']:.3f} |", flush=True)
    scripts = [] if args.no_scripts else script_units(graph, library_names())
    if scripts:
        print("\n| script | units | seconds | us per unit | share of the default budget |\n| --- | --- | --- | --- | --- |")
        for s in scripts:
            per = float(s["seconds"]) * 1e6 / max(int(s["units"]), 1)  # type: ignore[arg-type]
            share = int(s["units"]) / default_budget(len(graph))  # type: ignore[arg-type]
            print(f"| {s['script']} ({s['outcome']}) | {s['units']:,} | {s['seconds']:.2f} | {per:.3f} | {share:.1%} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"tasks": len(graph), "kinds": rows, "scripts": scripts}, indent=1) + "\n")
    if worst > MAX_US_PER_UNIT:
        print(f"\nFAIL: a unit costs up to {worst:.2f} us (bound {MAX_US_PER_UNIT} us): charge that work more", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
