"""Every table fits the terminal, at 80 columns (a laptop's split pane, piped output) and at 200, and no figure is
cut: names may give way at their end (full in --json), numbers never do (issue: "80 columns lose data")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "daydream" / "examples" / "mlp_cpu.json.gz"
COMMANDS = [
    ["simulate", str(TRACE)],
    ["run", str(TRACE), "batch_size", "-p", "factor=2"],
    ["compare", str(TRACE), str(ROOT / "examples" / "scenarios.toml")],
    ["demo"],
    ["models", "devices"],
    ["models", "accuracy"],
    ["models", "kernels"],
]
TABLE = re.compile(r"^[┏┃┡│└┌├╭╰━─ ]")
CUT_FIGURE = re.compile(r"(?<![\w<>:])\d[\d.,%]*…")  # a number cut short (15…, 7.…), not a name ending in one (float2…)


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]).replace(str(TRACE), "TRACE"))
def test_tables_fit_and_keep_their_figures(command: list[str], width: int) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "daydream", *command],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": str(width)},
    )
    assert out.returncode == 0, out.stderr
    tables = [line for line in out.stdout.splitlines() if TABLE.match(line) and any(c in line for c in "┃│━─")]
    assert tables, out.stdout[:500]
    too_wide = [line for line in tables if len(line) > width]
    assert not too_wide, f"{len(too_wide)} table lines wider than {width}: {too_wide[0]}"
    cut = [line for line in tables if CUT_FIGURE.search(line)]
    assert not cut, f"a figure cut short: {cut[0]}"


@pytest.mark.parametrize("width", [80, 200])
def test_report_kernel_table_keeps_its_figures(width: int, tmp_path: Path) -> None:
    trace = ROOT.parent / "shared" / "traces" / "hta" / "nccl_parser_config_nccl_data.json.gz"
    if not trace.is_file():
        pytest.skip(f"{trace} is absent")
    out = subprocess.run(
        [sys.executable, "-m", "daydream", "report", str(trace), "amp", "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": str(width)},
    )
    assert out.returncode == 0, out.stderr
    tables = [line for line in out.stdout.splitlines() if TABLE.match(line) and any(c in line for c in "┃│━─")]
    assert any("kernel (its signature" in line for line in tables)
    assert all(len(line) <= width for line in tables), max(tables, key=len)
    assert not [line for line in tables if CUT_FIGURE.search(line)]


@pytest.mark.parametrize("width", [80, 200])
def test_embedding_tables_keep_their_figures_and_stay_told_apart(width: int, tmp_path: Path) -> None:
    """Eight tables of one file are named file[0] .. file[7]: a name cut at its end would make them one."""
    np = pytest.importorskip("numpy")
    data = tmp_path / "day_0_sparse.npy"
    np.save(data, (np.random.default_rng(0).zipf(1.2, (20000, 8)) % 5000).astype(np.int32))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "daydream",
            "embeddings",
            "profile",
            str(data),
            "--budget",
            "1MB",
            "--dim",
            "64",
            "--batch",
            "128",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": str(width)},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("table "))
    rows = [line for line in lines[start + 2 : start + 10]]
    assert all(len(line) <= width for line in lines[start : start + 10]), max(lines, key=len)
    names = [row.split()[0] for row in rows]
    assert len(set(names)) == 8 and all(n.endswith(f"[{k}]") for k, n in enumerate(names)), names
    assert not [row for row in rows if CUT_FIGURE.search(row)]


# issue 75: every line of these commands fits the terminal, tables and our lines alike, broken at word boundaries only
# (a footer cut at the width broke "Gi|B", "inte|rvals"); wide terminals give names their room
LINES = {
    "simulate": ["simulate", "daydream/examples/mlp_cpu.json.gz"],
    "run": ["run", "daydream/examples/mlp_cpu.json.gz", "batch_size", "-p", "factor=2"],
    "compare": ["compare", "daydream/examples/mlp_cpu.json.gz", "examples/scenarios.toml"],
    "demo": ["demo"],
    "list": ["list"],
    "plan": ["plan", "daydream/examples/mlp_cpu.json.gz", "--gpus", "4"],
    "--help": ["--help"],
}
WORD = re.compile(r"[A-Za-z0-9_]+")


def _run(command: list[str], width: int) -> tuple[str, str]:
    out = subprocess.run(
        [sys.executable, "-m", "daydream", *command],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": str(width)},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout, out.stderr


def words_of(text: str) -> set[str]:
    """The words of ``text``, but those a name's deliberate cut ("…") touches: what a line break must not split."""
    return {m.group() for m in WORD.finditer(text) if "…" not in text[max(0, m.start() - 1) : m.end() + 1]}


@pytest.fixture(scope="module")
def whole_lines() -> dict[str, set[str]]:
    """Each command's words at a width no line reaches: the words as they are, none broken."""
    return {name: words_of(_run(command, 2000)[0]) for name, command in LINES.items()}


@pytest.mark.parametrize("width", [80, 100, 200])
@pytest.mark.parametrize("name", list(LINES))
def test_every_line_fits_and_breaks_between_words(name: str, width: int, whole_lines: dict[str, set[str]]) -> None:
    text, said = _run(LINES[name], width)  # (stderr: progress lines, said as the run goes: their figures vary)
    too_wide = [line for line in (text + said).splitlines() if len(line) > width]
    assert not too_wide, f"{len(too_wide)} lines wider than {width}: {too_wide[0]!r}"
    broken = words_of(text) - whole_lines[name]
    assert not broken, f"words broken across lines at {width} columns: {sorted(broken)[:10]}"


def test_a_wide_terminal_gives_names_their_room() -> None:
    """simulate's task names whole at 200 columns (cut at ~60 before, whatever the width)."""
    narrow, wide = _run(LINES["simulate"], 80)[0], _run(LINES["simulate"], 200)[0]
    name = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
    assert name not in narrow and name in wide
