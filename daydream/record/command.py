"""``daydream record -- python train.py ARGS``: run a program unchanged under the recorder, in a child process.

The child is the same command with a small bootstrap in front of the script (``python [OPTS] -c BOOTSTRAP SCRIPT
ARGS``): it checks for torch before importing anything, then hands over to :mod:`daydream.record.launch`. Options go
in through ``DAYDREAM_RECORD``; the outcome comes back through a status file. Importing this module needs no torch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from daydream import progress, signals
from daydream.errors import DaydreamError
from daydream.files import check_output_path, remove_stale_temporaries

# Checks for torch and daydream in the program's interpreter (which may not be this one) before importing them.
BOOTSTRAP = """\
import importlib.util, json, os, sys
def _status(**kw):
    with open(json.loads(os.environ["DAYDREAM_RECORD"])["status"], "w") as fh:
        json.dump(kw, fh)
if importlib.util.find_spec("torch") is None:
    _status(missing="torch", python=sys.executable)
    sys.exit(3)
try:
    from daydream.record.launch import main
except ImportError as exc:
    _status(missing="daydream", python=sys.executable, error=str(exc))
    sys.exit(3)
main()
"""
ENV = "DAYDREAM_RECORD"  # the options, as JSON, for daydream.record.launch
_PYTHON = re.compile(r"^(python|pypy)[0-9.]*(\.exe)?$")
_OPTIONS_WITH_VALUE = ("-W", "-X", "-Q")


class RecordError(DaydreamError):
    """The recording is not whole (the program crashed, ran too few steps, or lacks torch): the message says what
    was kept."""


@dataclass
class RecordResult:
    """What a recording produced (:func:`record_program`, :class:`daydream.record.record`): ``complete`` when all
    steps were recorded; ``exit_code`` the program's."""

    complete: bool
    steps_seen: int
    trace: str | None
    files: list[str] = field(default_factory=list)
    message: str = ""
    exit_code: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def program_command(command: list[str]) -> list[str]:
    """The child's command line: ``python [OPTS] SCRIPT ARGS`` -> ``python [OPTS] -c BOOTSTRAP SCRIPT ARGS``."""
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise DaydreamError("give the program to run after --, e.g. daydream record -- python train.py")
    exe = command[0]
    if not _PYTHON.match(Path(exe).name) and Path(exe).resolve() != Path(sys.executable).resolve():
        raise DaydreamError(
            f"daydream record runs Python programs: the command starts with {exe!r}; write it as "
            "`-- python SCRIPT.py ARGS` or `-- python -m MODULE ARGS` (in a multi-process launch, record inside the "
            "program with daydream.record.record)"
        )
    if shutil.which(exe) is None:
        raise DaydreamError(f"{exe}: no such program")
    i, options = 1, []
    while i < len(command) and command[i].startswith("-") and command[i] not in ("-m", "-"):
        if command[i] == "-c":
            raise DaydreamError("daydream record runs a script or a module (-m), not -c code")
        options.append(command[i])
        if command[i] in _OPTIONS_WITH_VALUE and i + 1 < len(command):
            options.append(command[i + 1])
            i += 1
        i += 1
    target = command[i:]
    if not target or target[0] == "-" or (target[0] == "-m" and len(target) < 2):
        raise DaydreamError("no script to run: expected `python SCRIPT.py ARGS` or `python -m MODULE ARGS`")
    if target[0] != "-m" and not Path(target[0]).is_file():
        raise DaydreamError(f"{target[0]}: no such script")
    return [exe, *options, "-c", BOOTSTRAP, *target]


def check_counts(warmup: int, steps: int) -> None:
    if warmup < 0:
        raise DaydreamError(f"--warmup must be 0 or more steps, got {warmup}")
    if steps < 1:
        raise DaydreamError(f"--steps must be at least 1, got {steps}")


def default_out(command: list[str]) -> str:
    """``python examples/mlp.py`` -> ``mlp-trace``; ``python -m pkg.train`` -> ``train-trace``."""
    args = command[1:] if command and command[0] == "--" else command
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            return args[i + 1].rsplit(".", 1)[-1] + "-trace"
        if arg.endswith(".py"):
            return Path(arg).stem + "-trace"
    return "daydream-trace"


