"""Hostile input, second round: outputs never land on a run's inputs (whatever command, whatever input), sizes a file
states are bounded before anything is sized by them, untrusted names never make an internal error, and files named in
TOML are sandboxed as includes are. Each test is a case an attacker tried by hand (issue 50); each failed before its
fix.

Special files are look-alikes made in a temporary folder (FIFOs, a file of zeros), never the machine's own.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from synth import make_trace, write_trace

from daydream.api.demo import bundled_example


def cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daydream", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def clean(out: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert out.returncode == code, (out.returncode, out.stdout[-1500:], out.stderr[-1500:])
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    for w in words:
        assert w in out.stderr, (w, out.stderr)


def snapshot(*paths: Path) -> dict[Path, tuple[bytes, int]]:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in paths}


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    dst = tmp_path / "t.json.gz"
    shutil.copyfile(bundled_example(), dst)
    return dst


def edited_trace(path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    doc = json.loads(gzip.decompress(Path(bundled_example()).read_bytes()))
    edit(doc)
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


# --- 2. outputs checked against every input of the command --------------------------------------------------------


@pytest.mark.parametrize("target", ["script", "included", "scenarios"])
def test_compare_save_never_overwrites_its_scripts(tmp_path: Path, trace: Path, target: str) -> None:
    (tmp_path / "main.whatif").write_text('include "part.whatif"\n')
    (tmp_path / "part.whatif").write_text("scale cpu by 0.9\n")
    scenarios = tmp_path / "s.toml"
    scenarios.write_text('[[scenario]]\nname = "faster"\nscripts = ["main.whatif"]\n')
    out = {"script": tmp_path / "main.whatif", "included": tmp_path / "part.whatif", "scenarios": scenarios}[target]
    before = snapshot(tmp_path / "main.whatif", tmp_path / "part.whatif", scenarios)
    got = cli("compare", str(trace), str(scenarios), "--save", str(out))
    clean(got, 1, f"{out}: is an input of this run", "(--save)")
    assert snapshot(tmp_path / "main.whatif", tmp_path / "part.whatif", scenarios) == before


def test_run_and_report_outputs_never_overwrite_an_include(tmp_path: Path, trace: Path) -> None:
    (tmp_path / "main.whatif").write_text('include "sub/part.whatif"\n')
    (tmp_path / "sub").mkdir()
    part = tmp_path / "sub" / "part.whatif"
    part.write_text("scale cpu by 0.9\n")
    before = snapshot(part)
    clean(
        cli("run", str(trace), str(tmp_path / "main.whatif"), "--export-trace", str(part)), 1, "is an input of this run"
    )
    # a report folder whose report.json is (a link to) an included script
    (tmp_path / "rep").mkdir()
    (tmp_path / "rep" / "report.json").symlink_to(part)
    clean(
        cli("report", str(trace), str(tmp_path / "main.whatif"), "--out", str(tmp_path / "rep")),
        1,
        "is an input of this run",
    )
    assert snapshot(part) == before


def test_record_out_never_overwrites_the_program(tmp_path: Path) -> None:
    program = tmp_path / "rank0.json.gz"  # a program whose name is a recording's: absurd, and still refused
    program.write_text("print('never run')\n")
    before = snapshot(program)
    got = cli("record", "--out", str(tmp_path), "--", sys.executable, str(program))
    clean(got, 1, "is an input of this run", "(--out)")
    assert snapshot(program) == before


# --- 3. sizes a file states are bounded before use ------------------------------------------------------------------


def test_a_rank_number_in_a_file_name_is_bounded(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    shutil.copyfile(bundled_example(), job / "rank0.json.gz")
    shutil.copyfile(bundled_example(), job / "rank99999999999.json.gz")
    got = cli("simulate", str(job), timeout=60)
    clean(got, 1, "rank 99999999999 (from its file name): a job has at most 1,048,576 ranks")


@pytest.mark.parametrize(
    ("info", "message"),
    [
        (
            {"rank": 0, "world_size": 100_000_000_000},
            "distributedInfo.world_size = 100000000000 ignored: a job has 1 to 1,048,576 ranks",
        ),
        ({"rank": 5, "world_size": 4}, "distributedInfo.rank = 5 ignored: a rank is below its world_size 4"),
    ],
)
def test_a_world_size_in_a_trace_is_bounded(tmp_path: Path, info: dict[str, int], message: str) -> None:
    """A world size of 1e11 built a list of that many ranks (3.7 GB in 27 s, then out of memory): a value out of range
    is dropped, with a warning, before anything is sized by it."""
    t = edited_trace(tmp_path / "t.json.gz", lambda doc: doc.__setitem__("distributedInfo", info))
    job = tmp_path / "job"
    job.mkdir()
    shutil.copyfile(t, job / "rank0.json.gz")
    for path in (
        (t, job) if message.startswith("distributedInfo.world_size") else (t,)
    ):  # (a job of world 4 with one rank file: its error)
        got = cli("simulate", str(path), timeout=60)
        clean(got, 0)
        assert message in got.stdout  # the run's warnings, with its tables


def npy_with_header(path: Path, shape: tuple[int, ...], payload: bytes = b"") -> Path:
    """An .npy file whose 128-byte header states ``shape`` (int64), followed by ``payload`` only."""
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, dtype=np.int64))
    header["shape"] = shape
    with path.open("wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(payload)
    return path


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((1, 10**12), "its header says (1, 1000000000000) int64"),  # a table per column: 10^12 of them
        ((10**11,), "its header says (100000000000,) int64"),  # a permutation of every sampling unit
        ((10**13, 2), "its header says (10000000000000, 2) int64"),
    ],
)
def test_an_npy_header_that_lies_about_its_size_is_refused(
    tmp_path: Path, shape: tuple[int, ...], message: str
) -> None:
    f = npy_with_header(tmp_path / "lies.npy", shape, np.arange(64, dtype=np.int64).tobytes())
    got = cli("embeddings", "profile", str(f), "--budget", "1MB", "--dim", "8", timeout=30)
    clean(got, 1, message, "512 bytes follow it: truncated, or not what it claims")


def test_many_columns_within_the_file_still_hit_the_table_bound(tmp_path: Path) -> None:
    f = tmp_path / "wide.npy"
    np.save(f, np.zeros((2, 5000), dtype=np.int32))
    clean(
        cli("embeddings", "profile", str(f), "--budget", "1MB", "--dim", "8", timeout=30),
        1,
        "5,000 columns, each a table: at most 4,096 tables in all",
    )


@pytest.mark.parametrize(
    ("index", "extra", "message"),
    [
        (
            2_000_000_000,
            [],
            "index 2,000,000,000 at input 3: daydream counts each row's lookups, for tables of at most",
        ),
        (2**62, [], "index 4,611,686,018,427,387,904 at input 3"),
        (
            5,
            ["--rows", "999999999999999999999"],
            "a number is finite and at most 10^18 in magnitude",
        ),  # refused as read
        (5, ["--seed", "-1"], "seed: a whole number from 0 to 2^63 - 1, not -1"),
    ],
)
def test_an_index_or_row_count_never_sizes_memory_past_the_bound(
    tmp_path: Path, index: int, extra: list[str], message: str
) -> None:
    values = np.arange(8, dtype=np.int64)
    values[3] = index
    f = tmp_path / "idx.npy"
    np.save(f, values)
    got = cli("embeddings", "profile", str(f), "--budget", "1MB", "--dim", "8", "--sample", "100%", *extra, timeout=30)
    clean(got, 1, message)


@pytest.mark.parametrize("kind", ["fifo", "endless"])
def test_shard_reads_its_tables_through_the_checked_opener(tmp_path: Path, kind: str) -> None:
    """`shard /dev/zero` grew to 9.8 GB and a FIFO blocked forever: look-alikes of both (a FIFO, 20 MB of zeros)."""
    f = tmp_path / "tables.toml"
    if kind == "fifo":
        os.mkfifo(f)
        message = "is a named pipe (FIFO), not a regular file"
    else:
        f.write_bytes(b"\0" * (20 << 20))
        message = "bytes: a tables file holds at most 16,777,216"
    clean(cli("shard", str(f), "--ranks", "2", "--batch", "8", timeout=20), 1, message)


# --- 4. no internal error on untrusted names and numbers ---------------------------------------------------------


def test_an_op_named_as_math_text_reports(tmp_path: Path) -> None:
    """matplotlib reads `$...$` in a tick label as math: an op so named failed the report (exit 70)."""
    doc = make_trace()
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "cpu_op" and ev["name"] == "aten::linear":
            ev["name"] = "$a^^b$"
    t = write_trace(tmp_path / "math.json", doc)
    got = cli("report", str(t), "--out", str(tmp_path / "rep"))
    clean(got, 0)
    layers = json.loads((tmp_path / "rep" / "report.json").read_text())["analyses"][0]["layers"]
    assert "$a^^b$" in [r["name"] for r in layers]  # drawn as a tick label of the layers figure
    assert (tmp_path / "rep" / "index.html").is_file()


def test_a_failed_report_leaves_no_half_written_folder(tmp_path: Path, trace: Path) -> None:
    code = (
        "import sys, daydream.presentation.plots as p, daydream.commands.cli as cli\n"
        "def boom(*a, **k): raise RuntimeError('drawing failed')\n"
        "p.timeline_figure = boom\n"
        "raise SystemExit(cli.main(sys.argv[1:]))\n"
    )
    out = tmp_path / "rep"
    got = subprocess.run(
        [sys.executable, "-c", code, "report", str(trace), "--out", str(out)], capture_output=True, text=True
    )
    assert got.returncode == 70 and not out.exists(), got.stderr  # the figures drawn before the failure are gone too


def test_a_trace_name_with_an_undecodable_byte(tmp_path: Path) -> None:
    name = os.fsdecode(b"t\xff.json.gz")
    shutil.copyfile(bundled_example(), tmp_path / name)
    (tmp_path / "s.toml").write_text('[[scenario]]\nname = "x"\nscripts = ["batch_size"]\n')
    for args in (
        ["simulate", name, "--json"],
        ["run", name, "batch_size", "--json"],
        ["demo", name, "--json"],
        ["simulate", name, "--export-trace", "o.json"],
        ["report", name, "batch_size", "--out", "rep"],
        ["compare", name, "s.toml", "--json"],
    ):
        got = cli(*args, cwd=tmp_path)
        clean(got, 0)
        if "--json" in args:
            assert "t\\\\xff.json.gz" in got.stdout  # the byte as an escape, in valid JSON
            json.loads(got.stdout)
    assert "t\\\\xff.json.gz" in (tmp_path / "rep" / "report.json").read_text()


# --- 7. scripts named in TOML files are sandboxed as includes are --------------------------------------------------


@pytest.mark.parametrize("named", ["../outside/secret.whatif", "passwd", "/etc/passwd", "notes.txt"])
def test_scripts_named_in_a_scenarios_file_stay_in_its_folder(tmp_path: Path, trace: Path, named: str) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.whatif").write_text("SECRET-TOKEN\n")
    here = tmp_path / "here"
    here.mkdir()
    (here / "passwd").write_text("root-TOKEN:x:0:0\n")  # a bare name never reads a file of the working directory
    (here / "notes.txt").write_text("NOTES-TOKEN\n")
    (here / "s.toml").write_text(f'[[scenario]]\nname = "x"\nscripts = ["{named}"]\n')
    got = cli("compare", str(trace), str(here / "s.toml"), cwd=here)
    assert got.returncode in (1, 2) and "Traceback" not in got.stderr, got.stderr
    assert "TOKEN" not in got.stderr + got.stdout
    assert "refused" in got.stderr or "no such script in the library" in got.stderr


def test_scripts_named_in_a_cases_file_stay_in_its_folder(tmp_path: Path, trace: Path) -> None:
    cases = tmp_path / "cases.toml"
    shutil.copyfile(trace, tmp_path / "after.json.gz")
    cases.write_text(
        '[[case]]\nname = "x"\nbefore = ["t.json.gz"]\nafter = ["after.json.gz"]\nscripts = ["/etc/passwd"]\n'
    )
    got = cli("validate", str(cases))
    assert got.returncode in (1, 2) and "Traceback" not in got.stderr and "root:x" not in got.stderr, got.stderr
    assert "refused: only .whatif files are scripts" in got.stderr
