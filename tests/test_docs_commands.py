"""Every `daydream` command in a ```bash block of docs/, and every `$ daydream` line of a ```console block, runs as
written (the docs' terminal sessions, ```text blocks, are checked line for line by tests/test_docs_examples.py; the
README's commands by tests/test_readme.py). A block's commands run in order in one folder, as a reader would type
them; a path into ../shared is the checkout's neighbour, as from the repository's root. `TRACE` is a GPU trace of the
validation corpus (the H100
transformer; the hybrid DLRM for `fae`), `DIR` and `JOB` the shared dlrm8 job; the index files the embeddings docs
name are made here (Zipf rows). Synopsis lines (`[OPTIONS]`, `SCRIPT...`) and the commands listed in ELSEWHERE are
not run: each says where it is tested."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT.parent / "shared" / "traces" / "param" / "dlrm8"
H100 = ROOT / "validation" / "traces" / "h100"
TRACES = {
    "fae": H100 / "dlrm" / "hybrid" / "run1" / "rank0.json.xz",
    "": H100 / "transformer" / "base" / "run1" / "rank0.json.xz",
}
# run by other tests (minutes each here, or writing a shipped file): where
ELSEWHERE = {
    "daydream validate": "tests/test_validate.py (the corpus ledger, its worker processes, --errors-out)",
    "daydream models kernels --refit DATA": "tests/test_device_model.py (refit reproduces the shipped figures)",
}
SYNOPSIS = re.compile(r"\[|\.\.\.|\b(SCRIPT|HOT_BYTES|HOT_BATCH_FRACTION|BATCHES_PER_EPOCH|COMMAND|BIG_JOB_DIR)\b")


def _blocks() -> list[tuple[str, int, list[str]]]:
    """(doc, block number, its `daydream` commands, continuations joined and comments dropped)."""
    out = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for k, (kind, block) in enumerate(
            re.findall(r"```(bash|console)\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
        ):
            text = block.replace("\\\n", " ")
            lines = (
                text.splitlines()
                if kind == "bash"
                else [line[2:] for line in text.splitlines() if line.startswith("$ ")]
            )
            commands = [re.sub(r"\s+#\s.*$", "", line).strip() for line in lines]
            commands = [c for c in commands if c.startswith("daydream ") and not c.split()[1].endswith(":")]
            if commands:
                out.append((doc.name, k, commands))
    return out


BLOCKS = _blocks()


def _skipped(command: str) -> str | None:
    if SYNOPSIS.search(command):
        return "a synopsis"
    return next((f"run by {where}" for start, where in ELSEWHERE.items() if command.startswith(start)), None)


def _indices(folder: Path) -> None:
    """The index files the embeddings docs name: 8 Zipf tables of 20,000 rows (rows fit in 512 MB at dim 64)."""
    rng = np.random.default_rng(0)
    rows = np.minimum(rng.zipf(1.2, (20_000, 8)), 20_000) - 1
    np.save(folder / "day_0_sparse.npy", rows.astype(np.int32))
    np.save(folder / "small.npy", (rows[:2_000, :2] % 500).astype(np.int32))
    np.savez(folder / "tables.npz", **{"0": rows[:, 0] % 10_000, "1": rows[:, 1]})


def test_the_docs_have_commands_and_most_run() -> None:
    commands = [c for _, _, cs in BLOCKS for c in cs]
    run = [c for c in commands if _skipped(c) is None]
    assert len(commands) >= 30 and len(run) >= 0.6 * len(commands), [c for c in commands if c not in run]


# blocks of a minute or so each (CI's 2 cores): they run with `-m slow`
SLOW_BLOCKS = {"optimizations.md#1", "ecosystem.md#0", "multigpu.md#0", "fae.md#0", "embeddings.md#0"}


@pytest.mark.parametrize(
    ("doc", "block", "commands"),
    [
        pytest.param(*b, id=f"{b[0]}#{b[1]}", marks=[pytest.mark.slow] if f"{b[0]}#{b[1]}" in SLOW_BLOCKS else [])
        for b in BLOCKS
    ],
)
def test_a_docs_block_runs(doc: str, block: int, commands: list[str], tmp_path: Path) -> None:
    _indices(tmp_path)
    ran = 0
    for command in commands:
        if _skipped(command) is not None:
            continue
        if ("JOB" in command.split() or "DIR" in command.split()) and not JOB.is_dir():
            pytest.skip(f"{JOB} is absent")
        if command.startswith("daydream record"):
            pytest.importorskip("torch")
        trace = TRACES["fae" if " fae" in command else ""]
        places = {
            "TRACE": str(trace),
            "JOB": str(JOB),
            "DIR": str(JOB),
            "trace.json.gz": str(trace),
            "scenarios.toml": str(ROOT / "examples" / "scenarios.toml"),
            "python": sys.executable,
        }
        words = [
            places.get(w, str(ROOT / w) if w.startswith(("examples/", "validation/", "../shared/")) else w)
            for w in command.split()
        ]
        if any(w.startswith("../shared/") for w in command.split()) and not JOB.parent.parent.is_dir():
            pytest.skip(f"{JOB.parent.parent} is absent")
        words = [w[: -len(".whatif")] if w.endswith(".whatif") and not Path(w).exists() else w for w in words]
        run = subprocess.run(
            [sys.executable, "-m", "daydream", *words[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "COLUMNS": "160"},
            stdin=subprocess.DEVNULL,
        )
        assert run.returncode == 0, f"{doc}: {command}\n{run.stdout[-1500:]}\n{run.stderr[-1500:]}"
        assert "Traceback" not in run.stderr
        ran += 1
    if not ran:
        pytest.skip("every command of the block is a synopsis or run elsewhere")
