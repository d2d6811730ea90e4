"""Re-record the example trace shipped inside the package (``daydream/examples/``) with ``daydream record``.

    python examples/record_bundled.py [--device cpu|cuda]

Records 3 steps of examples/mlp.py after 2 warm-up steps, with a DataLoader whose samples cost CPU time (so the
data-loading what-if has work to act on), and writes ``daydream/examples/mlp_<device>.json.gz`` with its sidecar
``mlp_<device>.daydream.json``: ``mlp_cpu`` on the CPU, ``mlp_<gpu name>`` (e.g. ``mlp_nvidia_h100_80gb_hbm3``) on CUDA.
``daydream demo`` prefers a GPU recording when the package holds one.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

from daydream.record.command import record_program

HERE = Path(__file__).resolve().parent
OUT_DIR = HERE.parent / "daydream" / "examples"
MLP_ARGS = ["--width", "512", "--depth", "4", "--batch", "64", "--workers", "0", "--transform-us", "40"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = record_program(
            [sys.executable, str(HERE / "mlp.py"), "--device", ns.device, "--steps", "8", *MLP_ARGS],
            tmp,
            warmup=2,
            steps=3,
        )
        meta = json.loads((Path(tmp) / "rank0.daydream.json").read_text())
        device = meta["device"]["name"] if meta["device"]["type"] == "cuda" else "cpu"
        stem = "mlp_" + re.sub(r"[^0-9a-z]+", "_", device.lower()).strip("_")
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(tmp) / "rank0.json.gz", OUT_DIR / f"{stem}.json.gz")
        shutil.copyfile(Path(tmp) / "rank0.daydream.json", OUT_DIR / f"{stem}.daydream.json")
    print(f"{report.message}: wrote {OUT_DIR / stem}.json.gz and its sidecar")


if __name__ == "__main__":
    main()
