"""Re-record the example trace shipped inside the package (``daydream/examples/``).

    python examples/record_bundled.py

Profiles 3 steps of examples/mlp.py after 2 warm-up steps with torch.profiler (shapes, module
ranges), on CUDA when present, and writes ``daydream/examples/mlp_<device>.json.gz``.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, str(Path(__file__).parent))
from mlp import train  # noqa: E402

OUT_DIR = Path(__file__).resolve().parent.parent / "daydream" / "examples"


def main() -> None:
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        with profile(
            activities=activities, schedule=schedule(wait=0, warmup=2, active=3), record_shapes=True, with_modules=True,
            on_trace_ready=lambda p: p.export_chrome_trace(raw),
        ) as prof:  # fmt: skip
            train(steps=6, on_step=prof.step)
        doc = json.loads(Path(raw).read_text())
    name = "mlp_" + (torch.cuda.get_device_name(0).replace(" ", "_").lower() if cuda else "cpu") + ".json.gz"
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with gzip.open(OUT_DIR / name, "wt") as fh:
        json.dump(doc, fh, separators=(",", ":"))
    print(f"wrote {OUT_DIR / name} ({len(doc['traceEvents'])} events)")


if __name__ == "__main__":
    main()
