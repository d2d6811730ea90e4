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
    "where-clause, 6 terms": (
        'let n = count(select cpu where duration > 1 and duration < 1e9 and name != "x" and '
        "duration != 5 and start >= 0 and duration != 7)"
    ),
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

# one call per DSL function (every registered one: main() fails on a function without its kind), measured with the
# call cache off, so that each call does its whole work (the worst case: a loop whose graph changes between calls)
TABLES = "[1e6, 2e6, 3e6, 4e6, 5e6, 6e6, 7e6, 8e6, 1e5, 2e5, 3e5, 4e5]"
FUNCTION_CALLS = {
    "first": "first(gpu)",
    "last": "last(gpu, 10)",
    "launches": "launches(gpu)",
    "kernels": "kernels(cpu)",
    "ops": "ops(gpu)",
    "parents": "parents(gpu)",
    "children": "children(cpu)",
    "count": "count(cpu)",
    "sum": "sum(gpu.duration)",
    "mean": "mean(gpu.duration)",
    "median": "median(gpu.duration)",
    "min": "min(gpu.duration)",
    "max": "max(gpu.duration)",
    "abs": "abs(-1.5)",
    "ceil": "ceil(1.5)",
    "floor": "floor(1.5)",
    "round": "round(2.345, 2)",
    "sqrt": "sqrt(2)",
    "log": "log(2)",
    "log2": "log2(8)",
    "exp": "exp(1)",
    "range": "range(1000)",
    "repeats": "repeats(cpu)",
    "runs": "runs(gpu)",
    "input_bytes": "input_bytes(cpu)",
    "gradients": "gradients()",
    "tensors": "tensors(cpu)",
    "block": 'block("model.layers.3.mlp")',
    "tensor_bytes": "tensor_bytes(tensors())",
    "text": "text(12345.678)",
    "tensor_parallel_pairs": "tensor_parallel_pairs()",
    "linears": "linears()",
    "pipeline_stages": "pipeline_stages(1)",
    "gradients_missing": "gradients_missing()",
    "gradient_estimate": "gradient_estimate()",
    "gradient_buckets": "gradient_buckets()",
    "job_ranks": "job_ranks()",
    "straggler": "straggler()",
    "rank_work": "rank_work(1)",
    "rank_works": "rank_works()",
    "rank_offset": "rank_offset(1)",
    "rank_offsets": "rank_offsets()",
    "allreduce": "allreduce(1e6)",
    "allgather": "allgather(1e6, ranks = 16)",
    "reducescatter": 'reducescatter(1e6, ranks = 64, inter = "ib-ndr")',
    "alltoall": "alltoall(1e6)",
    "broadcast": "broadcast(1e6)",
    "collective": 'collective("sendrecv", 1e6)',
    "device_link": "device_link()",
    "recorded_threads": "recorded_threads()",
    "recorded_cores": "recorded_cores()",
    "intra_op_factor": "intra_op_factor(4, recorded = 8)",
    "intra_op_factor_range": "intra_op_factor_range(4, recorded = 8)",
    "roofline": "roofline(1e9, 1e6)",
    "gemm": "gemm(1024, 1024, 1024)",
    "memcpy": "memcpy(1e6)",
    "embedding_bag": "embedding_bag(1024, 1e6, 8, 20, 64)",
    "embedding_tables": "embedding_tables(cpu, rows = 1000, dims = 16, pooling = 1, batch = 1)",
    "fused_step": 'fused_step(select cpu where region == "Optimizer.step#Adam.step")',
    "fae_schedule": "fae_schedule(1000, 0.5, switch_every = 1)",
    "fae_swap": "fae_swap(1e6)",
    "fae_epoch": "fae_epoch(1, 1, 100, 0.5, 10, 1)",
    "fae_speedup": "fae_speedup(1, 1, 100, 0.5, 10, 1)",
    "dtype_speedup": 'dtype_speedup("gemm")',
    "device_speedup": 'device_speedup("gemm", "A100")',
    "device_time": 'device_time("A100", "volta_sgemm_128x64_nn", "gemm", 10, "aten::mm", [[64, 64], [64, 64]])',
    "trace_device": "trace_device()",
    "compute_dtype": "compute_dtype()",
    "trace_ranks": "trace_ranks()",
    "plan_time": f"plan_time([0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1], {TABLES}, 64, 20, 1024, ranks = 2)",
    "shard_plan": f'shard_plan("best", {TABLES}, 64, 20, 1024, ranks = 4)',
    "plan_loads": f"plan_loads([0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1], {TABLES}, 64, 20, 1024, ranks = 2)",
}
# functions that answer for a job (a graph of several ranks): measured on JOB_TRACE's ranks
JOB_FUNCTIONS = {"job_ranks", "straggler", "rank_work", "rank_works", "rank_offset", "rank_offsets"}
JOB_TRACE = Path(__file__).resolve().parent.parent.parent / "shared" / "traces" / "param" / "dlrm8"
# functions that need a CPU recording with op shapes and an optimizer step: measured on the bundled example
EXAMPLE_FUNCTIONS = {"fused_step"}


