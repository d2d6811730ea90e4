"""A 1,024-rank job simulated jointly: how long and how much memory (figures in docs/speed.md, "Many ranks").

The job is built from real rank traces: ../shared/traces/param/dlrm8's eight ranks repeated 128 times, each copy's
``distributedInfo`` rewritten to its own rank of a world of 1,024 (what a real job of identical ranks records).
``daydream simulate DIR`` then loads every rank's trace in worker processes, finds the ranks whose graphs are the
same (here: 8 distinct ones), simulates those with every collective spanning all 1,024 ranks, and reports every rank.

    python bench/bench_multirank.py [--ranks 1024] [--jobs 2] [--keep DIR] [--no-share] [--ray local]

Prints the wall time of each phase and the peak resident memory of the main process and of the workers. With
``--ray ADDRESS`` the ranks' graphs are built on Ray (``local``: a Ray started here with ``--jobs`` CPUs; its start
counts in the load), as ``daydream simulate DIR --ray`` does.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from daydream.api.job import load_job, replay_job_graph
from daydream.perf.collectives.job import price_collectives

DLRM8 = Path(__file__).resolve().parents[2] / "shared" / "traces" / "param" / "dlrm8"


def make_job(folder: Path, ranks: int) -> None:
    """``ranks`` rank traces in ``folder``: dlrm8's rank (r mod 8) as rank r of a world of ``ranks``."""
    sources = [json.loads(gzip.decompress((DLRM8 / f"rank{k}.json.gz").read_bytes())) for k in range(8)]
    for r in range(ranks):
        doc = sources[r % 8]
        doc["distributedInfo"] = dict(doc.get("distributedInfo") or {}, rank=r, world_size=ranks)
        (folder / f"rank{r}.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))


def peak_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux: kilobytes


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument(
        "--keep", type=Path, default=None, help="write the rank traces here and keep them (default: a temp folder)"
    )
    p.add_argument("--no-share", action="store_true", help="every rank its own tasks (what sharing saves)")
    p.add_argument("--ray", default=None, metavar="ADDRESS", help="build the ranks on Ray (local: started here)")
    args = p.parse_args()
    if not DLRM8.is_dir():
        print(f"{DLRM8} not found (the shared traces)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / f"rank{args.ranks - 1}.json.gz").exists():
            t = time.perf_counter()
            make_job(folder, args.ranks)
            print(f"wrote {args.ranks} rank traces in {time.perf_counter() - t:.1f} s (not timed below)")
        t0 = time.perf_counter()
        graph = load_job(folder, jobs=args.jobs, share=not args.no_share, ray=args.ray)
        t1 = time.perf_counter()
        pricing = price_collectives(graph)
        t2 = time.perf_counter()
        result = replay_job_graph(graph)
        t3 = time.perf_counter()
        d = result.to_dict()
    print(
        f"ranks {len(result.ranks)}, simulated {d['simulated_ranks']} (the others share their tasks), tasks"
        f" {d['tasks']:,}, collectives {pricing.collectives} priced for {graph.graph['world_size']} ranks"
    )
    where = f"Ray {args.ray}, {args.jobs} CPUs" if args.ray else f"{args.jobs} processes"
    print(
        f"load + build ({where}) {t1 - t0:.1f} s, price {t2 - t1:.2f} s, simulate + per-rank results "
        f"{t3 - t2:.2f} s, total {t3 - t0:.1f} s"
    )
    print(
        f"peak memory: main process {peak_mb(resource.RUSAGE_SELF):,.0f} MB, largest worker "
        f"{peak_mb(resource.RUSAGE_CHILDREN):,.0f} MB"
    )
    print(
        f"slowest rank: measured {d['measured_us'] / 1e3:.3f} ms, baseline {d['baseline_us'] / 1e3:.3f} ms; "
        f"straggler: rank {d['straggler']['rank'] if d['straggler'] else '-'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
