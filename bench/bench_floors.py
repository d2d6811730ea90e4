"""What `daydream simulate --step all --json` cannot go below on this machine: each fixed or per-event cost alone.

    python bench/bench_floors.py [TRACE]          # default: the shared trace tiled to ~1M events (bench_simulate.py's)
    python bench/bench_floors.py --repeat 5       # the best of 5 fresh processes per part (default 3)
    python bench/bench_floors.py --side-by-side-only   # the whole run, json.load and HTA's load alone

Each part runs in a fresh process (the best of --repeat), timed inside it unless said otherwise:

- interpreter: `python -c pass`, timed from outside; imports: `import daydream.commands.cli` (what every run imports).
- gunzip: the file inflated whole in one thread; decode: its text decoded whole into the loader's typed events
  (msgspec structs), the collector paused as the loader pauses it.
- load: `load_trace` as the CLI runs it (the file read and inflated ahead by a thread, decoded a batch at a time,
  the events filed by family and kind, sorted).
- scan into columns: `daydream.trace.columns.load_columns`, the columnar loader: the file read and inflated ahead by
  a thread, each batch of text scanned by compiled code into typed columns (every field of the loader's events, with
  its checks; no Python object per event), its machine code loaded first.
- numba: importing the compiled frontier loop and loading its cached machine code (its first call, on the example).
- read arrays: reading the built graph into the simulation's arrays (tasks, threads, dependencies, lags).
- compiled loop: the compiled simulation of those arrays, its code loaded; Python loop: the simulation without
  numba, reading the graph included.
- graph copy: `copy_graph` of the built graph: making one dict per task and per dependency and networkx's adjacency
  once, the least any build that ends in this graph pays.
- report: the replay's report of the simulated graph as JSON text.

And side by side on the same file (issue 55), each in a fresh process with its peak memory: the whole run, `daydream
simulate --step all --json TRACE` (timed from outside, as installed: the package's bytecode compiled first, as pip
compiles it; bench_simulate.compile_bytecode); Python's `json.load` of the file (gzip.open, the standard
library's parser: the bound is the whole simulation no slower than this parse alone); HolisticTraceAnalysis's own
load of it (`TraceAnalysis(trace_dir=...)` on a folder holding the file; `pip install 'daydream-whatif[bench]'`,
left out where it is not installed).

With them, ``reference_s`` (bench_simulate.py): this VM's speed varies by 1.5x from one hour to the next.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "daydream" / "examples"

# What each design pays at the least before the work this bench cannot isolate: the parts it cannot skip, summed.
# This one: the graph of dicts (its builder's own work not counted); a columnar one (typed columns from the compiled
# scanner, a compiled build, networkx only where users touch the graph): its build and report not counted, nor
# reading a graph into arrays, which such a design would not do.
# A tuple inside is a choice: the cheaper of its ways (the compiled simulation with numba's import, or the Python loop).
SIMULATION = (("numba", "read_arrays", "compiled_loop"), ("python_loop",))
DESIGN_FLOORS: dict[str, tuple[str | tuple[tuple[str, ...], ...], ...]] = {
    "this design, before its builder's own work": (
        "interpreter",
        "imports",
        "load",
        SIMULATION,
        "graph_copy",
        "report",
    ),
    "a columnar design, before its build and report": (
        "interpreter",
        "imports",
        "scan_columns",
        "numba",
        "compiled_loop",
    ),
}


def design_floor(result: dict[str, float], parts: tuple[str | tuple[tuple[str, ...], ...], ...]) -> tuple[float, str]:
    """The least ``parts`` cost in ``result``, and what it adds up."""
    total, names = 0.0, []
    for item in parts:
        ways = item if isinstance(item, tuple) else ((item,),)
        cheapest = min(ways, key=lambda way: sum(result[w] for w in way))
        total += sum(result[w] for w in cheapest)
        names += cheapest
    return total, " + ".join(n.replace("_", " ") for n in names)


PARTS = (
    "interpreter",
    "imports",
    "gunzip",
    "decode",
    "load",
    "scan_columns",
    "numba",
    "read_arrays",
    "compiled_loop",
    "python_loop",
    "graph_copy",
    "report",
)
SIDE_BY_SIDE = ("cli", "json_load", "hta_load")  # the whole run, and two other programs' parse of the same file


def part(name: str, trace: str) -> float:
    """Seconds of part ``name`` in this process."""
    import gc

    if name == "imports":
        t0 = time.perf_counter()
        import daydream.commands.cli  # noqa: F401

        return time.perf_counter() - t0
    if name == "gunzip":
        import gzip

        t0 = time.perf_counter()
        with gzip.open(trace, "rb") as f:
            f.read()
        return time.perf_counter() - t0
    if name == "decode":
        from daydream.trace.reading import read_trace_bytes
        from daydream.trace.schema import TRACE_DECODER

        text = read_trace_bytes(trace)
        gc.disable()
        t0 = time.perf_counter()
        TRACE_DECODER.decode(text)
        return time.perf_counter() - t0
    if name == "load":
        from daydream import load_trace

        t0 = time.perf_counter()
        load_trace(trace)
        return time.perf_counter() - t0
    if name == "json_load":
        import gzip

        t0 = time.perf_counter()
        with gzip.open(trace, "rt", encoding="utf-8") if trace.endswith(".gz") else open(trace, encoding="utf-8") as f:
            json.load(f)
        return time.perf_counter() - t0
    if name == "hta_load":
        return _hta_load(trace)
    if name == "scan_columns":
        return _scan_columns(trace)
    if name == "numba":
        return _numba()
    from daydream import build_graph, load_trace
    from daydream.simulation import engine

    graph = build_graph(load_trace(trace), "all", release_events=True)
    if name == "graph_copy":
        from daydream.graph.adjacency import copy_graph

        gc.disable()
        t0 = time.perf_counter()
        copy_graph(graph)
        return time.perf_counter() - t0
    if name == "python_loop":
        engine.COMPILED_MIN_TASKS = 1 << 62
        t0 = time.perf_counter()
        engine.simulate(graph)
        return time.perf_counter() - t0
    if name == "read_arrays":
        gc.disable()  # as the simulation pauses it
        t0 = time.perf_counter()
        engine.read_arrays(graph)
        return time.perf_counter() - t0
    if name == "compiled_loop":
        from daydream.simulation.policies import EARLIEST

        compiled, arrays = engine._compiled(), engine.read_arrays(graph)
        engine._simulate_compiled(compiled, graph, arrays, EARLIEST)  # the code loaded (it copies what it changes)
        gc.disable()
        t0 = time.perf_counter()
        engine._simulate_compiled(compiled, graph, arrays, EARLIEST)
        return time.perf_counter() - t0
    if name == "report":
        from daydream.api.replay import replay_graph

        result = replay_graph(graph)
        t0 = time.perf_counter()
        json.dumps(result.to_dict())
        return time.perf_counter() - t0
    raise SystemExit(f"unknown part {name}")


def _hta_load(trace: str) -> float:
    """HolisticTraceAnalysis's parse of the file as its users start: a TraceAnalysis of a folder holding it."""
    import logging
    import os
    import tempfile

    from hta.trace_analysis import TraceAnalysis

    logging.disable(logging.INFO)
    with tempfile.TemporaryDirectory() as folder:
        os.symlink(os.path.abspath(trace), os.path.join(folder, "rank0" + "".join(Path(trace).suffixes[-2:])))
        t0 = time.perf_counter()
        TraceAnalysis(trace_dir=folder)
        return time.perf_counter() - t0


