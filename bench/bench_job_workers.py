"""Jobs of any size: a job whose ranks all differ, simulated by workers that each hold some of its ranks (figures in
docs/speed.md, "Jobs of any size").

The job is made from a real rank trace repeated, every rank different: each copy's GPU kernels (and copies) run
0-5% faster than traced, by a factor drawn per event from the rank's own seed, so no two ranks share a graph (no
twins to share one simulation), and each copy's ``distributedInfo`` and process-group records name its own rank of
the new world. Sources: ``dlrm8`` (../shared/traces/param/dlrm8's eight ranks, about 1,000 tasks each: the rank
r mod 8) or a path to one trace (e.g. a 1M-event tiling of ../shared/traces/hta's NCCL trace, bench/tile_trace.py).

    python bench/bench_job_workers.py make DIR --ranks 4096 [--source dlrm8|TRACE]
    python bench/bench_job_workers.py run DIR [--workers N | --joint] [--ray local] [--step all] [--script straggler]

``run`` simulates the folder as ``daydream simulate DIR`` does, and prints its wall time, the largest process's peak
resident memory (this one's, each worker's: Ray actors' too, each measured by itself) and the job's numbers. Without
options it runs as the CLI's default does (``--jobs`` left out): workers past the joint simulation's size, one per
core. ``--joint``: the single-process path (every rank's graph in one process), for comparison. ``--script``: run a
.whatif script on the job as ``daydream run DIR SCRIPT`` does (by workers: each rank's script where it lives) and
measure that.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

DLRM8 = Path(__file__).resolve().parents[2] / "shared" / "traces" / "param" / "dlrm8"
VARIED = ("kernel", "gpu_memcpy", "gpu_memset")


def _vary(doc: dict[str, Any], rank: int, world: int, durations: list[tuple[dict[str, Any], float]]) -> bytes:
    """``doc`` as rank ``rank`` of ``world``: its GPU events' durations (``durations``: each event with its traced
    one) each scaled by a factor in [0.95, 1] from the rank's seed, its rank and its process groups renamed."""
    rng = random.Random(rank)
    for e, dur in durations:
        e["dur"] = round(dur * (1.0 - 0.05 * rng.random()), 3)
        args = e.get("args")
        if isinstance(args, dict) and "Process Group Ranks" in args and args["Process Group Ranks"] not in ("[]", None):
            args["Process Group Ranks"] = str(list(range(world)))
            args["Group size"] = world
    info = dict(doc.get("distributedInfo") or {}, rank=rank, world_size=world)
    for pg in info.get("pg_config") or []:
        pg["ranks"], pg["pg_size"] = list(range(world)), world
    doc["distributedInfo"] = info
    return gzip.compress(json.dumps(doc).encode(), compresslevel=1)


def _make_some(args: tuple[str, list[int], int, str]) -> None:
    source, ranks, world, folder = args
    docs = _sources(source)
    # each source's varied events with their traced durations, read once
    varied = [
        [(e, e["dur"]) for e in doc["traceEvents"] if e.get("cat") in VARIED and isinstance(e.get("dur"), (int, float))]
        for doc in docs
    ]
    for r in ranks:
        data = _vary(docs[r % len(docs)], r, world, varied[r % len(docs)])
        (Path(folder) / f"rank{r}.json.gz").write_bytes(data)


def _sources(source: str) -> list[dict[str, Any]]:
    if source == "dlrm8":
        return [json.loads(gzip.decompress((DLRM8 / f"rank{k}.json.gz").read_bytes())) for k in range(8)]
    raw = Path(source).read_bytes()
    return [json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)]


