"""The commands on .whatif scripts themselves: check, list, repl."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from daydream.commands.arguments import (
    TRACE_HELP,
    add_graph_options,
    add_job_options,
    add_script_options,
    run_options,
    script_params,
    workload,
)
from daydream.commands.output import say, tables_console
from daydream.names import terminal_text

if TYPE_CHECKING:
    from daydream.commands.arguments import Commands


def add_check(sub: Commands) -> None:
    check = sub.add_parser("check", help="parse and check .whatif scripts without a trace")
    check.add_argument("scripts", metavar="SCRIPT", nargs="+")
    add_script_options(check)
    check.set_defaults(func=_cmd_check)


def add_list(sub: Commands) -> None:
    lst = sub.add_parser("list", help="list .whatif scripts with their docstrings and params")
    lst.add_argument("paths", metavar="PATH", nargs="*", help="scripts or directories (default: the bundled library)")
    lst.set_defaults(func=_cmd_list)


def add_repl(sub: Commands) -> None:
    repl = sub.add_parser("repl", help="change a trace's graph interactively, one statement at a time")
    repl.add_argument(
        "trace",
        metavar="TRACE",
        help=TRACE_HELP,
    )
    add_graph_options(repl)
    add_job_options(repl)
    repl.set_defaults(func=_cmd_repl)


def _cmd_check(args: argparse.Namespace) -> int:
    from daydream.dsl.library import check_files

    for line in check_files(args.scripts, include_dirs=args.include_dir, budget=args.budget):
        print(terminal_text(line))
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from daydream.dsl.library import describe_scripts
    from daydream.errors import ScriptError
    from daydream.presentation.terminal import render_script_list

    scripts = describe_scripts(args.paths, keep_going=True)
    render_script_list(scripts, tables_console())
    # every broken script in full, after the others are listed; then the status a script error has
    broken = [s for s in scripts if s.error is not None]
    for s in broken:
        say(f"daydream: error: {s.error}")
    if broken:
        say(f"daydream: {len(broken)} of {len(scripts)} scripts cannot be used (above); the others are listed")
        return ScriptError.exit_code
    return 0


def _cmd_repl(args: argparse.Namespace) -> int:
    from daydream.commands.repl import run_repl

    return run_repl(workload(args), script_params(args.param), run_options(args))