def _scan_columns(trace: str) -> float:
    """The columnar loader's read of the file, its machine code loaded first (on the example)."""
    from daydream.trace.columns import load_columns

    load_columns(str(next(EXAMPLE.glob("*.json.gz"))))
    t0 = time.perf_counter()
    columns = load_columns(trace)
    seconds = time.perf_counter() - t0
    if not columns.scanned:
        raise SystemExit(f"{trace}: read by the reference decoder, not scanned")
    return seconds


def _numba() -> float:
    """Importing the compiled loop and loading its cached code: the first simulation of the example's graph."""
    example = next(EXAMPLE.glob("*.json.gz"))
    from daydream import build_graph, load_trace
    from daydream.simulation import engine
    from daydream.simulation.policies import EARLIEST

    graph = build_graph(load_trace(example), "all")
    t0 = time.perf_counter()
    compiled = engine._compiled()
    engine._simulate_compiled(compiled, graph, engine.read_arrays(graph), EARLIEST)
    return time.perf_counter() - t0


def _child(argv: list[str]) -> tuple[float, float, str]:
    """Run ``argv``: its wall time from outside, its own peak resident memory (MiB) and its stdout."""
    from bench_simulate import run_child

    seconds, usage, out = run_child(argv)
    return seconds, usage.ru_maxrss / 1024, out.decode()


