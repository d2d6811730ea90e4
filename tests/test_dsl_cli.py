"""``daydream run``, ``check``, ``list`` and ``repl`` as a user runs them: piped and at a pseudo-terminal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED_TRACES
from synth import STEP_PERIOD_US, make_trace, write_trace

DLRM8 = SHARED_TRACES / "param" / "dlrm8"

# Per step of the synthetic trace: sgemm 200 us forward, relu 20, sgemm 100 backward, optimizer 13, copy 10.
AMP = '''"""Mixed precision: GEMMs 2x faster."""
param speedup = 2
let gemm = select gpu where name ~ "sgemm"
scale gemm by 1 / speedup
set cpu.gap = gap / speedup  # the trace's iteration is CPU-bound
assert predicted < baseline
'''


def run(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daydream", *args], capture_output=True, text=True, timeout=120, input=stdin, cwd=cwd
    )


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "t.json.gz", make_trace(), gz=True)


def test_run_json_has_baseline_prediction_and_statements(tmp_path: Path, trace: Path) -> None:
    script = tmp_path / "amp.whatif"
    script.write_text(AMP)
    original = trace.read_bytes()
    out = run("run", str(trace), str(script), "--json", "-p", "speedup=4", "--export-trace", str(tmp_path / "p.json"))
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["measured_us"] == STEP_PERIOD_US and d["baseline_us"] == STEP_PERIOD_US
    assert d["predicted_us"] < d["baseline_us"] and d["speedup"] == pytest.approx(d["baseline_us"] / d["predicted_us"])
    assert d["params"] == {"speedup": 4}
    # the step and the step before it, its context: every statement changes both (the steady state)
    assert [(s["line"], s["kind"], s["tasks"]) for s in d["statements"]] == [(4, "scale", 4), (5, "set", 14)]
    assert d["statements"][0]["duration_delta_us"] == pytest.approx(-(200 + 100) * 0.75 * 2)
    assert trace.read_bytes() == original  # the input is never modified
    assert json.loads((tmp_path / "p.json").read_text())["traceEvents"]


def test_run_tables(tmp_path: Path, trace: Path) -> None:
    script = tmp_path / "amp.whatif"
    script.write_text(AMP)
    out = run("run", str(trace), str(script))
    assert out.returncode == 0, out.stderr
    for text in (
        "Iteration time",
        "speedup",
        "Breakdown",
        "GPU time by kernel class",
        "scale gemm by 1 / speedup",
        "2 tasks",
        "in the step (4 tasks",
    ):
        assert text in out.stdout


def test_run_script_errors_exit_2_with_position(tmp_path: Path, trace: Path) -> None:
    bad = tmp_path / "bad.whatif"
    bad.write_text("let gemm = select gpu\nscale gemm bye 2\n")
    out = run("run", str(trace), str(bad))
    assert out.returncode == 2 and not out.stdout
    assert f"daydream: error: {bad}:2:12: unexpected name 'bye'" in out.stderr and "did you mean 'by'?" in out.stderr
    assert "Traceback" not in out.stderr
    out = run("run", str(trace), str(tmp_path / "amp.whatif"))
    assert out.returncode == 2 and "no such script" in out.stderr
    good = tmp_path / "ok.whatif"
    good.write_text(AMP)
    out = run("run", str(trace), str(good), "-p", "sped=3")
    assert out.returncode == 2 and "unknown parameter sped (-p): the scripts declare speedup" in out.stderr
    out = run("run", str(trace), str(good), "-p", "speedup")
    assert out.returncode == 1 and "write NAME=VALUE" in out.stderr


def test_a_script_that_does_not_apply_says_so_the_same_way_everywhere(tmp_path: Path, trace: Path) -> None:
    # the synthetic trace has no data loading: a script that needs it stops with one message and exit status 3 in
    # run, report, compare and a piped repl session, and with NotApplicable in Python
    script = tmp_path / "loader.whatif"
    script.write_text('require count(dataloader) > 0, "the step loads no data"\nscale dataloader by 0.5\n')
    said = f"loader does not apply to this trace: the step loads no data ({script}:1: count(dataloader) > 0)"
    out = run("run", str(trace), str(script))
    assert (out.returncode, out.stderr) == (3, f"daydream: error: {said}\n")
    out = run("report", str(trace), str(script), "--out", str(tmp_path / "r"))
    assert (out.returncode, out.stderr) == (3, f"daydream: error: {said}\n")
    scenarios = tmp_path / "s.toml"
    scenarios.write_text(f'[[scenario]]\nname = "faster loading"\nscripts = ["{script}"]\n')
    out = run("compare", str(trace), str(scenarios), "--json")
    assert out.returncode == 3 and json.loads(out.stdout)["scenarios"][0]["error"] == said
    assert out.stderr == f"daydream: 1 of 1 scenarios not predicted (first: faster loading: {said})\n"
    out = run("repl", str(trace), "--include-dir", str(tmp_path), stdin=f'include "{script}"\nprint 1\n')
    assert out.returncode == 3 and f"error: {said}\n" in out.stdout
    from daydream.api.whatif import whatif
    from daydream.errors import NotApplicable

    with pytest.raises(NotApplicable) as err:
        whatif(trace, [script])
    assert str(err.value) == said and err.value.exit_code == 3


def test_failed_assert_exits_3(tmp_path: Path, trace: Path) -> None:
    script = tmp_path / "slow.whatif"
    script.write_text('scale gpu by 2\nassert predicted < baseline, "expected a speedup"\n')
    out = run("run", str(trace), str(script))
    assert out.returncode == 3
    assert f"{script}:2: assertion failed: predicted < baseline" in out.stderr and "expected a speedup" in out.stderr


def test_check_and_list(tmp_path: Path) -> None:
    (tmp_path / "amp.whatif").write_text(AMP)
    (tmp_path / "typo.whatif").write_text("let x = select kernal\n")
    out = run("check", str(tmp_path / "amp.whatif"))
    assert out.returncode == 0 and "ok" in out.stdout and "params speedup = 2" in out.stdout
    out = run("check", str(tmp_path / "typo.whatif"))
    assert out.returncode == 2 and "unknown task kind 'kernal'" in out.stderr and "did you mean 'kernel'?" in out.stderr
    (tmp_path / "broken.whatif").write_text("scale (\n")
    (tmp_path / "zz_last.whatif").write_text('"""Listed after the broken ones."""\nprint 1\n')
    # every broken script (a parse error, a check error) is said in full, the others are still listed; then exit 2
    out = run("list", str(tmp_path))
    assert out.returncode == 2, out.stderr
    assert "amp" in out.stdout and "Mixed precision: GEMMs 2x faster." in out.stdout and "speedup = 2" in out.stdout
    assert "Listed after the broken ones." in out.stdout
    assert "cannot be used:" in out.stdout and "broken" in out.stdout and "typo" in out.stdout
    assert f"daydream: error: {tmp_path / 'broken.whatif'}:1:8:" in out.stderr
    assert f"daydream: error: {tmp_path / 'typo.whatif'}:1:16: unknown task kind 'kernal'" in out.stderr
    assert out.stderr.rstrip().endswith("daydream: 2 of 4 scripts cannot be used (above); the others are listed")
    out = run("list")  # the bundled library: none broken
    assert out.returncode == 0 and not out.stderr, out.stderr


def test_repl_piped(tmp_path: Path, trace: Path) -> None:
    session = "\n".join(
        [
            'let gemm = select gpu where name ~ "sgemm"',
            "scale gemm by 0.5",
            ":show gemm",
            "scale gemm bye 2",
            "for g in gemm by phase {",
            "  print g.phase[0], count(g)",
            "}",
            ":undo",
            ":predict",
            "scale gemm by 0.5",
            ":diff",
            f":save {tmp_path / 'saved.whatif'}",
        ]
    )
    out = run("repl", str(trace), stdin=session + "\n")
    assert out.returncode == 2  # one statement failed
    lines = out.stdout.splitlines()
    assert lines[0].startswith("daydream repl: ") and "baseline 1.000 ms" in lines[0]
    assert "gemm = 4 tasks" in out.stdout  # the step's and its context step's
    # the step's two GEMMs, and with its context step's two
    assert (
        "2 tasks, -0.150 ms of task time in the step (4 tasks, -0.300 ms with its context steps); predicted"
        in out.stdout
    )
    assert "volta_sgemm_128x64_nn" in out.stdout and "volta_sgemm_64x64_nt" in out.stdout  # :show lists the tasks
    assert "unexpected name 'bye'" in out.stdout
    assert "forward 2" in out.stdout and "backward 2" in out.stdout
    assert "undone: scale gemm by 0.5" in out.stdout
    saved = (tmp_path / "saved.whatif").read_text().splitlines()
    assert saved[1:] == ['let gemm = select gpu where name ~ "sgemm"', "scale gemm by 0.5"]
    # the saved session replays to the same prediction
    replay = run("run", str(trace), str(tmp_path / "saved.whatif"), "--json")
    assert replay.returncode == 0, replay.stderr
    last = re.findall(r"predicted ([0-9.]+) ms", out.stdout)[-1]
    assert f"{json.loads(replay.stdout)['predicted_us'] / 1e3:.3f}" == last


def test_repl_bare_expressions(trace: Path) -> None:
    session = "\n".join(
        ["count(gpu)", "let x = 3", "x * 2", "scal x by 2", "count(gpu))", 'select gpu where name ~ "sgemm"']
    )
    out = run("repl", str(trace), stdin=session + "\n")
    assert out.returncode == 2  # two inputs failed
    lines = out.stdout.splitlines()
    assert lines[1].isdigit() and int(lines[1]) > 0  # the GPU task count
    assert lines[2:4] == ["x = 3", "6"]
    # a word and another after it was a statement: the statement's error; else the expression's
    assert "unknown statement 'scal'" in out.stdout and "did you mean 'scale'?" in out.stdout
    assert "unexpected ')'; expected the end of the expression" in out.stdout
    assert "volta_sgemm_128x64_nn" in out.stdout  # a selection lists its tasks


@pytest.mark.skipif(not DLRM8.is_dir(), reason="shared traces absent")
def test_repl_on_a_job_folder() -> None:
    out = run("repl", str(DLRM8), "--link", "nvlink2", stdin="job_ranks()\nstraggler()\n")
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"daydream repl: {DLRM8}: 7,955 tasks; baseline 19.724 ms")  # the slowest rank's period
    assert lines[1:3] == ["[0, 1, 2, 3, 4, 5, 6, 7]", "7"]


def test_repl_at_a_terminal(tmp_path: Path, trace: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, DAYDREAM_HISTORY=str(tmp_path / "history"), TERM="xterm", COLUMNS="120")
    child = pexpect.spawn(sys.executable, ["-m", "daydream", "repl", str(trace)], env=env, encoding="utf-8", timeout=60)
    try:
        child.expect("Ctrl-D to leave")
        child.expect_exact("whatif> ")
        child.sendline('let gemm = select gpu where name ~ "sgemm"')
        child.expect_exact("gemm = 4 tasks")
        child.expect_exact("whatif> ")
        child.send("sca\t")  # completion of a keyword
        child.expect_exact("scale")
        child.sendline(" gemm by 0.5")
        child.expect(r"4 tasks,\s+-0\.300\s+ms\s+with\s+its\s+context\s+steps\);\s+predicted\s+[0-9.]+\s+ms")
        child.expect_exact("whatif> ")
        child.send("\x10")  # Ctrl-P, previous history line: it comes back
        child.expect_exact("gemm by 0.5")
        child.send("\r")
        child.expect(r"-0\.150\s+ms\s+with\s+its\s+context\s+steps")
        child.expect_exact("whatif> ")
        child.sendline("for g in gemm by phase {")
        child.expect_exact("...> ")  # continuation prompt inside a block
        child.sendline("print count(g) }")
        child.expect_exact("2")
        child.expect_exact("whatif> ")
        child.sendline(":undo")
        child.expect_exact("undone: scale gemm by 0.5")
        child.expect_exact("whatif> ")
        child.sendline("scale nothing by 2")
        child.expect_exact("unknown name 'nothing'")
        child.expect_exact("whatif> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert "scale gemm by 0.5" in (tmp_path / "history").read_text()


def test_repl_joins_lines_while_a_bracket_is_open(trace: Path) -> None:
    out = run("repl", str(trace), stdin="for k in [1, 2\n, 3] {\nprint k\n}\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1:4] == ["1", "2", "3"]


def flat(text: str) -> str:
    """``text`` with its lines joined: what it says, wherever the terminal's width broke its lines."""
    return " ".join(text.split())


