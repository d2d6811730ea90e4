"""Progress of long steps (daydream.progress): silent unless the command line shows it, a bar at a terminal and a
line every few seconds on a pipe; every long step goes through the one helper."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console
from synth import make_trace, write_trace

from daydream import progress
from daydream.commands.cli import _progress_shown
from daydream.graph.build import build_graph
from daydream.record.command import _wait
from daydream.simulation import simulate
from daydream.trace import load_trace


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120, emoji=False), out


def test_silent_unless_shown() -> None:
    assert not progress.enabled()
    with progress.task("nothing to see", total=3) as advance:
        advance(1)
    assert progress.lines("nothing", 3)(1) is None


def test_a_long_step_draws_a_bar_that_goes_away(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    console, out = terminal()
    with progress.shown(console):
        assert progress.enabled()
        with progress.task("reading [b]big[/b].json", total=4) as advance:  # a name from the user: not markup
            for _ in range(4):
                time.sleep(0.1)
                advance(1)
    assert not progress.enabled()
    text = out.getvalue()
    assert "reading [b]big[/b].json" in text and "/4" in text
    assert text.rstrip().endswith("\x1b[?25h")  # transient: the cursor back, the bar erased


def test_a_quick_step_draws_nothing() -> None:
    console, out = terminal()
    with progress.shown(console), progress.task("quick", total=1) as advance:
        advance(1)
    assert out.getvalue() == ""


def test_lines_for_a_step_that_shares_the_terminal() -> None:
    console, out = terminal()
    with progress.shown(console):
        say = progress.lines("daydream record: steps seen", 3)
        for done in (1, 1, 2, 3):
            say(done)
    assert out.getvalue().splitlines() == [f"daydream record: steps seen: {n} of 3" for n in (1, 2, 3)]


def test_the_command_line_shows_progress_only_at_a_terminal_without_json(monkeypatch: pytest.MonkeyPatch) -> None:
    def shown(json: bool, tty: bool) -> bool:
        monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
        with _progress_shown(argparse.Namespace(json=json)):
            return progress.enabled()

    assert shown(json=False, tty=True)
    assert not shown(json=True, tty=True)  # stdout carries one JSON object: nothing around it
    assert shown(json=False, tty=False)  # piped, logged: as lines (below)


def test_a_long_step_on_a_pipe_says_a_line_every_few_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "EVERY_S", 0.1)
    out = io.StringIO()
    console = Console(file=out, width=120, emoji=False)  # no terminal: no bar to redraw
    with progress.shown(console, lines=True), progress.task("predicting 4 scenarios", total=4) as advance:
        for _ in range(4):
            time.sleep(0.12)
            advance(1)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2 and all(
        re.fullmatch(r"daydream: predicting 4 scenarios: \d of 4, \d+ s", line) for line in lines
    )
    assert "\x1b" not in out.getvalue()  # plain lines, no cursor movement


def test_a_piped_plan_is_not_silent(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 75: a piped `plan` said nothing for 53 s (a bar only at a terminal); on a pipe it says a line of progress
    on stderr every few seconds (EVERY_S; shortened here), stdout left to the tables."""
    from daydream.api.demo import bundled_example
    from daydream.commands.cli import main

    monkeypatch.setattr(progress, "EVERY_S", 0.2, raising=False)
    assert main(["plan", bundled_example(), "--gpus", "4"]) == 0
    out, err = capsys.readouterr()
    assert "Plans by throughput" in out and "daydream: predicting" not in out
    assert re.search(r"^daydream: predicting 12 scenarios: \d+ of 12, \d+ s$", err, re.M), err


@pytest.fixture
def steps_said(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float | None, float]]:
    """Every progress.task opened: (description, total, amount advanced)."""
    said: list[tuple[str, float | None, float]] = []

    @contextlib.contextmanager
    def task(description: str, total: float | None = None) -> Iterator[Callable[[float], None]]:
        done = [0.0]

        def advance(amount: float = 1.0) -> None:
            done[0] += amount

        try:
            yield advance
        finally:
            said.append((description, total, done[0]))

    monkeypatch.setattr(progress, "task", task)
    return said


