"""Speed of the .whatif language: parsing a long script, and a selection + scale on a 300k-task graph.

    python bench/bench_whatif.py [TRACE] [--events 1000000] [--repeat 5]

Without TRACE it tiles ../shared/traces/hta/nccl_parser_config_nccl_data.json.gz to ~1M events (326k tasks with
--step all). Bounds (issue 3): parsing a 1,000-line script < 0.2 s; `let` + `scale` of a selection with a
where-clause on the 300k-task graph < 1 s; issue 22: that transform plus the prediction after it < 1 s. Times are the
median of --repeat runs, after one warm-up; the 100
inserts and the 1,000 queued inserts run once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared" / "traces" / "hta" / "nccl_parser_config_nccl_data.json.gz"
# One of each kind of line a real script has, repeated to 1,000 lines.
LINES = [
    "# mixed precision, per layer",
    "param speedup_{i} = 2",
    'let gemm_{i} = select gpu where class in ["gemm", "conv"] and duration > {i}us',
    "scale gemm_{i} by 1 / speedup_{i}",
    'scale (select gpu where name ~ "elementwise|reduce") - gemm_{i} by 0.5',
    'set (select cpu where layer ~ "^model\\.layer{i}").gap = gap * 0.8',
    'insert gpu "fused_{i}" after last(gemm_{i}) duration sum(gemm_{i}.duration) / 4 on 7 with bytes = 4MB',
    "remove (select memset where bytes < 1KB) with launches",
    "",
    'assert predicted < baseline, "layer {i} should help"',
]


def long_script(lines: int = 1000) -> str:
    out: list[str] = []
    i = 0
    while len(out) < lines:
        out += [line.format(i=i) for line in LINES]
        i += 1
    return "\n".join(out[:lines]) + "\n"


def median_time(fn: object, repeat: int) -> float:
    fn()  # type: ignore[operator]  # warm-up: the parser tables, the first allocation of big sets
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def time_once(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", nargs="?")
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()

    from daydream import build_graph, load_trace
    from daydream.dsl import Session, parse_script
    from daydream.graph.adjacency import attrs_of

    text = long_script()
    first_parse = time_once(lambda: parse_script(text, "long.whatif"))  # includes building the LALR tables once
    parse_s = median_time(lambda: parse_script(text, "long.whatif"), args.repeat)

    trace = args.trace
    if trace is None:
        if not DEFAULT_SOURCE.is_file():
            raise SystemExit(f"{DEFAULT_SOURCE} not found: pass a trace")
        trace = os.path.join(tempfile.mkdtemp(), "tiled.json.gz")
        subprocess.run(
            [sys.executable, str(HERE / "tile_trace.py"), str(DEFAULT_SOURCE), trace, "--events", str(args.events)],
            check=True,
        )
    graph = build_graph(load_trace(trace), "all")
    session = Session(graph, copy=False)  # in place: the benchmark times the statements, not a copy
    statements = 'let gemm = select gpu where class in ["gemm", "conv"] and duration > 10us\nscale gemm by 0.5'
    select_scale_s = median_time(lambda: session.execute(statements), args.repeat)
    kind_only_s = median_time(lambda: session.execute("scale gpu by 1.0"), args.repeat)
    # the prediction after the scale (the session simulated its baseline when it began, which loaded numba and kept
    # the graph's arrays: only the durations are read again)
    predict_s = time_once(session.predict)
    # issue 22: a transform and the prediction after it, as a what-if session repeats them (median, after the above)
    # (a selection that stays the same size run after run: every GEMM and convolution 10% faster)
    again = 'scale (select gpu where class in ["gemm", "conv"]) by 0.9'
    rescale_predict_s = median_time(lambda: (session.execute(again), session.predict()), args.repeat)
    # 100 inserts in a loop, each with its launch call and a cross-stream wait: the first builds the topological
    # order the cycle check keeps up to date, the rest pay only for what they touch
    inserts = (
        'for k in first(select kernel where class == "gemm", 100) {\n'
        '    insert gpu (k.name[0] + "_copy") after k duration k.duration[0] on 9999\n'
        "}"
    )
    inserts_s = time_once(lambda: session.execute(inserts))
    # 1,000 queued transfers (as p3 inserts gradient slices: no launch call, no place in the stream's order; each
    # push bound with `let` and its pull anchored on it), then the prediction with a priority schedule
    queued = (
        'for k in first(select kernel where class == "gemm", 500) {\n'
        '    let push = insert comm "push" after k duration 20us on 9998 launch none queued with prio = k.start[0]\n'
        '    insert comm "pull" after push duration 20us on 9998 launch none queued with prio = k.start[0]\n'
        "}\n"
        "schedule priority prio"
    )
    queued_s = time_once(lambda: session.execute(queued))
    predict_priority_s = time_once(session.predict)
    print(
        json.dumps(
            {
                "cpus": os.cpu_count(),
                "script_lines": text.count("\n"),
                "parse_1000_lines_s": parse_s,
                "first_parse_s_including_grammar": first_parse,
                "tasks": graph.number_of_nodes(),
                "selected": len(session.scope["gemm"]),
                "select_where_and_scale_s": select_scale_s,
                "scale_all_gpu_s": kind_only_s,
                "simulate_after_s": predict_s,
                "select_scale_and_predict_again_s": rescale_predict_s,
                "insert_100_in_a_loop_s": inserts_s,
                "queued_inserted": sum(1 for a in attrs_of(graph).values() if a.get("queued")),
                "insert_1000_queued_s": queued_s,
                "simulate_after_queued_priority_s": predict_priority_s,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