def test_repl_answers_pythons_words_and_an_empty_diff(trace: Path) -> None:
    """Issue 75: `exit`, `quit()` and `help` answered "unknown name 'exit'"; `:diff` before any change printed an
    empty table. Now each does what it asks, saying the command; a name the session bound is itself."""
    out = run("repl", str(trace), stdin=":diff\nhelp\nquit()\ncount(gpu)\n")
    assert out.returncode == 0, out.stdout
    assert "no changes yet" in out.stdout and "\nGPU time by class\n" not in out.stdout  # no table
    assert "(:help is the command: " in out.stdout and ":undo" in out.stdout
    assert out.stdout.rstrip().endswith("(:quit is the command: leave (also Ctrl-D))")  # count(gpu) never ran
    assert "unknown name" not in out.stdout
    out = run("repl", str(trace), stdin="exit\n")
    assert out.returncode == 0 and "(:quit is the command" in out.stdout
    out = run("repl", str(trace), stdin="let exit = 3\nexit\n")
    assert out.stdout.splitlines()[-1] == "3"


def test_messages_say_what_is_wanted(tmp_path: Path, trace: Path) -> None:
    """Issue 75: a word where a number goes, a device the catalog lacks, a unit where none belongs, a select no task
    matches and a script where the trace goes are each said in the terms of what is wanted."""
    out = run("run", str(trace), "batch_size", "-p", "factor=two")
    assert out.returncode == 2 and "-p factor=two: factor takes a number (its default: 2), not the word 'two'" in flat(
        out.stderr
    )
    script = tmp_path / "mine.whatif"
    for text, said in [
        (
            'param device = "h1000"\nlet t = gemm(64, 64, 64, device = device)',
            "unknown device 'h1000'; did you mean 'h100'",
        ),
        ('let t = gemm(64, 64, 64, dtype = "bf17")', "unknown dtype 'bf17'"),
        ('let t = allreduce(1MB, ranks = 2, link = "nvlink9")', "unknown link 'nvlink9'"),
        ("scale gpu by 2ms", "a scale factor is a number (2, 0.5, 1 / speedup); 2ms is a time"),
        (
            'insert cpu "x" after first(cpu) duration 10MB',
            "a duration is a time (10us, 1.5ms); 10MB is a size in bytes",
        ),
        ('alloc 10ms as "activations" after first(cpu) until last(cpu)', "alloc takes a size in bytes"),
    ]:
        script.write_text(text + "\n")
        out = run("check", str(script))  # without a trace: what run would refuse, check refuses
        assert out.returncode == 2 and said in flat(out.stderr), (text, out.stderr)
    script.write_text('scale select gpu where class == "gem" by 0.5\n')
    out = run("run", str(trace), str(script))
    said = flat(out.stdout)  # (a line wraps at the terminal's width)
    assert "matches no task; no task has class 'gem' (the trace's: " in said and "did you mean 'gemm'?" in said
    script.write_text('"""Half-time GEMMs."""\nscale select gpu where class == "gemm" by 0.5\n')
    out = run("simulate", str(script))
    assert out.returncode == 1
    assert f"{script}: a .whatif script, not a trace (Kineto JSON): `daydream run TRACE {script}` runs it" in flat(
        out.stderr
    )


