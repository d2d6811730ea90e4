"""Every public result of the Python API, as a notebook shows it: its repr, and the repr of what it holds (its fields,
the first item of its lists), each under LIMIT characters, whatever the trace's size (issue 75: a timeline's repr was
120,340 characters on the 260-task bundled trace).

    python bench/bench_reprs.py                      # the bundled trace tiled to 1M events, every step in the graph
    python bench/bench_reprs.py --events 100000 --keep /tmp/tiles

tests/test_results_api.py runs :func:`results` and :func:`too_long` on the bundled trace and on a 20k-event tiling of
it; this script checks the 1M-event graph (119k tasks, every step; 3-7 minutes here), too slow for the suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

LIMIT = 2000
ROOT = Path(__file__).resolve().parent.parent


def tiled(events: int, folder: Path) -> Path:
    """The bundled trace tiled to ``events`` events (bench/tile_trace.py), made once in ``folder``."""
    sys.path.insert(0, str(ROOT / "bench"))
    from tile_trace import tile

    out = folder / f"mlp_cpu_{events}.json.gz"
    if not out.is_file():
        with gzip.open(ROOT / "daydream" / "examples" / "mlp_cpu.json.gz", "rt") as fh:
            doc = tile(json.load(fh), events)
        with gzip.open(out, "wt", compresslevel=1) as fh:
            json.dump(doc, fh, separators=(",", ":"))
    return out


def results(trace: Path, folder: Path, step: str | None = "all") -> dict[str, Any]:
    """Each public result type, made on ``trace`` (``step`` "all": every step in the graph, the whole trace's size),
    by the names a notebook gives them. ``folder``: where the report and the index file go."""
    import numpy as np

    from daydream import build_graph, critical_path, load_trace, simulate
    from daydream.api.compare import compare
    from daydream.api.demo import run_demo
    from daydream.api.embeddings import profile
    from daydream.api.plan import PlanOptions, plan
    from daydream.api.replay import replay
    from daydream.api.whatif import whatif
    from daydream.api.workload import RunOptions, Workload
    from daydream.perf.accuracy_report import model_accuracy
    from daydream.presentation.page import write_report

    out: dict[str, Any] = {}
    out["load_trace"] = load_trace(trace)
    out["build_graph"] = graph = build_graph(out["load_trace"], step)
    out["simulate"] = timeline = simulate(graph)
    out["critical_path"] = critical_path(timeline)
    work = Workload(str(trace), step=step)
    out["Workload"], out["RunOptions"] = work, RunOptions()
    out["replay"] = replay(trace, step=step)
    out["whatif"] = whatif(work, ["batch_size"])
    out["compare"] = compare(work, ROOT / "examples" / "scenarios.toml")
    out["run_demo"] = run_demo(str(trace))
    out["plan"] = plan(Workload(str(trace)), PlanOptions(gpus=2))
    out["write_report"] = write_report(work, ["batch_size"], None, str(folder / "report"))
    rows = np.random.default_rng(0).zipf(1.2, (2_000, 2)) % 500
    np.save(folder / "indices.npy", rows.astype(np.int32))
    out["profile"] = profile([folder / "indices.npy"], 1e5, 16)
    out["model_accuracy"] = model_accuracy([])
    return out


def _children(value: Any) -> list[tuple[str, Any]]:
    """What a result holds, by name: a struct's or dataclass's fields, the first item of a list or a dict."""
    if isinstance(value, msgspec.Struct):
        return [(f.name, getattr(value, f.name)) for f in msgspec.structs.fields(value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # (a field the type keeps out of its own repr, repr=False, is its bookkeeping: a trace's pending columns)
        return [
            (f.name, getattr(value, f.name)) for f in dataclasses.fields(value) if f.repr and not f.name.startswith("_")
        ]
    if isinstance(value, (list, tuple)) and value:
        return [("[0]", value[0])]
    if isinstance(value, dict) and value:
        key = next(iter(value))
        return [(f"[{key!r}]", value[key])]
    return []


def _ours(value: Any) -> bool:
    """A daydream type (a list of them counts by its first item: the container is Python's)."""
    return type(value).__module__.startswith("daydream")


def too_long(named: dict[str, Any], limit: int = LIMIT, depth: int = 3) -> list[tuple[str, int]]:
    """(where, length) of each daydream object among ``named`` and what they hold (``depth`` levels down) whose repr
    is ``limit`` characters or more."""
    out, seen = [], set()
    stack = [(name, value, 0) for name, value in named.items()]
    while stack:
        where, value, level = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if _ours(value) and len(text := repr(value)) >= limit:
            out.append((where, len(text)))
        if level < depth:
            stack.extend(
                (f"{where}.{k}" if not k.startswith("[") else where + k, v, level + 1) for k, v in _children(value)
            )
    return sorted(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000, help="tile the bundled trace to this many events")
    p.add_argument("--keep", default=None, metavar="DIR", help="keep the tiled trace here (made once)")
    args = p.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp())
    os.makedirs(folder, exist_ok=True)
    trace = tiled(args.events, folder)
    t0 = time.perf_counter()
    named = results(trace, folder)
    longest = max(((k, len(repr(v))) for k, v in named.items()), key=lambda kv: kv[1])
    bad = too_long(named)
    print(
        f"{trace}: {named['build_graph'].number_of_nodes():,} tasks; {len(named)} results made in "
        f"{time.perf_counter() - t0:.1f} s; the longest top-level repr {longest[0]} {longest[1]:,} characters"
    )
    for where, n in bad:
        print(f"  {where}: {n:,} characters (limit {LIMIT:,})")
    print("ok: every repr under the limit" if not bad else f"{len(bad)} reprs over the limit")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
