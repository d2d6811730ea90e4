"""`daydream embeddings profile` on a multi-GB index file: time and peak memory, sampled (FAE's 5%) and exact.

    python bench/bench_embeddings.py [--inputs 30000000] [--tables 26] [--rows 1000000] [--dir DIR] [--keep] [--json]

Writes a DLRM-preprocessed-style (inputs, tables) int32 .npy (30M x 26: 3.1 GB by default) of Zipf-distributed
lookups (skews from 0.8 to 1.2 across the tables, popular rows scattered), in blocks so that writing it needs little
memory, then runs the command in a fresh process for each mode and reads that process's peak resident set size
(VmHWM, which the child reports itself). Memory should grow with the tables' rows (one 8-byte count per row: 26 x 1M
rows is
208 MB) and not with the file. The file is deleted afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BLOCK = 1_000_000  # inputs written per block


def write_indices(path: Path, inputs: int, tables: int, rows: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    skews = np.linspace(0.8, 1.2, tables)
    cdfs, perms = [], []
    for a in skews:
        cdf = np.cumsum((np.arange(rows) + 1.0) ** -a)
        cdfs.append(cdf / cdf[-1])
        perms.append(rng.permutation(rows).astype(np.int32))
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.int32, shape=(inputs, tables))
    for start in range(0, inputs, BLOCK):
        stop = min(start + BLOCK, inputs)
        for j in range(tables):
            out[start:stop, j] = perms[j][np.searchsorted(cdfs[j], rng.random(stop - start))]
        out.flush()
    del out


# The child's own peak: VmHWM, the high-water mark of the memory it maps itself. Not ru_maxrss: Linux carries that
# across fork and exec, so a child of this process (which has just written a multi-GB file) would report our peak.
CHILD = """import resource, sys
from daydream.commands.cli import main
code = main(sys.argv[1:])
try:
    peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("maxrss_kb", peak, file=sys.stderr)
raise SystemExit(code)
"""


def run(path: Path, args: list[str]) -> dict[str, float]:
    """One run of the command in a fresh process that reports its own peak resident set size."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, "embeddings", "profile", str(path), *args, "--json"],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    peak_kb = int(out.stderr.split("maxrss_kb")[-1].split()[0])  # kB on Linux
    result = json.loads(out.stdout)
    return {
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "hot_bytes": result["hot_bytes"],
        "hot_input_fraction": round(result["hot_input_fraction"], 4),
        "inputs_read": result["inputs_read"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--inputs", type=int, default=30_000_000)
    p.add_argument("--tables", type=int, default=26)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--budget", default="64MB")
    p.add_argument("--dir", default=None, help="where the index file goes (default: a temporary folder)")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    folder = Path(args.dir or tempfile.mkdtemp(prefix="daydream-bench-"))
    path = folder / "day_0_sparse.npy"
    t0 = time.perf_counter()
    if not path.exists():
        write_indices(path, args.inputs, args.tables, args.rows)
    made = time.perf_counter() - t0
    common = ["--budget", args.budget, "--dim", "16", "--batch", "2048", "--rows", str(args.rows)]
    results = {
        "file_gb": round(path.stat().st_size / 1e9, 2),
        "write_s": round(made, 1),
        "sampled": run(path, common),
        "exact": run(path, [*common, "--exact"]),
    }
    if not args.keep:
        path.unlink()
    if args.json:
        print(json.dumps(results))
        return
    print(
        f"{args.inputs:,} inputs x {args.tables} tables of {args.rows:,} rows: {results['file_gb']} GB (written in"
        f" {made:.0f} s)"
    )
    for mode in ("sampled", "exact"):
        r = results[mode]
        print(
            f"  {mode:8s} {r['wall_s']:7.1f} s  peak RSS {r['peak_rss_mb']:7.0f} MB  inputs read {r['inputs_read']:,}  "
            f"hot {r['hot_bytes'] / 1e6:.1f} MB, {100 * r['hot_input_fraction']:.1f}% of inputs hot"
        )


if __name__ == "__main__":
    main()