def test_loading_building_and_simulating_report_progress(
    tmp_path: Path, steps_said: list[tuple[str, float | None, float]]
) -> None:
    path = write_trace(tmp_path / "t.json.gz", make_trace(), gz=True)
    graph = build_graph(load_trace(path), "all")
    simulate(graph)
    size = path.stat().st_size
    # every byte of the file, counted as it is read and decoded (a batch of events at a time)
    assert (f"reading {path}", size, size) in steps_said
    building = [s for s in steps_said if s[0].startswith("building the graph of 3 steps")]
    assert building and building[0][1] == building[0][2]  # every stage counted
    assert any(d == f"simulating {graph.number_of_nodes():,} tasks" for d, _, _ in steps_said)


def test_models_accuracy_and_jobs_report_progress(
    tmp_path: Path, steps_said: list[tuple[str, float | None, float]]
) -> None:
    from daydream.api.job import load_job
    from daydream.perf.accuracy_report import model_accuracy

    for r in range(2):
        doc = make_trace()
        doc["distributedInfo"] = {"rank": r, "world_size": 2}
        write_trace(tmp_path / f"rank{r}.json", doc)
    load_job(tmp_path)
    assert ("building the graphs of 2 ranks", 2, 2) in steps_said
    model_accuracy([tmp_path / "rank0.json"])
    assert ("checking the models' accuracy", 5, 5) in steps_said  # the trace read, then the four checks


def test_record_says_each_step_the_recorder_reports(tmp_path: Path) -> None:
    # the recorder (here a stand-in program) writes the steps it has seen; record says each, a line at a time
    steps = tmp_path / "x.steps"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time, pathlib\n"
                "for n in range(1, 4):\n"
                f"    pathlib.Path({str(steps)!r}).write_text(str(n)); time.sleep(0.4)\n"
            ),
        ]
    )
    console, out = terminal()
    with progress.shown(console):
        assert _wait(child, str(steps), 1, 2) == 0
    lines = out.getvalue().splitlines()
    assert lines[-1] == "daydream record: steps seen (1 warm-up, then 2 recorded): 3 of 3"
    assert lines == sorted(set(lines), key=lines.index)  # each count once


def test_a_step_that_learns_its_total_as_it_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    with progress.counted("sampling") as update:  # not shown: a no-op
        update(1, 2)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    console, out = terminal()
    with progress.shown(console), progress.counted("sampling inputs") as update:
        for done in range(1, 4):
            time.sleep(0.1)
            update(done, 7)
    assert "sampling inputs" in out.getvalue() and "/7" in out.getvalue()


def test_validate_reports_each_case(tmp_path: Path, steps_said: list[tuple[str, float | None, float]]) -> None:
    """A ledger takes minutes: at a terminal the cases done so far show (it showed nothing for 141 s)."""
    import shutil

    from daydream.api.demo import bundled_example
    from daydream.api.validate import validate

    for name in ("a.json.gz", "b.json.gz"):
        shutil.copy(bundled_example(), tmp_path / name)
    path = tmp_path / "cases.toml"
    path.write_text(
        '[[case]]\nname = "one"\nbefore = ["a.json.gz"]\nafter = ["b.json.gz"]\nscripts = ["batch_size"]\nparams = {'
        ' factor = 1 }\n\n[[case]]\nname = "two"\nbefore = ["b.json.gz"]\nafter = ["a.json.gz"]\nscripts ='
        ' ["fused_optimizer"]\n'
    )
    validate(path)
    assert ("validating 2 cases", 2, 2) in steps_said
    validate(path, jobs=2)
    assert steps_said.count(("validating 2 cases", 2, 2)) == 2