def make(folder: Path, ranks: int, source: str, processes: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    todo = [r for r in range(ranks) if not (folder / f"rank{r}.json.gz").exists()]
    blocks = [todo[k::processes] for k in range(processes)]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        pool.map(_make_some, [(source, b, ranks, str(folder)) for b in blocks if b])


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def run(folder: Path, workers: int | None, joint: bool, ray: str | None, step: str | None, script: str | None) -> None:
    from daydream.api.job import replay_job

    if script is not None:
        return run_script(folder, workers, joint, ray, step, script)
    t0 = time.perf_counter()
    # workers where the CLI would use them (past BY_WORKERS_BYTES of traces), unless asked for the joint path
    job = replay_job(folder, step=step, jobs=workers, ray=ray, by_workers=False if joint else None)
    wall = time.perf_counter() - t0
    d = job.report
    used = job.workers
    how = (
        "joint (one process simulates every rank)"
        if used is None
        else (f"{used.count} worker{'s' if used.count > 1 else ''} ({used.kind}), {used.rounds:,} rounds")
    )
    print(f"{folder}: {len(d.ranks):,} ranks ({d.simulated_ranks:,} simulated), {d.tasks:,} tasks; {how}")
    print(
        f"wall {wall:.1f} s; peak memory: this process {peak_mb():,.0f} MB"
        + (f", workers {', '.join(f'{b / 2**20:,.0f}' for b in used.peak_bytes)} MB" if used is not None else "")
    )
    print(
        f"slowest rank {d.slowest_rank}: measured {d.measured_us / 1e3:.3f} ms, baseline {d.baseline_us / 1e3:.3f} ms; "
        f"straggler: rank {d.straggler.rank if d.straggler else '-'}"
    )
    print(f"per rank {wall / len(d.ranks) * 1e3:.2f} ms, per task {wall / max(d.tasks, 1) * 1e6:.2f} us")


def run_script(folder: Path, workers: int | None, joint: bool, ray: str | None, step: str | None, script: str) -> None:
    """``daydream run FOLDER SCRIPT`` measured: by workers (each rank's script where it lives), or jointly."""
    from daydream.api.whatif import whatif
    from daydream.api.workload import Workload

    t0 = time.perf_counter()
    result = whatif(
        Workload(str(folder), step=step, jobs=workers, ray=ray, by_workers=False if joint else None), [script]
    )
    wall = time.perf_counter() - t0
    d, used = result.report, result.workers
    how = (
        "joint (one process holds every rank)"
        if used is None
        else (f"{used.count} worker{'s' if used.count > 1 else ''} ({used.kind}), {used.rounds:,} rounds")
    )
    tasks = d.tasks.baseline
    print(f"{folder} + {script}: {len(d.ranks or ()):,} ranks, {tasks:,} tasks; {how}")
    print(
        f"wall {wall:.1f} s; peak memory: this process {peak_mb():,.0f} MB"
        + (f", workers {', '.join(f'{b / 2**20:,.0f}' for b in used.peak_bytes)} MB" if used is not None else "")
    )
    print(
        f"step: baseline {d.baseline_us / 1e3:.3f} ms (rank {d.slowest_rank.baseline if d.slowest_rank else '-'}),"
        f" predicted {d.predicted_us / 1e3:.3f} ms (rank {d.slowest_rank.predicted if d.slowest_rank else '-'});"
        f" straggler {d.straggler.baseline.rank if d.straggler and d.straggler.baseline else '-'} ->"
        f" {d.straggler.predicted.rank if d.straggler and d.straggler.predicted else '-'}"
    )
    print(f"printed: {d.printed[:2]}")
    print(f"per rank {wall / max(len(d.ranks or ()), 1) * 1e3:.2f} ms, per task {wall / max(tasks, 1) * 1e6:.2f} us")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make", help="write the job's rank traces")
    m.add_argument("folder", type=Path)
    m.add_argument("--ranks", type=int, default=4096)
    m.add_argument("--source", default="dlrm8", help="dlrm8, or a trace file to repeat")
    m.add_argument("--processes", type=int, default=2)
    r = sub.add_parser("run", help="simulate the job and measure")
    r.add_argument("folder", type=Path)
    r.add_argument("--workers", type=int, default=None, help="workers (default: the CLI's)")
    r.add_argument("--joint", action="store_true", help="the single-process path, for comparison")
    r.add_argument("--ray", default=None, metavar="ADDRESS", help="workers as Ray actors (local: a Ray started here)")
    r.add_argument("--step", default=None)
    r.add_argument("--script", default=None, help="run this .whatif script on the job (daydream run), not simulate")
    args = p.parse_args()
    if args.command == "make":
        if args.source == "dlrm8" and not DLRM8.is_dir():
            print(f"{DLRM8} not found (the shared traces)", file=sys.stderr)
            return 2
        t = time.perf_counter()
        make(args.folder, args.ranks, args.source, args.processes)
        print(f"wrote {args.ranks} rank traces to {args.folder} in {time.perf_counter() - t:.1f} s")
        return 0
    run(args.folder, args.workers, args.joint, args.ray, args.step, args.script)
    return 0


if __name__ == "__main__":
    sys.exit(main())