def measure(graph: object, statement: str, seconds: float) -> dict[str, object]:
    from daydream.dsl import Session

    def run(n: int) -> tuple[int, float]:
        session = Session(graph, budget=10**15, on_print=lambda _line: None)  # type: ignore[arg-type]
        session.baseline  # noqa: B018 - numba and the baseline: not the loop's time
        # once before: the session's copy of the graph builds its indexes (time order, threads) at their first use,
        # once per state of the graph, as the baseline's simulation: the loop measures the work each call repeats
        session.execute(statement)
        t0 = time.perf_counter()
        session.execute(f"for i in range({n}) {{\n    {statement}\n}}")  # (each run is charged afresh)
        return session.budget.used, time.perf_counter() - t0

    run(1)  # warm: the first run builds the graph's indexes, compiles the regex
    n = 1
    units, took = run(n)
    while took < seconds / 2 and n < 10**7:
        n = max(n * 2, int(n * seconds / max(took, 1e-4) / 2))
        units, took = run(n)
    # the fastest of three: the machine's other load (2 cores shared) only ever adds time
    took = min(took, *(run(n)[1] for _ in range(2)))
    return {
        "statement": statement,
        "iterations": n,
        "units": units,
        "seconds": round(took, 3),
        "us_per_unit": round(took * 1e6 / max(units, 1), 3),
    }


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
            {
                "script": name,
                "units": session.budget.used,
                "seconds": round(time.perf_counter() - t0, 3),
                "outcome": outcome,
            }
        )
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", nargs="?")
    p.add_argument("--events", type=int, default=400_000)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--kinds", help="kinds separated by semicolons (default: all; a function's kind is its name)")
    p.add_argument("--no-scripts", action="store_true", help="skip the library scripts' units")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()

    from daydream import build_graph, load_trace
    from daydream.dsl import FUNCTIONS, evaluate
    from daydream.dsl.library import library_names
    from daydream.dsl.limits import default_budget
    from daydream.errors import DaydreamError

    unmeasured = sorted(set(FUNCTIONS) - set(FUNCTION_CALLS))
    if unmeasured:
        print(
            f"FAIL: no kind measures the function{'s' * (len(unmeasured) > 1)} {', '.join(unmeasured)}: add "
            "each to FUNCTION_CALLS",
            file=sys.stderr,
        )
        return 1
    trace = args.trace or tiled(args.events, tempfile.mkdtemp())
    graph = build_graph(load_trace(trace), "all")
    print(f"{trace}: {len(graph):,} tasks; default budget {default_budget(len(graph)):,} units", flush=True)
    statements = {**KINDS, **{name: f"let v = {call}" for name, call in FUNCTION_CALLS.items()}}
    kinds = args.kinds.split(";") if args.kinds else list(statements)
    job = None
    if any(k in JOB_FUNCTIONS for k in kinds):
        from daydream.api.job import load_priced_job

        job = load_priced_job(JOB_TRACE)
        print(f"{JOB_TRACE}: a job of {len(job):,} tasks, for {', '.join(sorted(JOB_FUNCTIONS))}", flush=True)
    from daydream.api.demo import bundled_example

    example = build_graph(load_trace(bundled_example()), "all")
    evaluate.CALL_CACHE_ENTRIES = 0  # every call does its work: what a miss costs is what a unit must cover
    rows, worst = [], (0.0, "")
    print("| work | units | seconds | us per unit |\n| --- | --- | --- | --- |")
    failed = []
    for kind in kinds:
        try:
            on = job if kind in JOB_FUNCTIONS else example if kind in EXAMPLE_FUNCTIONS else graph
            r = measure(on, statements[kind], args.seconds)
        except DaydreamError as exc:  # a statement that does not run on this graph measures nothing: a failure
            failed.append(kind)
            print(f"| {kind} (`{statements[kind]}`) | failed: {str(exc).splitlines()[0]} | | |", flush=True)
            continue
        r["kind"] = kind
        rows.append(r)
        worst = max(worst, (float(r["us_per_unit"]), kind))  # type: ignore[arg-type]
        shown = kind if kind in KINDS else f"function {kind}"
        print(
            f"| {shown} (`{statements[kind]}`) | {r['units']:,} | {r['seconds']:.2f} | {r['us_per_unit']:.3f} |",
            flush=True,
        )
    evaluate.CALL_CACHE_ENTRIES = evaluate.DEFAULT_CALL_CACHE_ENTRIES
    scripts = [] if args.no_scripts else script_units(graph, library_names())
    if scripts:
        print(
            "\n| script | units | seconds | us per unit | share of the default budget |\n| --- | --- | --- | --- |"
            " --- |"
        )
        for s in scripts:
            per = float(s["seconds"]) * 1e6 / max(int(s["units"]), 1)  # type: ignore[arg-type]
            share = int(s["units"]) / default_budget(len(graph))  # type: ignore[arg-type]
            print(f"| {s['script']} ({s['outcome']}) | {s['units']:,} | {s['seconds']:.2f} | {per:.3f} | {share:.1%} |")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"tasks": len(graph), "kinds": rows, "scripts": scripts}, indent=1) + "\n"
        )
    print(f"\nworst: {worst[0]:.3f} us per unit ({worst[1]})")
    if failed:
        print(f"\nFAIL: not measured: {', '.join(failed)}", file=sys.stderr)
        return 1
    if worst[0] > MAX_US_PER_UNIT:
        print(
            f"\nFAIL: a unit of {worst[1]} costs {worst[0]:.2f} us (bound {MAX_US_PER_UNIT} us): charge that work more",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