def measure(trace: str, repeat: int, parts: tuple[str, ...] = PARTS) -> tuple[dict[str, float], dict[str, float]]:
    """The best of ``repeat`` fresh processes per part: seconds, and the peak memory (MiB) of that best run."""
    out, peaks = {}, {}
    for name in parts:
        best, best_peak = float("inf"), 0.0
        for _ in range(repeat):
            if name == "interpreter":
                seconds, peak, _ = _child([sys.executable, "-c", "pass"])
            elif name == "cli":
                seconds, peak, _ = _child(
                    [sys.executable, "-m", "daydream", "simulate", "--step", "all", "--json", trace]
                )
            else:
                _, peak, text = _child([sys.executable, __file__, "--part", name, trace])
                seconds = float(text)
            if seconds < best:
                best, best_peak = seconds, peak
        out[name], peaks[name] = best, best_peak
    return out, peaks


def side_by_side(trace: str, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    """The whole run, json.load and HTA's load of ``trace`` (HTA where it is installed)."""
    import importlib.util

    parts = tuple(p for p in SIDE_BY_SIDE if p != "hta_load" or importlib.util.find_spec("hta") is not None)
    return measure(trace, repeat, parts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", nargs="?")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--side-by-side-only", action="store_true", help="only the whole run, json.load and HTA's load")
    p.add_argument("--part", help=argparse.SUPPRESS)  # the child process: one part
    args = p.parse_args()
    if args.part:
        print(part(args.part, args.trace))
        return
    sys.path.insert(0, str(HERE))
    import tempfile

    from bench_simulate import compile_bytecode, reference_s, tiled

    compile_bytecode()  # the CLI timed as installed
    trace = args.trace or tiled(1_000_000, tempfile.mkdtemp())
    beside, beside_peaks = side_by_side(trace, args.repeat)
    result, peaks = ({}, {}) if args.side_by_side_only else measure(trace, args.repeat)
    result["reference_s"] = reference_s()  # how fast the machine ran this kind of work at the time (bench_simulate.py)
    print(json.dumps({"parts": result, "side_by_side": beside, "peak_mib": {**peaks, **beside_peaks}}, indent=2))
    print("| run on the same file | seconds | peak memory |\n| --- | --- | --- |")
    labels = {
        "cli": "daydream simulate --step all --json",
        "json_load": "Python's json.load",
        "hta_load": "HTA's TraceAnalysis load",
    }
    for name, seconds in beside.items():
        print(f"| {labels[name]} | {seconds:.2f} | {beside_peaks[name]:,.0f} MiB |")
    if "hta_load" not in beside:
        print("(HTA not installed: pip install 'daydream-whatif[bench]')")
    print(f"the whole simulation over json.load alone: {beside['cli'] / beside['json_load']:.2f} (the bound: <= 1.0)")
    if args.side_by_side_only:
        return
    print("| part | seconds | peak memory |\n| --- | --- | --- |")
    for name, seconds in result.items():
        peak = f"{peaks[name]:,.0f} MiB" if name in peaks else ""
        print(f"| {name.replace('_', ' ')} | {seconds:.2f} | {peak} |")
    for design, parts in DESIGN_FLOORS.items():
        seconds, names = design_floor(result, parts)
        print(f"{design}: {seconds:.2f} s ({names})")


if __name__ == "__main__":
    main()
