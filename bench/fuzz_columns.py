"""Differential fuzzing of the columnar loader: mutated real traces read by `load_trace` through the compiled
scanner and through the batched decoder must give the same trace (families event for event, thread names, counts,
warnings) or the same one-line error; anything else (a mismatch, a traceback) is written out and printed.

    python bench/fuzz_columns.py                           # 2 minutes on the example and the shared traces
    python bench/fuzz_columns.py --seconds 600 --seed 7 TRACE...

Mutations: a byte replaced by a JSON token or a hostile one (an unfinished escape, an invalid UTF-8 byte, a number
beyond a double, a deep bracket run), a range deleted, a token inserted, the text cut short, a piece of it repeated
elsewhere; a third of the files gzipped. Large traces are cut to a window of ~130 kB around a random point.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import msgspec

import daydream.trace.load as loader
from daydream.errors import TraceError

HERE = Path(__file__).resolve().parent
FAMILIES = ("cpu_ops", "annotations", "runtime", "gpu", "gpu_annotations", "syncs")
TOKENS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b'"',
    b"\\",
    b"\\u00",
    b"null",
    b"true",
    b"1e999",
    b"-0",
    b"01",
    b"\xff",
    b"\xc3",
    b'"ts"',
    b'"args"',
    b'"name"',
    b'"Input Dims": [[[[',
    b"  ",
    b"\n",
    b"1.5",
    b"12345678901234567890123",
    b'"ph": "X"',
    b'"cat": "kernel"',
]


def outcome(path: str, columnar: bool) -> tuple[str, Any]:
    """What load_trace makes of ``path`` through the scanner (``columnar``) or the batched decoder."""
    loader.COLUMNAR_MIN_TEXT_BYTES = 0 if columnar else 1 << 62
    try:
        t = loader.load_trace(path)
    except TraceError as exc:
        return "error", str(exc)
    except Exception:  # noqa: BLE001 - what the fuzzer looks for
        return "traceback", traceback.format_exc()
    events = [[msgspec.json.encode(e) for e in getattr(t, f)] for f in FAMILIES]
    return "trace", (events, t.thread_names, t.skipped, t.event_count, t.warnings, t.distributed, t.devices)


def mutate(rng: random.Random, text: bytearray) -> bytearray:
    if len(text) > 200_000:
        at = rng.randrange(len(text) - 150_000)
        text = text[:30_000] + text[at : at + 100_000] + text[-2_000:]
    for _ in range(rng.randint(1, 4)):
        if not text:
            text = bytearray(b"[")
        op, i = rng.random(), rng.randrange(len(text))
        if op < 0.3:
            text[i : i + 1] = rng.choice(TOKENS)
        elif op < 0.5:
            del text[i : i + rng.randint(1, 50)]
        elif op < 0.7:
            text[i:i] = rng.choice(TOKENS)
        elif op < 0.8:
            text = text[:i]
        else:
            j = rng.randrange(len(text))
            text[i:i] = text[j : j + rng.randint(1, 300)]
    return text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="*")
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    traces = args.traces or [str(HERE.parent / "daydream" / "examples" / "mlp_cpu.json.gz")] + sorted(
        str(t) for t in (HERE.parent.parent / "shared" / "traces").rglob("*.json.gz") if "_et" not in str(t)
    )
    sources = [loader.read_trace_bytes(t) for t in traces]
    rng = random.Random(args.seed)
    folder = tempfile.mkdtemp(prefix="fuzz_columns_")
    cases = found = 0
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        text = bytes(mutate(rng, bytearray(rng.choice(sources))))
        path = os.path.join(folder, "case.json.gz" if rng.random() < 0.3 else "case.json")
        with open(path, "wb") as f:
            f.write(gzip.compress(text) if path.endswith(".gz") else text)
        scanned, decoded = outcome(path, True), outcome(path, False)
        cases += 1
        if scanned != decoded or "traceback" in (scanned[0], decoded[0]):
            found += 1
            kept = os.path.join(folder, f"mismatch{found}.json")
            with open(kept, "wb") as f:
                f.write(text)
            said = [str(o[1])[:300] if o[0] != "trace" else "a trace" for o in (scanned, decoded)]
            print(f"{kept}: scanned: {scanned[0]} ({said[0]}); decoded: {decoded[0]} ({said[1]})", flush=True)
    print(f"{cases:,} cases from {len(traces)} traces in {args.seconds:.0f} s (seed {args.seed}): {found} mismatches")
    raise SystemExit(1 if found else 0)


if __name__ == "__main__":
    main()
