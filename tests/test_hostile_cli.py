"""Hostile input at the command line: no traceback, no hang, no leaked warning, no overwritten input.

Each test runs ``python -m daydream`` in a subprocess, as a user would, on inputs built in ``tmp_path`` from the
bundled example trace.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from daydream.api.demo import bundled_example

MARKUP = "[/k]"  # a closing tag that matches nothing: rich.errors.MarkupError where it is read as markup
STYLE = "[bold red]x"  # an opening tag: where it is read as markup the text vanishes into a style


def run(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daydream", *args],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
        env=env,
        cwd=cwd,
    )


def run_patched(patch: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI's main() with ``patch`` (Python) run first: for failures no input can cause on purpose."""
    code = (
        f"import sys\nimport daydream.commands.cli as cli, daydream.commands.predict as predict\n{patch}\nraise"
        " SystemExit(cli.main(sys.argv[1:]))"
    )
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, env=env)


def snapshot(*paths: Path) -> dict[Path, tuple[bytes, int, bool]]:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns, p.is_symlink()) for p in paths}


def assert_clean(out: subprocess.CompletedProcess[str], code: int) -> None:
    assert out.returncode == code, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout, out.stderr


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """The bundled example and its recording sidecar, copied."""
    src = Path(bundled_example())
    dst = tmp_path / "t.json.gz"
    shutil.copyfile(src, dst)
    sidecar = src.with_name(src.name.replace(".json.gz", ".daydream.json"))
    if sidecar.is_file():
        shutil.copyfile(sidecar, tmp_path / "t.daydream.json")
    return dst


@pytest.fixture
def markup_trace(tmp_path: Path) -> Path:
    """The bundled example with rich markup in every CPU op's name."""
    doc = json.loads(gzip.decompress(Path(bundled_example()).read_bytes()))
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "cpu_op":
            ev["name"] = f"{MARKUP}{ev['name']}{STYLE}"
    path = tmp_path / "markup.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


# ---- outputs never overwrite inputs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "target"),
    [
        *((c, t) for c in ("simulate", "run") for t in ("trace", "symlink", "hardlink", "sidecar")),
        ("simulate", "et"),
        ("run", "script"),
        ("run", "included"),
    ],
)
def test_export_trace_onto_an_input_is_refused(tmp_path: Path, trace: Path, command: str, target: str) -> None:
    script, included = tmp_path / "main.whatif", tmp_path / "inc.whatif"
    script.write_text('include "inc.whatif"\n')
    included.write_text("scale cpu by 2\n")
    (tmp_path / "link.json.gz").symlink_to(trace.name)
    os.link(trace, tmp_path / "hard.json.gz")
    et = tmp_path / "t.et.json"  # found next to the trace by its name, or given with --et
    et.write_text('{"nodes": []}')
    out_path = {
        "trace": trace,
        "symlink": tmp_path / "link.json.gz",
        "hardlink": tmp_path / "hard.json.gz",
        "sidecar": tmp_path / "t.daydream.json",
        "script": script,
        "included": included,
        "et": et,
    }[target]
    inputs = [trace, tmp_path / "t.daydream.json", script, included, tmp_path / "link.json.gz", et]
    before = snapshot(*inputs)
    args = ["simulate", str(trace)] if command == "simulate" else ["run", str(trace), str(script)]
    if target == "et":
        args += ["--et", str(et)]
    out = run(*args, "--export-trace", str(out_path))
    assert_clean(out, 1)
    assert f"{out_path}: is an input of this run" in out.stderr
    assert out.stderr.count("\n") == 1
    assert snapshot(*inputs) == before  # bytes, mtime, and the link still a link
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_export_trace_onto_a_library_script_of_the_run_is_refused(tmp_path: Path, trace: Path) -> None:
    lib = tmp_path / "lib.whatif"
    shutil.copyfile(Path(__file__).parents[1] / "transforms" / "batch_size.whatif", lib)
    before = snapshot(lib)
    out = run("run", str(trace), "batch_size", "--export-trace", str(tmp_path / "x.json"))
    assert_clean(out, 0)  # a bare name is the bundled script; writing beside it is fine
    out = run("run", str(trace), str(lib), "--export-trace", str(lib))
    assert_clean(out, 1)
    assert "is an input of this run" in out.stderr and snapshot(lib) == before


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "--export-trace: empty file name"),
        ("  ", "--export-trace: empty file name"),
        ("nodir/x.json", "directory nodir does not exist"),
        (".", "is a directory"),
    ],
)
def test_export_trace_bad_paths_are_errors(tmp_path: Path, trace: Path, path: str, message: str) -> None:
    before = set(tmp_path.iterdir())
    for args in (["simulate", str(trace)], ["run", str(trace), "batch_size"]):
        out = run(*args, "--export-trace", path, cwd=tmp_path)
        assert_clean(out, 1)
        assert message in out.stderr and out.stderr.startswith("daydream: error: ")
    assert set(tmp_path.iterdir()) == before