def record_program(
    command: list[str],
    out: str | None = None,
    warmup: int = 2,
    steps: int = 3,
    *,
    execution_trace: bool = False,
    embedding_stats: bool = False,
    profile_memory: bool = False,
    keep_running: bool = False,
) -> RecordResult:
    """Run ``command`` (``["python", "train.py", ...]``) with the recorder and return what it recorded.

    The program runs unchanged; by default it is ended once the steps are recorded (``keep_running`` lets it
    finish); ``profile_memory`` records the allocator's ``[memory]`` events too. Raises :class:`RecordError` when the
    recording is not whole, DaydreamError for a bad command.
    """
    check_counts(warmup, steps)
    child = program_command(command)
    out_dir = Path(out or default_out(command)).absolute()
    if out_dir.exists() and not out_dir.is_dir():
        raise DaydreamError(f"{out_dir}: exists and is not a directory")
    check_outputs(out_dir, command)
    fd, status_path = tempfile.mkstemp(prefix="daydream-record-", suffix=".json")
    os.close(fd)
    os.unlink(status_path)
    # at a terminal, the recorder writes the steps it has seen here, and a line says each (daydream.progress)
    steps_path = status_path.removesuffix(".json") + ".steps" if progress.enabled() else None
    config = {
        "out": str(out_dir),
        "warmup": warmup,
        "steps": steps,
        "execution_trace": execution_trace,
        "embedding_stats": embedding_stats,
        "profile_memory": profile_memory,
        "stop": not keep_running,
        "command": command,
        "status": status_path,
        "progress": steps_path,
    }
    env = {**os.environ, ENV: json.dumps(config)}
    try:
        proc = subprocess.Popen(child, env=env)
        try:
            code = _wait(proc, steps_path, warmup, steps)
        except KeyboardInterrupt:  # the program got the interrupt too: let it stop and report
            with signals.patient():  # its stopping, not this process, decides how long (the signal's watchdog)
                code = proc.wait()
        status = _read_status(status_path)
    finally:
        # what the program left half-written if it ended without cleaning up (os._exit, a signal): the recorder's
        # temporaries carry its process id, which is gone now
        remove_stale_temporaries(out_dir)
        Path(status_path).unlink(missing_ok=True)
        if steps_path is not None:
            Path(steps_path).unlink(missing_ok=True)
    return _report(status, code, child[0])


# what the recorder writes in --out, per rank: the trace, the execution trace, the sidecar
_OUTPUT_NAME = re.compile(r"^rank\d+\.(json\.gz|et\.json\.gz|daydream\.json)$")


def check_outputs(out_dir: Path, command: list[str]) -> None:
    """Refuse before the program runs an --out folder where a recording would overwrite one of the program's own
    files (its script, or a file an argument names): rank 0's files (through links too), and any input in the folder
    named as a rank's file would be, are checked against them."""
    inputs = [a for a in command if os.path.isfile(a)]
    if not out_dir.is_dir() or not inputs:
        return
    names = {f"rank0{suffix}" for suffix in (".json.gz", ".et.json.gz", ".daydream.json")}
    names |= {Path(a).name for a in inputs if _OUTPUT_NAME.match(Path(a).name)}
    for name in sorted(names):
        check_output_path(out_dir / name, inputs, "--out")


def _wait(proc: subprocess.Popen[bytes], steps_path: str | None, warmup: int, steps: int) -> int:
    """The program's exit code; meanwhile, where the recorder reports its steps, a line per step seen. Lines, not a
    bar: the program writes to the same terminal, and a redrawn bar would overwrite its output."""
    if steps_path is None:
        return proc.wait()
    say = progress.lines(f"daydream record: steps seen ({warmup} warm-up, then {steps} recorded)", warmup + steps)
    while True:
        try:
            code = proc.wait(timeout=0.25)
        except subprocess.TimeoutExpired:
            code = None
        try:
            seen = int(Path(steps_path).read_text() or 0)
        except (OSError, ValueError):  # not written yet, or caught halfway
            seen = None
        if seen:
            say(min(seen, warmup + steps))
        if code is not None:
            return code


def _read_status(path: str) -> dict[str, Any] | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _report(status: dict[str, Any] | None, code: int, python: str) -> RecordResult:
    if status is None:
        raise RecordError(
            f"the program exited with code {code} before the recorder could report (killed, or it "
            "replaced the process); nothing recorded can be vouched for"
        )
    if status.get("missing") == "torch":
        raise RecordError(
            f"torch is not installed for {status.get('python') or python}: the recorder needs it "
            "(pip install 'daydream-whatif[record]' in the environment that runs the program)"
        )
    if status.get("missing") == "daydream":
        raise RecordError(
            f"{status.get('python') or python} cannot import daydream ({status.get('error')}): install "
            "daydream-whatif[record] in the environment that runs the program"
        )
    if status.get("recorder_error"):
        raise RecordError(f"the recorder could not start: {status['recorder_error']}")
    report = RecordResult(
        complete=bool(status.get("complete")),
        steps_seen=int(status.get("steps_seen") or 0),
        trace=status.get("trace"),
        files=list(status.get("files") or []),
        message=str(status.get("message") or ""),
        exit_code=int(status.get("exit_code") or 0),
    )
    if not report.complete:
        err = RecordError(report.message)
        err.exit_code = report.exit_code or 1
        err.report = report  # type: ignore[attr-defined]
        raise err
    return report
