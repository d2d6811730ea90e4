"""How close `daydream plan`'s memory estimate (daydream.graph.model_memory) comes to what training programs keep.

    python bench/bench_model_memory.py [--json]

Each program runs unchanged under `daydream record` (on this machine's CPU) inside bench/_measure_memory.py, which
measures every step: the bytes autograd saves for the backward pass (distinct storages, the parameters left out),
the parameters' bytes and the optimizer state's. The estimate reads the recorded trace alone. Reported per program:
measured, estimated and the relative error of each; and the geometric mean of the activations' |error|.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from daydream.graph.build import build_graph  # noqa: E402
from daydream.graph.model_memory import model_memory  # noqa: E402
from daydream.trace import load_trace  # noqa: E402

PROGRAMS = {  # name -> the program and its arguments (small sizes: each runs in seconds on 2 cores)
    "transformer mlm (4 x 256)": [
        "examples/transformer.py",
        "--layers",
        "4",
        "--hidden",
        "256",
        "--heads",
        "4",
        "--batch",
        "16",
    ],
    "transformer cls (2 x 128, seq 128)": ["examples/transformer.py", "--head", "cls", "--seq", "128", "--batch", "8"],
    "transformer mlm, SGD (2 x 384)": [
        "examples/transformer.py",
        "--hidden",
        "384",
        "--heads",
        "6",
        "--optimizer",
        "sgd",
    ],
    "mlp (4 x 512)": ["examples/mlp.py"],
    "resnet (cnn.py)": ["examples/cnn.py"],
}


def measure(argv: list[str], work: Path) -> tuple[dict[str, float], dict[str, float]]:
    """(measured, estimated) bytes of parameters, optimizer state and saved activations for one program."""
    out = work / "measured.json"
    cmd = [
        sys.executable,
        "-m",
        "daydream",
        "record",
        "--warmup",
        "2",
        "--steps",
        "2",
        "--out",
        str(work / "trace"),
        "--",
        "python",
        str(ROOT / "bench" / "_measure_memory.py"),
        str(out),
        str(ROOT / argv[0]),
        *argv[1:],
        "--steps",
        "6",
    ]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, env=env)
    steps = json.loads(out.read_text())
    last = steps[-1]
    model = model_memory(build_graph(load_trace(work / "trace" / "rank0.json.gz")))
    measured = {
        "parameters": last["parameter_bytes"],
        "optimizer": last["optimizer_bytes"],
        "activations": last["saved_bytes"],
    }
    estimated = {
        "parameters": model.parameters * 4,
        "optimizer": model.parameters * model.optimizer_states * 4,
        "activations": model.activations * 4,
    }
    return measured, estimated


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = []
    for name, argv in PROGRAMS.items():
        with tempfile.TemporaryDirectory() as tmp:
            measured, estimated = measure(argv, Path(tmp))
        errors = {k: (estimated[k] - measured[k]) / measured[k] if measured[k] else 0.0 for k in measured}
        rows.append({"program": name, "measured": measured, "estimated": estimated, "error": errors})
    logs = [math.log1p(abs(r["error"]["activations"])) for r in rows]
    gmean = math.expm1(sum(logs) / len(logs))
    if args.json:
        print(json.dumps({"programs": rows, "activations_gmean_abs_error": gmean}, indent=1))
        return
    print(
        f"{'program':36} {'params MB':>10} {'err':>6} {'optim MB':>9} {'err':>6} {'activ. MB':>10} {'est. MB':>8}"
        f" {'err':>7}"
    )
    for r in rows:
        m, e, err = r["measured"], r["estimated"], r["error"]
        print(
            f"{r['program']:36} {m['parameters'] / 1e6:10.2f} {100 * err['parameters']:+5.1f}%"
            f" {m['optimizer'] / 1e6:9.2f} {100 * err['optimizer']:+5.1f}% {m['activations'] / 1e6:10.2f}"
            f" {e['activations'] / 1e6:8.2f} {100 * err['activations']:+6.1f}%"
        )
    print(f"activations: geometric mean |error| {100 * gmean:.1f}% over {len(rows)} programs")


if __name__ == "__main__":
    main()
