"""The commands of a first session: record (a trace of a training program), demo (the main job on the bundled
example)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from daydream.commands.arguments import integer
from daydream.commands.output import print_json, tables_console
from daydream.names import terminal_text

if TYPE_CHECKING:
    from daydream.commands.arguments import Commands


def add_record(sub: Commands) -> None:
    rec = sub.add_parser(
        "record",
        help="run a PyTorch training program unchanged and record N steady steps",
        description=(
            "Run `python SCRIPT.py ARGS` (or `python -m MODULE ARGS`) unchanged, profile --steps "
            "training steps after --warmup steps, and write the trace, module/optimizer metadata and "
            "(optionally) the execution trace to --out. A step ends with the iteration's last "
            "optimizer step, or at each daydream.record.step() call."
        ),
    )
    rec.add_argument(
        "--warmup", type=integer, default=2, metavar="W", help="steps to run before recording (default: 2)"
    )
    rec.add_argument("--steps", type=integer, default=3, metavar="N", help="steps to record (default: 3)")
    rec.add_argument("--out", default=None, metavar="DIR", help="output directory (default: ./<script>-trace)")
    rec.add_argument("--execution-trace", action="store_true", help="also record the PyTorch execution trace")
    rec.add_argument(
        "--embedding-stats",
        action="store_true",
        help="count embedding-table row lookups in the warm-up steps (hot rows, pooling factor)",
    )
    rec.add_argument(
        "--profile-memory",
        action="store_true",
        help="also record every allocation and free ([memory] events: bytes, totals allocated and reserved)",
    )
    rec.add_argument(
        "--keep-running", action="store_true", help="let the program finish instead of ending it once recorded"
    )
    rec.add_argument("--json", action="store_true", help="print one JSON object (files, steps) instead of lines")
    rec.add_argument("program", nargs=argparse.REMAINDER, metavar="-- python SCRIPT.py ARGS", help="the program to run")
    rec.set_defaults(func=_cmd_record)


def add_demo(sub: Commands) -> None:
    demo = sub.add_parser("demo", help="the main job on the bundled example: replay it, predict a few optimizations")
    demo.add_argument("trace", metavar="TRACE", nargs="?", default=None, help="a trace instead of the bundled example")
    demo.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    demo.set_defaults(func=_cmd_demo)


def _cmd_record(args: argparse.Namespace) -> int:
    from daydream.record.command import record_program

    report = record_program(
        args.program,
        args.out,
        args.warmup,
        args.steps,
        execution_trace=args.execution_trace,
        embedding_stats=args.embedding_stats,
        profile_memory=args.profile_memory,
        keep_running=args.keep_running,
    )
    if args.json:
        print_json(report.as_dict())
        return 0
    print(terminal_text(f"daydream record: {report.message}"))
    for path in report.files:
        print(terminal_text(f"  {path}"))
    if report.trace:
        print(terminal_text(f"next: daydream simulate {report.trace}"))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from daydream.api.demo import run_demo
    from daydream.presentation.terminal import render_demo

    demo = run_demo(args.trace)
    if args.json:
        print_json(demo.to_dict())
    else:
        render_demo(demo, tables_console())
    return 0
