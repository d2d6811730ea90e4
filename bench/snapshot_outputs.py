"""Every command's text and JSON on the bundled trace, the HTA trace, the MI300X ResNet and dlrm8, saved to a folder,
so a change that must not change behaviour (a refactor, the formatter) can be checked byte for byte::

    python bench/snapshot_outputs.py save /tmp/before          # on the commit before the change
    python bench/snapshot_outputs.py save /tmp/after           # on the change
    python bench/snapshot_outputs.py diff /tmp/before /tmp/after

Each command's stdout, stderr and exit code go to one file per command. Traces come from ../shared/traces (those
absent are skipped, and said). Paths of this checkout and of the output folder are written as placeholders, so two
checkouts compare; but for binary files that frame the path by its length (a Chakra ``.et``'s protobuf): those compare
between checkouts whose paths are the same length.
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces"

TRACES = {
    "bundled": ROOT / "daydream" / "examples" / "mlp_cpu.json.gz",
    "hta": SHARED / "hta" / "nccl_parser_config_nccl_data.json.gz",
    "mi300x": SHARED / "tracelens" / "mi300_train_resnet18.json.gz",
    "dlrm8": SHARED / "param" / "dlrm8",
}

SCRIPTS = ["amp", "fused_optimizer", "kernel_fusion", "batch_size", "activation_checkpointing", "ddp"]
# when a result was made (provenance): the one thing two runs of one command may differ in
DATE = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?")
JOB_SCRIPTS = ["straggler", "network"]


def commands(out: str) -> list[tuple[str, list[str]]]:
    """(name, arguments) of every command snapshotted; ``out``: a scratch folder for the outputs commands write."""
    cmds: list[tuple[str, list[str]]] = [("help", ["--help"])]
    for sub in [
        "simulate",
        "run",
        "compare",
        "plan",
        "report",
        "export",
        "check",
        "list",
        "repl",
        "models",
        "shard",
        "embeddings",
        "validate",
        "calibrate",
        "record",
        "demo",
    ]:
        cmds.append((f"help-{sub}", [sub, "--help"]))
    cmds += [
        ("list", ["list"]),
        ("check-library", ["check", *[str(p) for p in sorted((ROOT / "transforms").glob("*.whatif"))]]),
        ("models-devices", ["models", "devices"]),
        ("models-devices-json", ["models", "devices", "--json"]),
    ]
    for name, trace in TRACES.items():
        if not trace.exists():
            continue
        t = str(trace)
        cmds += [(f"{name}-simulate", ["simulate", t]), (f"{name}-simulate-json", ["simulate", t, "--json"])]
        if name == "dlrm8":
            cmds += [(f"{name}-run-{s}", ["run", t, s]) for s in JOB_SCRIPTS]
            cmds += [(f"{name}-run-{s}-json", ["run", t, s, "--json"]) for s in JOB_SCRIPTS]
            continue
        cmds += [(f"{name}-run-{s}", ["run", t, s]) for s in SCRIPTS]
        cmds += [(f"{name}-run-{s}-json", ["run", t, s, "--json"]) for s in SCRIPTS]
        cmds += [
            (f"{name}-run-chain", ["run", t, "fused_optimizer", "batch_size"]),
            (f"{name}-compare", ["compare", t, str(ROOT / "examples" / "scenarios.toml")]),
            (f"{name}-compare-json", ["compare", t, str(ROOT / "examples" / "scenarios.toml"), "--json"]),
            (f"{name}-report-json", ["report", t, "fused_optimizer", "--out", f"{out}/{name}-report", "--json"]),
            (f"{name}-export", ["export", t, "fused_optimizer", "--chakra", f"{out}/{name}-chakra", "--json"]),
        ]
        if name != "bundled":
            cmds += [
                (f"{name}-plan", ["plan", t, "--gpus", "8"]),
                (f"{name}-plan-json", ["plan", t, "--gpus", "8", "--json"]),
            ]
    return cmds


def _digest_tree(folder: Path, scratch: str) -> str:
    """Each file under ``folder`` with its SHA-256, one a line: of its content (decompressed where gzip), the scratch
    folder's path and the checkout's written as placeholders (pages and JSON name the folder they are in and the
    trace read: two checkouts compare)."""
    lines = []
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            data = DATE.sub(b"<DATE>", data.replace(scratch.encode(), b"<OUT>").replace(str(ROOT).encode(), b"<ROOT>"))
            lines.append(f"{p.relative_to(folder)} {len(data)} {hashlib.sha256(data).hexdigest()}")
    return "\n".join(lines)


def save(dest: Path, only: str | None) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, COLUMNS="120", NO_COLOR="1", PYTHONHASHSEED="0", DAYDREAM_NO_PROGRESS="1")
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as rc:
        # matplotlib names an SVG's clip paths at random unless salted
        Path(rc, "matplotlibrc").write_text("svg.hashsalt: daydream-snapshot\n")
        env["MATPLOTLIBRC"] = rc
        for name, args in commands(scratch):
            if only and only not in name:
                continue
            run = subprocess.run(
                [sys.executable, "-m", "daydream", *args],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
            text = (
                f"$ daydream {' '.join(args)}\nexit {run.returncode}\n--- stdout\n{run.stdout}\n---"
                f" stderr\n{run.stderr}"
            )
            for folder in sorted(Path(scratch).iterdir()):
                if (
                    folder.name.startswith(name.split("-")[0])
                    and folder.is_dir()
                    and name.endswith(("report-json", "export"))
                ):
                    text += f"\n--- files of {folder.name}\n{_digest_tree(folder, scratch)}"
                    shutil.rmtree(folder)
            text = DATE.sub(b"<DATE>", text.encode()).decode().replace(scratch, "<OUT>").replace(str(ROOT), "<ROOT>")
            (dest / f"{name}.txt").write_text(text)
            print(f"{name}: exit {run.returncode}", flush=True)
    print(f"absent: {', '.join(n for n, t in TRACES.items() if not t.exists()) or 'none'}")


def diff(a: Path, b: Path) -> int:
    names = sorted({p.name for p in a.glob("*.txt")} | {p.name for p in b.glob("*.txt")})
    differ = 0
    for n in names:
        x, y = a / n, b / n
        if not x.exists() or not y.exists():
            print(f"{n}: only in {'the first' if x.exists() else 'the second'}")
            differ += 1
            continue
        if x.read_bytes() != y.read_bytes():
            differ += 1
            print(f"{n}: differs")
            sys.stdout.writelines(
                list(
                    difflib.unified_diff(
                        x.read_text().splitlines(True), y.read_text().splitlines(True), str(x), str(y), n=1
                    )
                )[:40]
            )
            print()
    print(f"{len(names) - differ} of {len(names)} outputs byte-identical")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("save")
    s.add_argument("dest", type=Path)
    s.add_argument("--only", help="only the commands whose name holds this")
    d = sub.add_parser("diff")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    args = ap.parse_args()
    if args.what == "save":
        save(args.dest, args.only)
        return 0
    return diff(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
