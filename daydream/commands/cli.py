"""The ``daydream`` command: a thin layer over the Python API. This module holds the top parser, the dispatch and
how a command ends (its exit status and last line); each group of commands, its flags and what it prints, is a module
beside it: predict (simulate, run, compare, report, export), plans (plan, shard, embeddings), scripts (check, list,
repl), models (models, validate, calibrate), first_steps (record, demo); the flags they share in arguments."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import os
import signal
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from daydream import signals
from daydream.commands import first_steps, models, plans, predict, scripts
from daydream.commands.output import say
from daydream.errors import DaydreamError
from daydream.files import clip
from daydream.workers import worker_count

EXIT_INTERNAL = 70  # EX_SOFTWARE: an exception daydream did not expect, a bug
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for a process the signal ended
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # an output that did not fit where it goes

EPILOG = """exit status:
  0    success
  1    input error: a trace, file, flag or value that cannot be used (also an output path that cannot be written)
  2    script error: a .whatif script that cannot be parsed or run (also: a command-line usage error; a failed statement in a piped repl session; list: a script that cannot be parsed or checked, the others listed)
  3    a script does not apply to the trace ("SCRIPT does not apply to this trace: WHY": a require in it did not hold), or an assert in a script did not hold; the same in run, report, compare (a scenario was not predicted, 2 or 3 as its script stopped; the others are still predicted and shown) and a piped repl session (its first failed input)
  4    compare --against: a scenario's predicted step grew by more than --tolerance, or lost its prediction
  70   internal error: a bug in daydream; please report it (DAYDREAM_DEBUG=1 shows the traceback)
  130  interrupted (Ctrl-C), within about 1.5 s whatever the command is doing
  143  terminated (SIGTERM); like 130, an output being written is left as it was, with no temporary file

environment:
  DAYDREAM_MEMORY_LIMIT  the memory a trace's load may plan for (16G, 512M; none: no limit); default 75% of the memory available to this process (docs/limits.md)
  DAYDREAM_DEBUG=1       an internal error shows its traceback"""  # noqa: E501


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and the epilog keep their lines (a list stays a list), each wrapped at word boundaries to the
    terminal's width, a line's continuations under its text (``  3    a script ...``: under ``a``)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import re
        import textwrap

        out = []
        for line in text.splitlines():
            # under the text after a status (``  3    ``) or a variable's name (``  DAYDREAM_DEBUG=1       ``)
            hang = " " * len(re.match(r"\s*(?:(?:\d+|[A-Z][A-Z_]+(?:=\S*)?)\s\s+)?", line).group(0))  # type: ignore[union-attr]
            out.append(
                textwrap.fill(
                    line,
                    max(20, width),
                    initial_indent=indent,
                    subsequent_indent=indent + hang,
                    break_long_words=False,
                    break_on_hyphens=False,
                )
                or indent
            )
        return "\n".join(out)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="daydream",
        description="What-if simulation of deep-learning training from profiler traces.",
        epilog=EPILOG,
        formatter_class=_Formatter,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    predict.add_simulate(sub)
    predict.add_run(sub)
    predict.add_compare(sub)
    plans.add_plan(sub)
    predict.add_report(sub)
    predict.add_export(sub)
    scripts.add_check(sub)
    scripts.add_list(sub)
    scripts.add_repl(sub)
    models.add_models(sub)
    plans.add_shard(sub)
    plans.add_embeddings(sub)
    models.add_validate(sub)
    models.add_calibrate(sub)
    first_steps.add_record(sub)
    first_steps.add_demo(sub)
    return p


def _version() -> str:
    from daydream._version import __version__

    return __version__


def _describe(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # an exception whose message cannot be made
        return "(no message)"


@contextlib.contextmanager
def _clean_warnings() -> Iterator[None]:
    """Python warnings as one line each (``daydream: warning: ...``, once per message, no file names); numpy's
    floating-point errors (overflow, invalid value) silent: the results say inf or nan where they matter."""
    import numpy as np

    seen: set[str] = set()

    def show(
        message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        text = " ".join(_describe(message).split()) if isinstance(message, Warning) else " ".join(str(message).split())
        if text not in seen:
            seen.add(text)
            say(f"daydream: warning: {clip(text, 300)}")

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.showwarning = show
        yield


def _tolerant_output() -> None:
    """Output that cannot fail on a name: characters the terminal's encoding lacks (and undecodable bytes of file
    names) print as escapes."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]