def test_export_trace_still_writes_other_paths(tmp_path: Path, trace: Path) -> None:
    out = run("simulate", str(trace), "--export-trace", str(tmp_path / "sim.json"))
    assert_clean(out, 0)
    assert "simulated timeline written to" in out.stdout
    assert json.loads((tmp_path / "sim.json").read_text())["traceEvents"]
    # an existing output that is no input is replaced, as asked
    out = run("simulate", str(trace), "--export-trace", str(tmp_path / "sim.json"), "--json")
    assert_clean(out, 0)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_repl_save_onto_an_input_is_refused(tmp_path: Path, trace: Path) -> None:
    (tmp_path / "inc.whatif").write_text("scale cpu by 2\n")
    (tmp_path / "link.json.gz").symlink_to(trace.name)
    inputs = [trace, tmp_path / "t.daydream.json", tmp_path / "inc.whatif", tmp_path / "link.json.gz"]
    before = snapshot(*inputs)
    session = "\n".join(
        [
            'include "inc.whatif"',
            ":undo",  # an include taken back is still a file the session read
            f":save {trace}",
            f":save {tmp_path / 'link.json.gz'}",
            f":save {tmp_path / 't.daydream.json'}",
            f":save {tmp_path / 'inc.whatif'}",
            f":save {tmp_path / 'nodir' / 'x.whatif'}",
            "scale cpu by 2",
            f":save {tmp_path / 'ok.whatif'}",
        ]
    )
    out = run("repl", str(trace), stdin=session + "\n", cwd=tmp_path)
    assert_clean(out, 2)  # piped: a failed command makes the session fail
    assert out.stdout.count("is an input of this run") == 4, out.stdout
    assert "does not exist" in out.stdout
    assert snapshot(*inputs) == before
    assert (tmp_path / "ok.whatif").read_text().endswith("scale cpu by 2\n")


# ---- names from traces and scripts are text, never markup ----------------------------------------------------


@pytest.mark.parametrize("args", [["simulate"], ["simulate", "--step", "all"], ["demo"]])
def test_markup_in_trace_names_prints_as_text(markup_trace: Path, args: list[str]) -> None:
    out = run(args[0], str(markup_trace), *args[1:])
    assert_clean(out, 0)
    if args[0] == "simulate":
        assert MARKUP in out.stdout  # the critical path's top tasks


def test_markup_in_scripts_and_statements_prints_as_text(tmp_path: Path, markup_trace: Path) -> None:
    script = tmp_path / "[bold]odd name.whatif"
    script.write_text(
        f'let x = select cpu where name ~ "k]{STYLE}"\nscale x by 2\nprint("{STYLE} {MARKUP}")\n'
        'let empty = select cpu where name ~ "[/nothing]zzz"\nscale empty by 2\n'
    )
    before = snapshot(markup_trace, script)
    out = run("run", str(markup_trace), str(script))
    assert_clean(out, 0)
    assert f"{STYLE} {MARKUP}" in out.stdout  # the print statement
    assert "[bold]odd name.whatif" in out.stdout  # the file name, in the header and the statements table
    assert "[/nothing]" in out.stdout  # the warning quoting the statement that selects nothing
    assert snapshot(markup_trace, script) == before


def test_markup_in_repl_errors_and_tables_prints_as_text(markup_trace: Path) -> None:
    session = "\n".join([MARKUP, ':show select cpu where name ~ "bold"', ":diff", f":nosuch{MARKUP}"])
    out = run("repl", str(markup_trace), stdin=session + "\n")
    assert_clean(out, 2)
    assert f"{MARKUP}aten::" in out.stdout  # the :show table
    assert out.stdout.count("error:") == 2 and f":nosuch{MARKUP}" in out.stdout


def test_error_messages_with_brackets_print(tmp_path: Path) -> None:
    out = run("simulate", str(tmp_path / "[bold]missing [/k].json"))
    assert_clean(out, 1)
    assert "[bold]missing [/k].json: no such file" in out.stderr


# ---- warnings, floating-point errors, the safety net --------------------------------------------------------


