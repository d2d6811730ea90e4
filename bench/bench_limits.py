"""The figures behind two runtime bounds of docs/limits.md (issue 80):

    python bench/bench_limits.py memory [--events 500000 2000000] [TRACE ...]
    python bench/bench_limits.py shard [--tables 64 256 1024 4096] [--ranks 8]

``memory``: the peak memory of ``daydream simulate --step all`` on traces of tiny events (every one kept: a CPU op
on one thread, about 73 bytes of JSON each, gzip) and on the given real traces, in bytes per event: what
``daydream.trace.reading.BYTES_PER_EVENT`` must cover, so that a trace's load, which estimates its memory as BASE_BYTES
+
events x BYTES_PER_EVENT + its text, refuses what the machine cannot hold (``DAYDREAM_MEMORY_LIMIT`` lifts the limit
here).

``shard``: the time of ``daydream shard`` on N synthetic tables (rows 1k-10M, dims 32-128, pooling 1-100, seeded):
the local search keys each neighbour in constant time and stops after ``DEFAULT_MAX_NEIGHBOURS``, so the time is
bounded however many tables (at most 4,096).
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces"
REAL = [SHARED / "param" / "resnet_kineto.json.gz", SHARED / "hta" / "nccl_parser_config_nccl_data.json.gz"]


def tiny_trace(path: Path, events: int) -> Path:
    event = '{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":%d,"dur":1},'
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(b'{"traceEvents":[')
        for start in range(0, events, 100_000):
            fh.write("".join(event % (2 * i) for i in range(start, min(events, start + 100_000))).encode())
        fh.write(b'{"ph":"X","cat":"cpu_op","name":"end","pid":1,"tid":1,"ts":0,"dur":1}]}')
    return path


def peak(args: list[str]) -> tuple[float, float]:
    """The peak memory (bytes) and wall time of ``python -m daydream ARGS`` in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DAYDREAM_MEMORY_LIMIT": "none"}
    t0 = time.perf_counter()
    code = (
        "import resource, subprocess, sys; "
        "subprocess.run([sys.executable, '-m', 'daydream', *sys.argv[1:]], stdout=subprocess.DEVNULL, check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip()), time.perf_counter() - t0


def events_of(trace: Path) -> int:
    sys.path.insert(0, str(ROOT))
    from daydream.trace import load_trace

    return int(load_trace(trace).event_count)


def memory(counts: list[int], traces: list[str]) -> None:
    from daydream.trace.reading import BASE_BYTES, BYTES_PER_EVENT

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in counts:
            rows.append((f"{n:,} tiny events", tiny_trace(Path(folder) / f"tiny{n}.json.gz", n), n))
        for t in [Path(x) for x in traces] or [r for r in REAL if r.is_file()]:
            rows.append((t.name, t, events_of(t)))
        print(
            "| trace | events | text | peak | bytes per event | estimate (BASE_BYTES + events x BYTES_PER_EVENT +"
            " text) |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        for name, path, n in rows:
            with gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb") as fh:
                text = sum(len(chunk) for chunk in iter(lambda fh=fh: fh.read(1 << 24), b""))
            used, _ = peak(["simulate", "--step", "all", str(path)])
            estimate = BASE_BYTES + n * BYTES_PER_EVENT + text
            print(
                f"| {name} | {n:,} | {text / 2**20:,.0f} MiB | {used / 2**30:.2f} GiB | {used / n:,.0f} | "
                f"{estimate / 2**30:.2f} GiB |",
                flush=True,
            )


def shard(counts: list[int], ranks: int) -> None:
    print(
        f"| tables | seconds (daydream shard --ranks {ranks} --batch 8192) | best plan's label |\n| --- | --- | --- |"
    )
    with tempfile.TemporaryDirectory() as folder:
        for n in counts:
            rng = random.Random(n)
            path = Path(folder) / f"tables{n}.toml"
            path.write_text(
                "".join(
                    f'[[table]]\nname = "t{i}"\nrows = {rng.randint(1000, 10_000_000)}\ndim ='
                    f" {rng.choice([32, 64, 128])}\npooling = {rng.uniform(1, 100):.2f}\n\n"
                    for i in range(n)
                )
            )
            t0 = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-m", "daydream", "shard", "--ranks", str(ranks), "--batch", "8192", str(path)],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                check=True,
            )
            took = time.perf_counter() - t0
            lines = out.stdout.splitlines()
            label = next((lines[i + 2] for i, x in enumerate(lines) if x.startswith("best plan")), "?").split("  ")[0]
            print(f"| {n:,} | {took:.1f} | {label} |", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["memory", "shard"])
    p.add_argument("traces", nargs="*", help="memory: real traces to measure too (default: two shared ones)")
    p.add_argument("--events", type=int, nargs="+", default=[500_000, 2_000_000])
    p.add_argument("--tables", type=int, nargs="+", default=[64, 256, 1024, 4096])
    p.add_argument("--ranks", type=int, default=8)
    args = p.parse_args()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if args.what == "memory":
        memory(args.events, args.traces)
    else:
        shard(args.tables, args.ranks)


if __name__ == "__main__":
    main()
