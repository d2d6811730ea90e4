"""Hostile input, third round: the runtime's bounds (issue 80, items 1, 2, 3, 5, 6).

A signal ends any command whatever it is doing; every DSL function is charged for the work it does; a trace's
memory is estimated before it is built; a script's values have a total size; ``shard`` is near-linear in tables;
``--jobs`` is checked and capped in one place. Speed bounds live in bench/ (bench_budget.py, docs/limits.md): these
tests check charges (units), refusals and exit statuses, never wall time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from daydream.errors import DaydreamError
from daydream.workers import cores, worker_count

ROOT = Path(__file__).resolve().parent.parent

# ---- item 1: a signal ends the command whatever it is doing ----------------------------------------------------

# a command that holds a temporary file and whose code swallows every exception and carries on (a library that
# catches BaseException, a finalizer the unraisable hook drops the signal in): only the watchdog can end it
_SWALLOWING = textwrap.dedent(
    """
    import os, sys, time
    from daydream import signals
    signals.GRACE_S = 0.3  # the test's patience, not the product's
    tmp = sys.argv[1]
    with signals.handled():
        open(tmp, "w").close()
        with signals.on_abandon(lambda: os.unlink(tmp)):
            ready = False
            while True:
                try:
                    if not ready:
                        ready = True
                        print("ready", flush=True)
                    time.sleep(0.01)
                except BaseException:
                    pass
    """
)


@pytest.mark.parametrize(("signum", "status", "line"), [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_a_signal_ends_a_command_that_swallows_it(tmp_path: Path, signum: int, status: int, line: str) -> None:
    tmp = tmp_path / ".out.daydream-1-x.tmp"
    proc = subprocess.Popen([sys.executable, "-c", _SWALLOWING, str(tmp)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        assert tmp.exists()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)  # a hang guard, not a speed bound
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status, err
    assert f"daydream: {line}" in err and "Traceback" not in err
    assert not tmp.exists(), "the watchdog left the temporary file"


def test_a_handled_interrupt_stands_the_watchdog_down(tmp_path: Path) -> None:
    """The REPL cancels a line on Ctrl-C and goes on (signals.forget): the watchdog must not end it later."""
    code = textwrap.dedent(
        """
        import time
        from daydream import signals
        signals.GRACE_S = 0.2
        with signals.handled():
            print("ready", flush=True)
            try:
                time.sleep(30)
            except KeyboardInterrupt:
                signals.forget()
            time.sleep(0.6)  # three graces: the watchdog, were it armed, would have ended the process
            print("went on", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "went on" in out


# ---- item 6: --jobs checked and capped in one place -------------------------------------------------------------


@pytest.mark.parametrize("jobs", [0, -1, True, 1.5, "2"])
def test_worker_count_refuses_what_is_no_count(jobs: object) -> None:
    with pytest.raises(DaydreamError, match="at least 1"):
        worker_count(jobs)


def test_worker_count_caps_at_the_cores_and_says_so() -> None:
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert worker_count(100_000) == cores()
        assert worker_count(100_000, items=1) == 1
    assert said and "core" in str(said[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert worker_count(1) == 1
        assert worker_count(100_000, local=False) == 100_000  # a Ray cluster's workers are not this machine's


@pytest.mark.parametrize("command", ["simulate", "compare", "plan", "validate"])
@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_cli_refuses_jobs_below_one(command: str, jobs: str) -> None:
    args = {"simulate": ["t.json"], "compare": ["t.json", "s.toml"], "plan": ["t.json", "--gpus", "2"], "validate": []}
    out = subprocess.run([sys.executable, "-m", "daydream", command, *args[command], "--jobs", jobs],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)  # fmt: skip
    assert out.returncode == 1, out.stderr  # a flag's value that cannot be used: an input error, as --tolerance x
    assert "--jobs" in out.stderr and "at least 1" in out.stderr and "Traceback" not in out.stderr


def test_api_refuses_jobs_below_one() -> None:
    from daydream.api.compare import compare
    from daydream.api.validate import validate

    with pytest.raises(DaydreamError, match="at least 1"):
        compare("missing.json", [], jobs=0)
    with pytest.raises(DaydreamError, match="at least 1"):
        validate(jobs=-1)
