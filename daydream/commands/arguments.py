"""What the commands' flags share: the checked number types, the option groups several commands take, and the
workload, run options and script params read from them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from daydream.errors import DaydreamError
from daydream.files import input_number

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]  # what each command module adds its parsers to

# what every --jobs says of its bound (daydream.workers.worker_count)
# what a trace argument takes, in every command's --help (daydream.trace.job.TRACE_SUFFIXES, read by their bytes)
TRACE_FILES = "Kineto trace JSON (.json, .json.gz or .json.xz)"
TRACE_HELP = f"{TRACE_FILES}, or a folder of one trace per rank of a job"
TRACE_OR_CHAKRA_HELP = f"{TRACE_FILES}, a folder of one trace per rank of a job, or Chakra .et files"
CORES = "at most one per core: a larger N is capped, with a warning; on a Ray cluster, N chunks"


def add_job_options(p: argparse.ArgumentParser) -> None:
    add_link_option(p)
    p.add_argument(
        "--jobs",
        type=integer,
        default=None,
        metavar="N",
        help=f"worker processes that build a job's rank graphs (default: one per 32 ranks; {CORES})",
    )
    p.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="build a job's rank graphs on this Ray cluster (ray://host:10001, auto, or local; Ray optional)",
    )


def add_link_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--link",
        default=None,
        metavar="LINK",
        help="a job's collectives priced over this link (preset or GB/s; default: fitted to the job's own transfers)",
    )


def add_graph_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help='set a script param (a .whatif value: 2, 1.5ms, 4MB, "text", [1, 2]); SCRIPT.NAME=VALUE sets one '
        "script's alone (-p ddp.link=ib-ndr); repeatable",
    )
    p.add_argument("--step", default=None, help="ProfilerStep number or name, 'all', 'trace', or an annotation name")
    p.add_argument("--et", default=None, metavar="FILE", help="PyTorch execution trace of the same run")
    p.add_argument(
        "--policy", default="earliest", help="schedule policy before any script's schedule (default: earliest)"
    )
    p.add_argument(
        "--memory-gb",
        type=number,
        default=None,
        metavar="GiB",
        help="device memory the predicted peak must fit in (default: the trace's GPU's, or a device swap's target's)",
    )
    add_script_options(p)


def add_script_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--budget",
        type=integer,
        default=None,
        metavar="N",
        help="units of work a script run may do, a unit at most about a microsecond (default: 60,000,000, "
        "about a minute; 400 per task on graphs over 150,000 tasks; docs/language.md, Limits)",
    )
    p.add_argument(
        "--include-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder `include` may read .whatif scripts from, besides the script's own folder tree and "
        "the bundled library; repeatable",
    )


def integer(text: str) -> int:
    """An argparse type: a whole number in ASCII digits, at most 10^18 in magnitude (daydream.files.input_number);
    what the flag means bounds it further where it is used."""
    try:
        return int(input_number(text, whole=True))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def number(text: str) -> float:
    """An argparse type: a finite number in ASCII digits, at most 10^18 in magnitude (daydream.files.input_number)."""
    try:
        return input_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def script_params(pairs: list[str]) -> dict[str, str]:
    from daydream.dsl.params import CommandLineParams

    out = CommandLineParams()  # errors about them say -p NAME=VALUE
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        scope, dot, param = name.rpartition(".")  # SCRIPT.NAME: the param of that script alone
        if not sep or not param.isidentifier() or (dot and not scope.strip()) or not value.strip():
            raise DaydreamError(
                f"-p {pair!r}: write NAME=VALUE (or SCRIPT.NAME=VALUE for one script's), e.g. -p speedup=2"
            )
        out[name] = value.strip()
    return out


def workload(args: argparse.Namespace) -> Any:
    """The command's trace or job folder with how to read it (daydream.api.workload.Workload), built once."""
    from daydream.api.workload import Workload

    return Workload(
        args.trace,
        step=getattr(args, "step", None),
        et=getattr(args, "et", None),
        link=getattr(args, "link", None),
        jobs=getattr(args, "jobs", 1),
        ray=getattr(args, "ray", None),
    )


def run_options(args: argparse.Namespace) -> Any:
    """How the command runs its scripts (daydream.api.workload.RunOptions): --policy, --budget, --include-dir."""
    from daydream.api.workload import RunOptions
    from daydream.simulation import parse_policy

    return RunOptions(
        parse_policy(args.policy),
        getattr(args, "budget", None),
        getattr(args, "include_dir", None),
        getattr(args, "memory_gb", None),
    )