def test_the_python_api_names_its_own_arguments(trace: Path) -> None:
    """An error about a param given through the API speaks of ``params``, not of the command line's -p."""
    from daydream.api.whatif import whatif
    from daydream.errors import ScriptError

    with pytest.raises(ScriptError, match=r"^params\['factor'\] = 'two': factor takes a number"):
        whatif(trace, ["batch_size"], params={"factor": "two"})
    with pytest.raises(ScriptError, match=r"unknown parameter nope \(params\)"):
        whatif(trace, ["batch_size"], params={"nope": 1})
    with pytest.raises(ScriptError) as exc:
        whatif(trace, ["amp"], params={"memory_speedup": -1})
    assert "(from params['memory_speedup'] = -1)" in str(exc.value) and "-p " not in str(exc.value)


def test_no_noise_the_user_cannot_act_on(tmp_path: Path) -> None:
    """Issue 75: the library's scripts warned of their own no-op statements, the header showed a site-packages path
    after two spaces, and a CPU recording was warned of on every command. A library script is named by its name, the
    CPU recording said on the device line; the user's own no-op is still said."""
    from daydream.api.demo import bundled_example

    out = run("run", bundled_example(), "batch_size", "-p", "factor=2")
    assert out.returncode == 0, out.stderr
    assert "holds no task" not in out.stdout + out.stderr and "warning" not in out.stdout + out.stderr
    assert f"daydream run {bundled_example()} batch_size" in flat(out.stdout)
    assert "device: x86_64 (cpu)\n" in out.stdout
    own = tmp_path / "own.whatif"
    own.write_text('let none_such = select cpu where name == "no such op"\nremove none_such\n')
    out = run("run", bundled_example(), str(own))
    assert "`none_such` holds no task: remove does nothing" in flat(out.stdout)