def main(argv: Sequence[str] | None = None) -> int:
    """The command line. Never lets an exception out as a traceback: user input errors are one line and exit 1-3
    (see EPILOG), anything else is a bug, reported in one line with exit 70 (the traceback with DAYDREAM_DEBUG=1)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    _tolerant_output()
    try:
        with signals.handled(), _clean_warnings(), _progress_shown(args):
            if getattr(args, "jobs", None) is not None:  # every command's --jobs, used or not (a single trace's)
                worker_count(args.jobs, local=False)  # refused here; capped where the work is known
            return int(args.func(args))
    except DaydreamError as exc:
        if (code := _signalled(exc)) is not None:
            return code
        say(f"daydream: error: {_describe(exc)}")
        return int(getattr(exc, "exit_code", 1))
    except (signals.Terminated, KeyboardInterrupt) as exc:
        return _signalled(exc) or EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (| head): no error, and none from flushing stdout at exit either
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except RecursionError:
        _debug_traceback()
        say("daydream: error: input too deeply nested")
        return 1
    except MemoryError:
        _debug_traceback()
        # a script's own is said at its statement (dsl/execute.py); this is the rest: a trace past its estimate
        say("daydream: error: out of memory: the work needs more than this process may have (docs/limits.md, Memory)")
        return 1
    except OSError as exc:
        if (code := _signalled(exc)) is not None:
            return code
        if exc.filename is None and exc.errno in _FULL:  # stdout on a full disk (or /dev/full)
            say(f"daydream: error: writing the output: {exc.strerror}")
            return 1
        if exc.filename is None:
            return _internal_error(exc)
        _debug_traceback()
        say(f"daydream: error: {exc.filename}: {exc.strerror or _describe(exc)}")
        return 1
    except Exception as exc:  # the safety net: a bug, said in one line
        if (code := _signalled(exc)) is not None:
            return code
        return _internal_error(exc)


def _signalled(exc: BaseException) -> int | None:
    """Where the command ended while a Ctrl-C or a SIGTERM unwound it (the exception, one it was raised during, or
    an error after a library swallowed the signal: matplotlib's "Invalid bounding box" from a half-drawn figure),
    the signal's exit status and line, not an error's."""
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 50:
        if isinstance(cause, (signals.Terminated, KeyboardInterrupt)):
            break
        cause = cause.__context__ or cause.__cause__
        seen += 1
    got = signals.received()
    if isinstance(cause, signals.Terminated) or (cause is None and got == signal.SIGTERM):
        say("daydream: terminated")
        return EXIT_TERMINATED
    if isinstance(cause, KeyboardInterrupt) or got == signal.SIGINT:
        say("daydream: interrupted")
        return EXIT_INTERRUPTED
    return None


def run() -> NoReturn:
    """The ``daydream`` command: :func:`main`, then out of the process without tearing the interpreter down.

    Freeing a large run's objects one by one and unloading numba's LLVM take half a second at exit on a 1M-event
    trace, after the work is done. The exit handlers still run (a Ray session shuts down) and the output is flushed:
    an output that cannot be written is an error (exit 1), a reader that went away (``| head``) is not."""
    code = main()
    with contextlib.suppress(Exception):  # a handler's failure must not turn a finished run into a traceback
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            pass
        except (OSError, ValueError) as exc:
            if stream is sys.stdout:
                say(f"daydream: error: writing the output: {_describe(exc)}")
                code = code or 1
    os._exit(code)


def _progress_shown(args: argparse.Namespace) -> contextlib.AbstractContextManager[None]:
    """Long steps show progress on stderr, unless stdout carries --json (daydream.progress): bars at a terminal, a
    line every few seconds on a pipe (a long run is never silent)."""
    from daydream import progress

    if getattr(args, "json", False):
        return progress.shown(None)
    bars = sys.stderr.isatty()
    from daydream.presentation.console import terminal_console

    return progress.shown(terminal_console(stderr=True), lines=not bars)


def _debug() -> bool:
    return os.environ.get("DAYDREAM_DEBUG", "") not in ("", "0")


def _debug_traceback() -> None:
    if _debug():
        import traceback

        with contextlib.suppress(Exception):
            traceback.print_exc()


def _internal_error(exc: BaseException) -> int:
    _debug_traceback()
    hint = "" if _debug() else "; DAYDREAM_DEBUG=1 shows the traceback"
    say(
        f"daydream: internal error: {type(exc).__name__}: {clip(_describe(exc), 500)} "
        f"(a bug in daydream: please report it with the command that caused it{hint})"
    )
    return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
