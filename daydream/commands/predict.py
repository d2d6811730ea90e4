"""The commands that predict on a trace: simulate, run, compare, report, export."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from daydream.commands.arguments import (
    CORES,
    TRACE_HELP,
    TRACE_OR_CHAKRA_HELP,
    add_graph_options,
    add_job_options,
    add_link_option,
    add_script_options,
    integer,
    number,
    run_options,
    script_params,
    workload,
)
from daydream.commands.output import print_json, say, tables_console
from daydream.errors import DaydreamError
from daydream.names import terminal_text
from daydream.units import ms

if TYPE_CHECKING:
    from rich.console import Console

    from daydream.commands.arguments import Commands


def add_simulate(sub: Commands) -> None:
    sim = sub.add_parser("simulate", help="replay a trace through the simulator and compare with the measurement")
    sim.add_argument(
        "trace",
        metavar="TRACE",
        help=TRACE_OR_CHAKRA_HELP,
    )
    sim.add_argument(
        "--step",
        default=None,
        help=(
            "ProfilerStep number or name, 'all', 'trace' (whole window), or an annotation name; default: a steady-state"
            " step"
        ),
    )
    sim.add_argument(
        "--et",
        default=None,
        metavar="FILE",
        help="PyTorch execution trace of the same run (default: found next to TRACE)",
    )
    sim.add_argument(
        "--policy", default="earliest", help="schedule policy: earliest, fifo, priority:ATTR (default: earliest)"
    )
    add_job_options(sim)
    sim.add_argument(
        "--by-workers",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=(
            "a job: simulate it by the workers (--jobs, --ray), each holding some ranks, none all of them "
            "(default: for a job of more than 8 MiB of traces); --no-by-workers: every rank in this process"
        ),
    )
    sim.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    sim.add_argument(
        "--export-trace",
        metavar="OUT.json",
        help="write the simulated timeline as Chrome-trace JSON (never onto an input of the run)",
    )
    sim.set_defaults(func=_cmd_simulate)


def add_run(sub: Commands) -> None:
    run = sub.add_parser("run", help="apply .whatif scripts to a trace and predict the iteration before and after")
    run.add_argument(
        "trace",
        metavar="TRACE",
        help=TRACE_HELP,
    )
    run.add_argument(
        "scripts",
        metavar="SCRIPT",
        nargs="+",
        help=".whatif scripts, applied in order (a bare name: the bundled library)",
    )
    add_graph_options(run)
    add_job_options(run)
    run.add_argument(
        "--by-workers",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=(
            "a job: simulate it by the workers (--jobs, --ray), each holding some ranks and running the "
            "scripts on each where it lives (default: for a job of more than 8 MiB of traces); "
            "--no-by-workers: every rank in this process"
        ),
    )
    run.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    run.add_argument(
        "--export-trace",
        metavar="OUT.json",
        help=(
            "write the baseline and the predicted timelines as two processes of one Chrome-trace JSON (never onto an"
            " input of the run)"
        ),
    )
    run.set_defaults(func=_cmd_run)


def add_compare(sub: Commands) -> None:
    cmp = sub.add_parser(
        "compare",
        help="predict scenarios on one trace, ranked; save the results; catch regressions",
        description=(
            "Predict every scenario of SCENARIOS.toml on TRACE, each on its own copy of the "
            "graph, and rank them by predicted step time with the breakdown and what bounds each. "
            "The file's format: python -c 'import daydream.api.compare as c; print(c.__doc__)', or "
            "docs/compare.md."
        ),
    )
    cmp.add_argument(
        "trace",
        metavar="TRACE",
        help=TRACE_HELP,
    )
    cmp.add_argument(
        "scenarios", metavar="SCENARIOS.toml", help="[[scenario]] tables (name, scripts, params, grid) and a [grid]"
    )
    cmp.add_argument("--step", default=None, help="ProfilerStep number or name, 'all', 'trace', or an annotation name")
    cmp.add_argument("--et", default=None, metavar="FILE", help="PyTorch execution trace of the same run")
    cmp.add_argument(
        "--policy", default="earliest", help="schedule policy before any script's schedule (default: earliest)"
    )
    cmp.add_argument(
        "--memory-gb",
        type=number,
        default=None,
        metavar="GiB",
        help="device memory a predicted peak must fit in (default: the trace's GPU's)",
    )
    add_script_options(cmp)
    add_link_option(cmp)
    cmp.add_argument(
        "--jobs",
        type=integer,
        default=1,
        metavar="N",
        help=f"worker processes that predict scenarios (default 1; {CORES})",
    )
    cmp.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="predict scenarios on this Ray cluster (ray://host:10001, auto, or local; Ray optional)",
    )
    cmp.add_argument("--json", action="store_true", help="print one JSON object (what --save writes) instead of tables")
    cmp.add_argument(
        "--save", metavar="RESULTS.json", help="write the results with their provenance (never onto an input)"
    )
    cmp.add_argument(
        "--against", metavar="OLD.json", help="compare with saved results: exit 4 when a scenario regressed"
    )
    cmp.add_argument(
        "--tolerance",
        default="5%",
        metavar="PCT",
        help="how much longer a predicted step may get before --against calls it a regression (default 5%%)",
    )
    cmp.set_defaults(func=_cmd_compare)


def add_report(sub: Commands) -> None:
    rep = sub.add_parser(
        "report",
        help="a report to share: XSP's layer and kernel tables, plots, one HTML page",
        description=(
            "Simulate TRACE (and predict SCRIPTS, applied in order, if given), analyse the "
            "baseline and the prediction as XSP does (layers, kernels by name and by layer with their "
            "roofline class, streams' idle time, critical path, a verdict) and write --out: index.html "
            "(opens from disk), the figures as PNG and SVG, report.json."
        ),
    )
    rep.add_argument(
        "trace",
        metavar="TRACE",
        help=TRACE_HELP,
    )
    rep.add_argument(
        "scripts",
        metavar="SCRIPT",
        nargs="*",
        help=".whatif scripts to predict, applied in order (none: the baseline alone)",
    )
    add_graph_options(rep)
    add_link_option(rep)
    rep.add_argument(
        "--out", default="daydream-report", metavar="DIR", help="the folder to write (default: ./daydream-report)"
    )
    rep.add_argument(
        "--json", action="store_true", help="print the analyses as one JSON object (report.json) instead of tables"
    )
    rep.set_defaults(func=_cmd_report)


def add_export(sub: Commands) -> None:
    exp = sub.add_parser(
        "export",
        help="write a trace, a job or a what-if as Chakra execution traces (ASTRA-sim's input)",
        description=(
            "Write TRACE's graph - after SCRIPTS, applied in order, if given - as one MLCommons "
            "Chakra execution trace per rank (DIR/NAME.RANK.et) and DIR/comm_group.json, through mlc-chakra "
            "(pip install 'daydream-whatif[chakra]'). ASTRA-sim reads them; so does daydream simulate DIR. "
            "What maps to what: docs/ecosystem.md."
        ),
    )
    exp.add_argument(
        "trace",
        metavar="TRACE",
        help=TRACE_OR_CHAKRA_HELP,
    )
    exp.add_argument(
        "scripts",
        metavar="SCRIPT",
        nargs="*",
        help=".whatif scripts applied first, in order (none: the graph as traced)",
    )
    add_graph_options(exp)
    add_job_options(exp)
    exp.add_argument(
        "--chakra", required=True, metavar="DIR", help="the folder to write the .et files in (made if absent)"
    )
    exp.add_argument(
        "--world",
        type=integer,
        default=None,
        metavar="N",
        help=(
            "ranks to write: the job's repeated (rank r of k stands for r, r + k, ...) or its first; default: the "
            "ranks scale_out, ddp or fsdp set, else the trace's world"
        ),
    )
    exp.add_argument(
        "--ctrl-deps",
        action="store_true",
        help=(
            "a thread's and a stream's order as ctrl_deps (default: every dependency a data dependency, the "
            "only kind ASTRA-sim's ETFeeder reads)"
        ),
    )
    exp.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    exp.set_defaults(func=_cmd_export)


def _cmd_simulate(args: argparse.Namespace) -> int:
    from daydream.api.replay import replay
    from daydream.presentation.terminal import render_job, render_replay
    from daydream.simulation import parse_policy

    work = workload(args)
    inputs = work.inputs()
    if work.is_job:
        from daydream.api.job import replay_job, replay_job_graph  # a job's collective models: imported for jobs only

        _check_export(args, inputs)
        if work.is_chakra:
            job = replay_job_graph(work.load_shared()[0], parse_policy(args.policy))
        else:
            # a timeline to export is the whole job's: one process holds it
            by_workers = False if args.export_trace is not None and not args.by_workers else args.by_workers
            if args.export_trace is not None and args.by_workers:
                raise DaydreamError(
                    "--export-trace needs the whole job's timeline in one process: give --no-by-workers"
                )
            job = replay_job(
                args.trace,
                step=args.step,
                link=args.link,
                jobs=args.jobs,
                policy=parse_policy(args.policy),
                ray=args.ray,
                by_workers=by_workers,
            )
        _emit(args, job, render_job, "simulated", inputs)
        return 0
    _check_export(args, inputs)
    if work.is_chakra:
        from daydream.api.replay import replay_graph

        result = replay_graph(work.load()[0], parse_policy(args.policy))
    else:
        result = replay(args.trace, step=args.step, et=args.et, policy=parse_policy(args.policy))
    _emit(args, result, render_replay, "simulated", inputs)
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from daydream.api.whatif import whatif
    from daydream.presentation.terminal import render_whatif

    # print statements show as they run (so they are there when an assert fails); --json keeps stdout to one object
    def show(line: str) -> None:
        print(terminal_text(line), file=sys.stderr if args.json else sys.stdout, flush=True)

    work, options = workload(args), run_options(args)
    if args.export_trace is not None and args.by_workers:
        raise DaydreamError("--export-trace needs the whole job's timelines in one process: give --no-by-workers")
    # timelines to export are the whole job's: one process holds them
    work = dataclasses.replace(work, by_workers=False if args.export_trace is not None else args.by_workers)
    inputs = work.inputs(args.scripts, options)
    _check_export(args, inputs)  # before the work: a refused output path costs no simulation
    result = whatif(work, args.scripts, script_params(args.param), options, on_print=show)
    _emit(args, result, render_whatif, "predicted", inputs)
    return 0


def _check_export(args: argparse.Namespace, inputs: list[str]) -> None:
    from daydream.files import check_output_path

    if args.export_trace is not None:
        check_output_path(args.export_trace, inputs, "--export-trace")


def _emit(
    args: argparse.Namespace, result: Any, render: Callable[[Any, Console], None], what: str, inputs: list[str]
) -> None:
    """The shared tail of simulate and run: the timeline exported if asked (never onto one of ``inputs``), then one
    JSON object or the tables. ``run`` exports two processes, the baseline and the prediction; ``simulate`` its one
    timeline, as ``what``."""
    from daydream.simulation.export import export_chrome_trace

    if args.export_trace is not None:
        _check_export(args, inputs)
        before = getattr(result, "baseline_timeline", None)  # a WhatIf: the graph before the scripts, simulated
        timelines = [("baseline", before), (what, result.timeline)] if before is not None else result.timeline
        export_chrome_trace(timelines, args.export_trace, label=what)
    if args.json:
        print_json(result.to_dict())
        return
    console = tables_console()
    render(result, console)
    if args.export_trace is not None:
        console.print(f"{what} timeline written to {args.export_trace}", highlight=False, markup=False)


def _cmd_compare(args: argparse.Namespace) -> int:
    from daydream.api.compare import (
        EXIT_REGRESSED,
        check_against,
        compare,
        compare_inputs,
        load_saved,
        parse_tolerance,
        save,
    )
    from daydream.files import check_output_path
    from daydream.presentation.terminal import render_comparison

    # everything that can be refused is refused before the work
    tolerance = parse_tolerance(args.tolerance)
    options = run_options(args)
    inputs = compare_inputs(args.trace, args.scenarios, args.et, args.include_dir)
    saved = load_saved(args.against) if args.against else None
    if args.save is not None:
        check_output_path(args.save, [*inputs, args.against], "--save")
    result = compare(workload(args), args.scenarios, options, jobs=args.jobs, ray=args.ray)
    against = check_against(result, saved, args.against, tolerance) if saved is not None else None
    if args.save is not None:
        save(result, args.save)
    if args.json:
        out = result.to_dict()
        if against is not None:
            out["against"] = msgspec.to_builtins(against)
        print_json(out)
    else:
        console = tables_console()
        render_comparison(result, console, against)
        if args.save is not None:
            console.print(f"results written to {args.save}", highlight=False, markup=False)
    if against is not None and against.regressed:
        for v in against.regressed:
            say(f"daydream: regressed: {v.name}: {v.message}")
        return EXIT_REGRESSED
    failed = [s for s in result.scenarios if s.error is not None]
    if failed:
        say(
            f"daydream: {len(failed)} of {len(result.scenarios)} scenarios not predicted (first: {failed[0].name}:"
            f" {failed[0].error})"
        )
        return failed[0].exit_code
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from daydream.presentation.page import check_report_dir, write_report
    from daydream.presentation.terminal import render_report

    work, options = workload(args), run_options(args)
    check_report_dir(args.out, work.inputs(args.scripts, options), bool(args.scripts))  # before the work
    report = write_report(work, args.scripts, script_params(args.param), args.out, options)
    if args.json:
        print_json(report.to_dict())
    else:
        render_report(report, tables_console())
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from daydream.api.chakra import export_chakra

    def show(line: str) -> None:
        print(terminal_text(line), file=sys.stderr if args.json else sys.stdout, flush=True)

    result = export_chakra(
        workload(args),
        args.chakra,
        args.scripts,
        script_params(args.param),
        run_options(args),
        args.world,
        "ctrl" if args.ctrl_deps else "data",
        on_print=show,
    )
    if args.json:
        print_json(result.to_dict())
        return 0
    w = result.written
    for line in result.warnings:
        say(f"daydream: warning: {line}")
    if result.predicted_us is not None:
        show(
            f"after {', '.join(Path(s).name for s in result.scripts)}: step {ms(result.predicted_us)} "
            f"(baseline {ms(result.baseline_us or 0.0)}), as daydream run predicts it"
        )
    repeat = (
        f"; each of the {w.traced_ranks} traced ranks repeated (rank r stands for r, r + {w.traced_ranks}, ...)"
        if w.world > w.traced_ranks
        else ""
    )
    show(
        f"wrote {w.world:,} Chakra execution trace{'s' if w.world > 1 else ''} ({result.world_from}{repeat}): "
        f"{w.nodes:,} nodes, {w.dependencies:,} dependencies, {w.workload}.0.et"
        + (f" to {w.workload}.{w.world - 1}.et" if w.world > 1 else "")
        + f"; process groups in {w.comm_groups}"
    )
    show(
        f"ASTRA-sim: --workload-configuration={w.workload} --comm-group-configuration={w.comm_groups}; "
        f"daydream: simulate {os.path.dirname(w.workload) or '.'}"
    )
    return 0
