"""Re-compress the validation corpus's gzip traces as xz, so that the repository stays small enough to travel.

    python validation/compact_traces.py [FOLDER ...] [--processes N]

Every ``*.json.gz`` under the folders (default: validation/traces) becomes ``*.json.xz`` holding the same text, and
the gzip file is removed once the xz file is written and read back equal. xz holds a Kineto trace in about half the
bytes of gzip (a ResNet-50 step's 10.4 MB of JSON: 668 kB as gzip, 341 kB as xz), and daydream reads both; a lent
GPU machine takes at most 64 MiB of working tree a call, which the corpus's gzip traces alone came to (84 MB in
all, December 2026). The settings are LZMA2's preset 6 with the longest match length (273): as small as xz's
extreme preset within 0.1%, in under half its time (8 s for that trace on one core), and an 8 MiB dictionary, so
that reading a trace takes about 9 MiB for the decoder. Traces newly recorded (validation/record.py, a lent GPU's
script) are gzip, as ``daydream record`` writes them; run this before committing them, then name the ``.json.xz``
files in validation/cases.toml.
"""

from __future__ import annotations

import argparse
import gzip
import lzma
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 6, "nice_len": 273}]


def compact(path: Path) -> tuple[str, int, int]:
    """``x.json.gz`` -> ``x.json.xz`` (written to a temporary name, checked, renamed), then the gzip file removed."""
    text = gzip.decompress(path.read_bytes())
    packed = lzma.compress(text, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, filters=FILTERS)
    if lzma.decompress(packed) != text:
        raise RuntimeError(f"{path}: the xz text differs from the gzip text")
    target = path.with_name(path.name[: -len(".gz")] + ".xz")
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(packed)
    os.replace(tmp, target)
    size = path.stat().st_size
    path.unlink()
    return str(target), size, len(packed)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="*", type=Path, default=[HERE / "traces"])
    p.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    args = p.parse_args(argv)
    files = sorted(f for folder in args.folders for f in folder.rglob("*.json.gz"))
    before = after = 0
    with ProcessPoolExecutor(max(1, args.processes)) as pool:
        for name, old, new in pool.map(compact, files):
            before, after = before + old, after + new
            print(f"{name}: {old:,} -> {new:,} bytes", flush=True)
    print(f"{len(files)} traces: {before:,} -> {after:,} bytes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
