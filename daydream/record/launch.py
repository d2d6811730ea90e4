"""The recorder inside the program's process: ``daydream record`` runs ``python -c <bootstrap> SCRIPT ARGS`` (or
``-m MODULE ARGS``), and the bootstrap calls :func:`main` here with the options in ``DAYDREAM_RECORD`` (JSON).

The program runs as ``__main__`` with its own ``sys.argv``; whatever it does, the outcome (steps seen, files, error)
goes to the status file named in the options, for the parent to report.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

from daydream.errors import DaydreamError
from daydream.files import write_atomically
from daydream.record.command import ENV, RecordResult
from daydream.record.recorder import Recorder, RecordingDone, RecordOptions


def _run_program(argv: list[str]) -> None:
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path.insert(0, str(Path(argv[0]).resolve().parent))  # as `python script.py` does
        runpy.run_path(argv[0], run_name="__main__")


def _program_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the program's first frame on: the recorder's and runpy's frames are noise to its author."""
    ours = {__file__, runpy.__file__}
    while tb is not None and (
        tb.tb_frame.f_code.co_filename in ours or tb.tb_frame.f_code.co_filename.startswith("<frozen")
    ):
        tb = tb.tb_next
    return tb


def main() -> None:
    config: dict[str, Any] = json.loads(os.environ.pop(ENV))
    status_file = config.pop("status")
    argv = sys.argv[1:]
    error: BaseException | None = None
    exit_code = 0
    stopped = False
    try:
        recorder = Recorder(RecordOptions(**config))
        recorder.start()
    except DaydreamError as exc:
        write_atomically(status_file, json.dumps({"recorder_error": str(exc)}).encode())
        sys.exit(3)
    try:
        _run_program(argv)
    except RecordingDone:
        stopped = True
    except SystemExit as exc:
        code = exc.code
        if isinstance(code, str):
            print(code, file=sys.stderr)
        exit_code = code if isinstance(code, int) else (0 if code is None else 1)
        if exit_code:
            error = exc
    except BaseException as exc:  # the program's own failure: shown as Python would, then reported
        traceback.print_exception(type(exc), exc, _program_frames(exc.__traceback__))
        error, exit_code = exc, 1
    result: RecordResult = recorder.finish(error)
    status = {
        "complete": result.complete,
        "steps_seen": result.steps_seen,
        "trace": result.trace,
        "files": result.files,
        "message": result.message,
        "exit_code": exit_code,
    }
    write_atomically(status_file, json.dumps(status).encode())
    code = exit_code if exit_code else (0 if result.complete else 1)
    if stopped:
        # Skip interpreter teardown after an early stop: the program's threads (loader workers) may still run.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