def test_python_warnings_are_one_clean_line(trace: Path) -> None:
    # a library's warning raised during a command (as re's FutureWarning "Possible nested set" once was)
    patch = (
        "import warnings\n_real = predict._cmd_simulate\ndef sim(args):\n    warnings.warn('Possible nested set at"
        " position 1 [/k]', FutureWarning)\n    return _real(args)\npredict._cmd_simulate = sim"
    )
    out = run_patched(patch, "simulate", str(trace), "--json")
    assert_clean(out, 0)
    lines = [line for line in out.stderr.splitlines() if "warning" in line.lower()]
    assert lines == ["daydream: warning: Possible nested set at position 1 [/k]"], out.stderr
    assert ".py" not in out.stderr and "FutureWarning" not in out.stderr


def test_numpy_floating_errors_do_not_print(trace: Path) -> None:
    patch = (
        "import numpy as np\n_real = predict._cmd_simulate\n"
        "def sim(args):\n    a = np.array([1e308, 0.0])\n    _ = a * 10, a / 0, np.log(-a)\n    return _real(args)\n"
        "predict._cmd_simulate = sim"
    )
    out = run_patched(patch, "simulate", str(trace), "--json")
    assert_clean(out, 0)
    assert "RuntimeWarning" not in out.stderr and "overflow" not in out.stderr and "invalid value" not in out.stderr


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        ("ValueError('boom [/k]')", 70, "daydream: internal error: ValueError: boom [/k]"),
        ("KeyError('x')", 70, "daydream: internal error: KeyError"),
        ("RecursionError('maximum recursion depth exceeded')", 1, "daydream: error: input too deeply nested"),
        ("MemoryError()", 1, "daydream: error: out of memory: the work needs more than this process may have"),
        ("KeyboardInterrupt()", 130, "daydream: interrupted"),
    ],
)
def test_unexpected_exceptions_are_one_line(trace: Path, exc: str, code: int, message: str) -> None:
    patch = f"def boom(args):\n    raise {exc}\npredict._cmd_simulate = boom"
    out = run_patched(patch, "simulate", str(trace))
    assert_clean(out, code)
    assert out.stderr.startswith(message), out.stderr
    if code == 70:
        assert out.stderr.count("\n") == 1 and "report it" in out.stderr and "DAYDREAM_DEBUG=1" in out.stderr
        debug = run_patched(patch, "simulate", str(trace), env={**os.environ, "DAYDREAM_DEBUG": "1"})
        assert debug.returncode == 70 and "Traceback" in debug.stderr and message in debug.stderr


def test_deeply_nested_inputs_are_errors(tmp_path: Path) -> None:
    depth = 100_000
    deep_trace = tmp_path / "deep.json"
    deep_trace.write_text(
        '{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"x","ts":1,"dur":1,"pid":1,"tid":1,"args":{"a":'
        + '{"a":' * depth
        + "1"
        + "}" * depth
        + "}}]}"
    )
    deep_script = tmp_path / "deep.whatif"
    deep_script.write_text("let x = " + "[" * depth + "]" * depth + "\n")
    for args in (["simulate", str(deep_trace)], ["check", str(deep_script)]):
        out = run(*args)
        assert out.returncode in (1, 2), out.stderr[-2000:]
        assert "Traceback" not in out.stderr and out.stderr.startswith("daydream: error: ")
        assert len(out.stderr) < 3000


def test_huge_user_text_in_an_error_is_cut(tmp_path: Path, trace: Path) -> None:
    script = tmp_path / "huge.whatif"
    # a 200 KB line (scripts are refused past 256 KiB, with a short message of their own)
    script.write_text("bogus " + "a" * 200_000 + "\n")
    for args in (["check", str(script)], ["run", str(trace), str(script)]):
        out = run(*args)
        assert_clean(out, 2)
        assert len(out.stderr) < 3000
    script.write_text("bogus " + "a" * 10_000_000 + "\n")
    out = run("check", str(script))
    assert_clean(out, 2)
    assert len(out.stderr) < 3000
    out = run("repl", str(trace), stdin="bogus " + "a" * 10_000_000 + "\n")
    assert_clean(out, 2)
    assert len(out.stdout) < 5000


def test_help_documents_exit_codes() -> None:
    out = run("--help")
    assert_clean(out, 0)
    for code in ("0 ", "1 ", "2 ", "3 ", "70 ", "130 "):
        assert f"\n  {code}" in out.stdout
    assert "DAYDREAM_DEBUG=1" in out.stdout
