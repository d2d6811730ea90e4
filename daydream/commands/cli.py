"""The ``daydream`` command: a thin layer over the Python API."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import msgspec
from rich.console import Console

from daydream import signals
from daydream.errors import DaydreamError
from daydream.files import clip, input_number, json_bytes
from daydream.names import terminal_text
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
  DAYDREAM_DEBUG=1       an internal error shows its traceback"""


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
            out.append(textwrap.fill(line, max(20, width), initial_indent=indent, subsequent_indent=indent + hang,
                                     break_long_words=False, break_on_hyphens=False) or indent)  # fmt: skip
        return "\n".join(out)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="daydream", description="What-if simulation of deep-learning training from profiler traces.",
                                epilog=EPILOG, formatter_class=_Formatter)  # fmt: skip
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sim = sub.add_parser("simulate", help="replay a trace through the simulator and compare with the measurement")
    sim.add_argument("trace", metavar="TRACE",
                     help="Kineto trace JSON (.json or .json.gz), a folder of one trace per rank of a job, or Chakra .et files")  # fmt: skip
    sim.add_argument(
        "--step",
        default=None,
        help="ProfilerStep number or name, 'all', 'trace' (whole window), or an annotation name; default: a steady-state step",
    )
    sim.add_argument(
        "--et", default=None, metavar="FILE", help="PyTorch execution trace of the same run (default: found next to TRACE)"
    )
    sim.add_argument("--policy", default="earliest", help="schedule policy: earliest, fifo, priority:ATTR (default: earliest)")
    _job_options(sim)
    sim.add_argument("--by-workers", action=argparse.BooleanOptionalAction, default=None,
                     help="a job: simulate it by the workers (--jobs, --ray), each holding some ranks, none all of them "
                          "(default: for a job of more than 8 MiB of traces); --no-by-workers: every rank in this process")  # fmt: skip
    sim.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    sim.add_argument("--export-trace", metavar="OUT.json",
                     help="write the simulated timeline as Chrome-trace JSON (never onto an input of the run)")  # fmt: skip
    sim.set_defaults(func=_cmd_simulate)
    run = sub.add_parser("run", help="apply .whatif scripts to a trace and predict the iteration before and after")
    run.add_argument("trace", metavar="TRACE",
                     help="Kineto trace JSON (.json or .json.gz), or a folder of one trace per rank of a job")  # fmt: skip
    run.add_argument(
        "scripts", metavar="SCRIPT", nargs="+", help=".whatif scripts, applied in order (a bare name: the bundled library)"
    )
    _graph_options(run)
    _job_options(run)
    run.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    run.add_argument("--export-trace", metavar="OUT.json",
                     help="write the baseline and the predicted timelines as two processes of one Chrome-trace JSON (never onto an input of the run)")  # fmt: skip
    run.set_defaults(func=_cmd_run)
    cmp = sub.add_parser("compare", help="predict scenarios on one trace, ranked; save the results; catch regressions",
                         description="Predict every scenario of SCENARIOS.toml on TRACE, each on its own copy of the "
                         "graph, and rank them by predicted step time with the breakdown and what bounds each. "
                         "The file's format: python -c 'import daydream.api.compare as c; print(c.__doc__)', or "
                         "docs/compare.md.")  # fmt: skip
    cmp.add_argument("trace", metavar="TRACE",
                     help="Kineto trace JSON (.json or .json.gz), or a folder of one trace per rank of a job")  # fmt: skip
    cmp.add_argument("scenarios", metavar="SCENARIOS.toml", help="[[scenario]] tables (name, scripts, params, grid) and a [grid]")
    cmp.add_argument("--step", default=None, help="ProfilerStep number or name, 'all', 'trace', or an annotation name")
    cmp.add_argument("--et", default=None, metavar="FILE", help="PyTorch execution trace of the same run")
    cmp.add_argument("--policy", default="earliest", help="schedule policy before any script's schedule (default: earliest)")
    cmp.add_argument(
        "--memory-gb",
        type=_num,
        default=None,
        metavar="GiB",
        help="device memory a predicted peak must fit in (default: the trace's GPU's)",
    )
    _script_options(cmp)
    _link_option(cmp)
    cmp.add_argument("--jobs", type=_int, default=1, metavar="N",
                     help=f"worker processes that predict scenarios (default 1; {_CORES})")  # fmt: skip
    cmp.add_argument("--ray", default=None, metavar="ADDRESS",
                     help="predict scenarios on this Ray cluster (ray://host:10001, auto, or local; Ray optional)")  # fmt: skip
    cmp.add_argument("--json", action="store_true", help="print one JSON object (what --save writes) instead of tables")
    cmp.add_argument("--save", metavar="RESULTS.json", help="write the results with their provenance (never onto an input)")
    cmp.add_argument("--against", metavar="OLD.json", help="compare with saved results: exit 4 when a scenario regressed")
    cmp.add_argument("--tolerance", default="5%", metavar="PCT",
                     help="how much longer a predicted step may get before --against calls it a regression (default 5%%)")  # fmt: skip
    cmp.set_defaults(func=_cmd_compare)
    pln = sub.add_parser("plan", help="the best data/tensor/pipeline-parallel plan for N GPUs, from one GPU's trace",
                         description="Predict every (dp, tp, pp, micro-batches) plan for --gpus GPUs from one GPU's "
                         "trace (the ddp, tensor_parallel and pipeline_parallel scripts, as compare scenarios) and rank "
                         "them by throughput among those whose memory fits; docs/optimizations.md, Planning.")  # fmt: skip
    pln.add_argument(
        "trace",
        metavar="TRACE",
        help="one GPU's Kineto trace (.json or .json.gz) with modules and shapes (daydream record), or a job's folder (its first rank)",
    )
    pln.add_argument("--gpus", type=_int, required=True, metavar="N", help="GPUs to plan for")
    pln.add_argument("--memory-gb", type=_num, default=None, metavar="GiB",
                     help="memory of each GPU in GiB (default: the trace's GPU's)")  # fmt: skip
    pln.add_argument("--gpus-per-node", type=_int, default=8, metavar="N", help="GPUs in one node (default 8)")
    pln.add_argument("--link", default="auto", metavar="LINK",
                     help="link within a node: a preset or GB/s (default auto: the trace's GPU's NVLink or PCIe)")  # fmt: skip
    pln.add_argument("--inter", default="ib-ndr", metavar="LINK", help="one NIC between nodes, one per GPU (default ib-ndr)")
    pln.add_argument("--micro-batches", default=None, metavar="M,M,...",
                     help="micro-batch counts a pipeline may use (default: pp, 2 pp and 4 pp)")  # fmt: skip
    pln.add_argument(
        "--schedule", default="1f1b", choices=("1f1b", "gpipe", "interleaved"), help="pipeline schedule (default 1f1b)"
    )
    pln.add_argument("--sequence-parallel", action="store_true", help="tensor parallelism with Megatron's sequence parallelism")
    pln.add_argument("--max-tp", type=_int, default=None, metavar="N", help="the largest tensor-parallel group (default: a node)")
    pln.add_argument("--zero", type=int, default=0, choices=(0, 1, 2),
                     help="data parallelism's ZeRO stage: 1 shards the optimizer state, 2 the gradients too (default 0: DDP)")  # fmt: skip
    pln.add_argument("--batch", type=_int, default=None, metavar="B", help="the samples of the traced step (with --global-batch)")
    pln.add_argument("--global-batch", type=_int, default=None, metavar="G",
                     help="samples a step for every plan, G / dp a replica (default: each replica keeps the traced batch)")  # fmt: skip
    pln.add_argument("--top", type=_int, default=None, metavar="N", help="show the N best plans (default: all)")
    pln.add_argument("--step", default=None, help="ProfilerStep number or name, 'all', 'trace', or an annotation name")
    pln.add_argument("--et", default=None, metavar="FILE", help="PyTorch execution trace of the same run")
    pln.add_argument("--policy", default="earliest", help="schedule policy before any script's schedule (default: earliest)")
    _script_options(pln)
    pln.add_argument("--jobs", type=_int, default=1, metavar="N",
                     help=f"worker processes that predict plans (default 1; {_CORES})")  # fmt: skip
    pln.add_argument("--ray", default=None, metavar="ADDRESS",
                     help="predict plans on this Ray cluster (ray://host:10001, auto, or local; Ray optional)")  # fmt: skip
    pln.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    pln.set_defaults(func=_cmd_plan)
    rep = sub.add_parser("report", help="a report to share: XSP's layer and kernel tables, plots, one HTML page",
                         description="Simulate TRACE (and predict SCRIPTS, applied in order, if given), analyse the "
                         "baseline and the prediction as XSP does (layers, kernels by name and by layer with their "
                         "roofline class, streams' idle time, critical path, a verdict) and write --out: index.html "
                         "(opens from disk), the figures as PNG and SVG, report.json.")  # fmt: skip
    rep.add_argument("trace", metavar="TRACE",
                     help="Kineto trace JSON (.json or .json.gz), or a folder of one trace per rank of a job")  # fmt: skip
    rep.add_argument(
        "scripts", metavar="SCRIPT", nargs="*", help=".whatif scripts to predict, applied in order (none: the baseline alone)"
    )
    _graph_options(rep)
    _link_option(rep)
    rep.add_argument("--out", default="daydream-report", metavar="DIR", help="the folder to write (default: ./daydream-report)")
    rep.add_argument("--json", action="store_true", help="print the analyses as one JSON object (report.json) instead of tables")
    rep.set_defaults(func=_cmd_report)
    exp = sub.add_parser("export", help="write a trace, a job or a what-if as Chakra execution traces (ASTRA-sim's input)",
                         description="Write TRACE's graph - after SCRIPTS, applied in order, if given - as one MLCommons "
                         "Chakra execution trace per rank (DIR/NAME.RANK.et) and DIR/comm_group.json, through mlc-chakra "
                         "(pip install 'daydream-whatif[chakra]'). ASTRA-sim reads them; so does daydream simulate DIR. "
                         "What maps to what: docs/ecosystem.md.")  # fmt: skip
    exp.add_argument("trace", metavar="TRACE",
                     help="Kineto trace JSON (.json or .json.gz), a folder of one trace per rank of a job, or Chakra .et files")  # fmt: skip
    exp.add_argument(
        "scripts", metavar="SCRIPT", nargs="*", help=".whatif scripts applied first, in order (none: the graph as traced)"
    )
    _graph_options(exp)
    _job_options(exp)
    exp.add_argument("--chakra", required=True, metavar="DIR", help="the folder to write the .et files in (made if absent)")
    exp.add_argument("--world", type=_int, default=None, metavar="N",
                     help="ranks to write: the job's repeated (rank r of k stands for r, r + k, ...) or its first; default: the "
                          "ranks scale_out, ddp or fsdp set, else the trace's world")  # fmt: skip
    exp.add_argument("--ctrl-deps", action="store_true",
                     help="a thread's and a stream's order as ctrl_deps (default: every dependency a data dependency, the "
                          "only kind ASTRA-sim's ETFeeder reads)")  # fmt: skip
    exp.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    exp.set_defaults(func=_cmd_export)
    check = sub.add_parser("check", help="parse and check .whatif scripts without a trace")
    check.add_argument("scripts", metavar="SCRIPT", nargs="+")
    _script_options(check)
    check.set_defaults(func=_cmd_check)
    lst = sub.add_parser("list", help="list .whatif scripts with their docstrings and params")
    lst.add_argument("paths", metavar="PATH", nargs="*", help="scripts or directories (default: the bundled library)")
    lst.set_defaults(func=_cmd_list)
    repl = sub.add_parser("repl", help="change a trace's graph interactively, one statement at a time")
    repl.add_argument("trace", metavar="TRACE",
                      help="Kineto trace JSON (.json or .json.gz), or a folder of one trace per rank of a job")  # fmt: skip
    _graph_options(repl)
    _job_options(repl)
    repl.set_defaults(func=_cmd_repl)
    models = sub.add_parser("models", help="the performance models: their accuracy, the device catalog")
    msub = models.add_subparsers(dest="models_command", metavar="WHAT", required=True)
    acc = msub.add_parser("accuracy", help="each model's error (GMAE) on data it was not fitted on")
    acc.add_argument(
        "traces",
        metavar="TRACE",
        nargs="*",
        help="traces or directories to cross-check on as well (ranks of one job in one directory)",
    )
    acc.add_argument("--json", action="store_true", help='print {"models": [{"name", "gmae_pct", "n", "data"}]}')
    acc.set_defaults(func=_cmd_models_accuracy)
    dev = msub.add_parser("devices", help="the device catalog (kernels/devices.toml)")
    dev.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    dev.set_defaults(func=_cmd_models_devices)
    ker = msub.add_parser("kernels", help="the device-swap kernel model: its error per class and GPU, each GPU left out")
    ker.add_argument("--json", action="store_true", help='print {"data", "anchors", "accuracy": [...]}')
    ker.add_argument("--refit", metavar="DATA", nargs="+", help="refit on data sets of measured kernels (NeuSight layout, "
                     "or a GPU's kernel tables such as kernels/data/h100-sxm: each GPU and class from the first that "
                     "has it; needs scikit-learn: pip install 'daydream-whatif[calibrate]') and write the model to --out")  # fmt: skip
    ker.add_argument("--out", metavar="FILE", help="where --refit writes the model (default: the shipped one, "
                     "daydream/kernels/data/device_model.json)")  # fmt: skip
    ker.add_argument("--classes", default="gemm,conv,elementwise,norm", metavar="LIST",
                     help="the kernel classes --refit fits (default: all four)")  # fmt: skip
    ker.set_defaults(func=_cmd_models_kernels)
    sh = sub.add_parser("shard", help="embedding-table sharding plans of a DLRM-style model, by predicted time")
    sh.add_argument("tables", metavar="TABLES.toml", help="[[table]] entries: name, rows, dim, pooling (mean lookups per sample)")
    sh.add_argument("--ranks", type=_int, required=True, help="GPUs the tables are sharded over")
    sh.add_argument("--batch", type=_int, required=True, help="global batch (samples per step, all ranks)")
    sh.add_argument("--device", default="V100", help="GPU of the device catalog (default V100)")
    sh.add_argument("--link", default="nvlink2", help="interconnect preset or bus GB/s for the all-to-alls (default nvlink2)")
    sh.add_argument("--memory", type=_num, default=None, metavar="BYTES", help="table bytes a rank may hold")
    sh.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    sh.set_defaults(func=_cmd_shard)
    emb = sub.add_parser("embeddings", help="embedding-table access profiles: hot rows under a GPU budget (FAE)")
    esub = emb.add_subparsers(dest="embeddings_command", metavar="WHAT", required=True)
    prof = esub.add_parser("profile", help="the hot rows that fit a GPU budget, hot inputs and all-hot mini-batches",
                           description="Estimate, from a sample of the inputs, the embedding rows that are hot under "
                           "--budget (FAE's sampling, chunked confidence-interval estimator and threshold search), "
                           "and how many inputs and mini-batches touch only hot rows. The formats: python -c "
                           "'import daydream.api.embeddings as e; print(e.__doc__)', or docs/embeddings.md.")  # fmt: skip
    prof.add_argument("indices", metavar="INDICES", nargs="+", help="index data: .npy, .npz or .pt files (one row per input)")
    prof.add_argument("--budget", required=True, metavar="SIZE", help="GPU memory for hot rows, e.g. 512MB or 256MiB")
    prof.add_argument(
        "--dim", required=True, metavar="D", help="embedding dimension: one for all tables, or one per table (64,32,...)"
    )
    prof.add_argument("--dtype", default="fp32", help="element type of the rows: fp32, fp16, bf16, fp8, int8 (default fp32)")
    prof.add_argument("--rows", default=None, metavar="N", help="rows of every table, or one per table: indices are checked "
                      "against it (default: each table's largest index + 1)")  # fmt: skip
    prof.add_argument("--sample", default="5%", metavar="PCT", help="share of the inputs read (default 5%%, the paper's)")
    prof.add_argument("--batch", type=_int, default=None, metavar="B", help="mini-batch size: how many batches are all hot")
    prof.add_argument("--layout", choices=("columns", "bags"), default="columns",
                      help="an (N, K) .npy: K tables, one per column (default), or one table of K lookups per input")  # fmt: skip
    prof.add_argument("--exact", action="store_true", help="read every input and count every row: a check on small data")
    prof.add_argument("--classify-all", action="store_true",
                      help="find the hot inputs among all inputs (FAE's classifier's pass) instead of a held-out sample")  # fmt: skip
    prof.add_argument("--confidence", type=_num, default=0.999, help="confidence of the estimator's interval (default 0.999)")
    prof.add_argument("--seed", type=_int, default=0, help="seed of the sampling (default 0)")
    prof.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    prof.set_defaults(func=_cmd_embeddings_profile)
    val = sub.add_parser("validate", help="predict measured changes and compare: the accuracy ledger")
    val.add_argument("cases", metavar="CASES.toml", nargs="?", default=None,
                     help="cases file (default: validation/cases.toml); see daydream.api.validate for its format")  # fmt: skip
    val.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    val.add_argument("--jobs", type=_int, default=1, metavar="N",
                     help=f"worker processes, each taking one BEFORE setting's cases at a time (default 1; {_CORES})")  # fmt: skip
    val.add_argument("--errors-out", default=None, metavar="FILE.json",
                     help="write the ledger's errors by script, which prediction intervals read (daydream ships "
                          "kernels/data/ledger_errors.json, written so from validation/cases.toml)")  # fmt: skip
    val.set_defaults(func=_cmd_validate)
    cal = sub.add_parser("calibrate", help="measure kernel tables with torch on this machine and fit the MLP kernel models")
    cal.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N) (default: cpu)")
    cal.add_argument(
        "--kernels", default="gemm,elementwise", help="comma-separated tables to measure (default: gemm,elementwise)"
    )
    cal.add_argument(
        "--out", default="calibration", metavar="DIR", help="where the tables and models go (default: ./calibration)"
    )
    cal.add_argument(
        "--quick", action="store_true", help="a few shapes and runs: checks the setup in seconds, not a usable model"
    )
    cal.add_argument("--threads", type=_int, default=None, metavar="N", help="torch CPU threads (default: torch's setting)")
    cal.set_defaults(func=_cmd_calibrate)
    rec = sub.add_parser("record", help="run a PyTorch training program unchanged and record N steady steps",
                         description="Run `python SCRIPT.py ARGS` (or `python -m MODULE ARGS`) unchanged, profile --steps "
                         "training steps after --warmup steps, and write the trace, module/optimizer metadata and "
                         "(optionally) the execution trace to --out. A step ends with the iteration's last "
                         "optimizer step, or at each daydream.record.step() call.")  # fmt: skip
    rec.add_argument("--warmup", type=_int, default=2, metavar="W", help="steps to run before recording (default: 2)")
    rec.add_argument("--steps", type=_int, default=3, metavar="N", help="steps to record (default: 3)")
    rec.add_argument("--out", default=None, metavar="DIR", help="output directory (default: ./<script>-trace)")
    rec.add_argument("--execution-trace", action="store_true", help="also record the PyTorch execution trace")
    rec.add_argument("--embedding-stats", action="store_true",
                     help="count embedding-table row lookups in the warm-up steps (hot rows, pooling factor)")  # fmt: skip
    rec.add_argument("--profile-memory", action="store_true",
                     help="also record every allocation and free ([memory] events: bytes, totals allocated and reserved)")  # fmt: skip
    rec.add_argument("--keep-running", action="store_true", help="let the program finish instead of ending it once recorded")
    rec.add_argument("--json", action="store_true", help="print one JSON object (files, steps) instead of lines")
    rec.add_argument("program", nargs=argparse.REMAINDER, metavar="-- python SCRIPT.py ARGS", help="the program to run")
    rec.set_defaults(func=_cmd_record)
    demo = sub.add_parser("demo", help="the main job on the bundled example: replay it, predict a few optimizations")
    demo.add_argument("trace", metavar="TRACE", nargs="?", default=None, help="a trace instead of the bundled example")
    demo.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    demo.set_defaults(func=_cmd_demo)
    return p


# what every --jobs says of its bound (daydream.workers.worker_count)
_CORES = "at most one per core: a larger N is capped, with a warning; on a Ray cluster, N chunks"


def _job_options(p: argparse.ArgumentParser) -> None:
    _link_option(p)
    p.add_argument("--jobs", type=_int, default=None, metavar="N",
                   help=f"worker processes that build a job's rank graphs (default: one per 32 ranks; {_CORES})")  # fmt: skip
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="build a job's rank graphs on this Ray cluster (ray://host:10001, auto, or local; Ray optional)")  # fmt: skip


def _link_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--link", default=None, metavar="LINK",
                   help="a job's collectives priced over this link (preset or GB/s; default: fitted to the job's own transfers)")  # fmt: skip


def _graph_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="set a script param (a .whatif value: 2, 1.5ms, 4MB, \"text\", [1, 2]); SCRIPT.NAME=VALUE sets one "
                        "script's alone (-p ddp.link=ib-ndr); repeatable")  # fmt: skip
    p.add_argument("--step", default=None, help="ProfilerStep number or name, 'all', 'trace', or an annotation name")
    p.add_argument("--et", default=None, metavar="FILE", help="PyTorch execution trace of the same run")
    p.add_argument("--policy", default="earliest", help="schedule policy before any script's schedule (default: earliest)")
    p.add_argument("--memory-gb", type=_num, default=None, metavar="GiB",
                   help="device memory the predicted peak must fit in (default: the trace's GPU's, or a device swap's "
                        "target's)")  # fmt: skip
    _script_options(p)


def _script_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", type=_int, default=None, metavar="N",
                   help="units of work a script run may do, a unit at most about a microsecond (default: 60,000,000, "
                        "about a minute; 400 per task on graphs over 150,000 tasks; docs/language.md, Limits)")  # fmt: skip
    p.add_argument("--include-dir", action="append", default=[], metavar="DIR",
                   help="a folder `include` may read .whatif scripts from, besides the script's own folder tree and "
                        "the bundled library; repeatable")  # fmt: skip


def _int(text: str) -> int:
    """An argparse type: a whole number in ASCII digits, at most 10^18 in magnitude (daydream.files.input_number);
    what the flag means bounds it further where it is used."""
    try:
        return int(input_number(text, whole=True))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _num(text: str) -> float:
    """An argparse type: a finite number in ASCII digits, at most 10^18 in magnitude (daydream.files.input_number)."""
    try:
        return input_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _params(pairs: list[str]) -> dict[str, str]:
    from daydream.dsl.params import CommandLineParams

    out = CommandLineParams()  # errors about them say -p NAME=VALUE
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        scope, dot, param = name.rpartition(".")  # SCRIPT.NAME: the param of that script alone
        if not sep or not param.isidentifier() or (dot and not scope.strip()) or not value.strip():
            raise DaydreamError(f"-p {pair!r}: write NAME=VALUE (or SCRIPT.NAME=VALUE for one script's), e.g. -p speedup=2")
        out[name] = value.strip()
    return out


def _cmd_run(args: argparse.Namespace) -> int:
    from daydream.api.whatif import whatif
    from daydream.presentation.terminal import render_whatif

    # print statements show as they run (so they are there when an assert fails); --json keeps stdout to one object
    def show(line: str) -> None:
        print(terminal_text(line), file=sys.stderr if args.json else sys.stdout, flush=True)

    work, options = _workload(args), _options(args)
    inputs = work.inputs(args.scripts, options)
    _check_export(args, inputs)  # before the work: a refused output path costs no simulation
    result = whatif(work, args.scripts, _params(args.param), options, on_print=show)
    _emit(args, result, render_whatif, "predicted", inputs)
    return 0


def _workload(args: argparse.Namespace) -> Any:
    """The command's trace or job folder with how to read it (daydream.api.workload.Workload), built once."""
    from daydream.api.workload import Workload

    return Workload(args.trace, step=getattr(args, "step", None), et=getattr(args, "et", None), link=getattr(args, "link", None),
                    jobs=getattr(args, "jobs", 1), ray=getattr(args, "ray", None))  # fmt: skip


def _options(args: argparse.Namespace) -> Any:
    """How the command runs its scripts (daydream.api.workload.RunOptions): --policy, --budget, --include-dir."""
    from daydream.api.workload import RunOptions
    from daydream.simulation import parse_policy

    return RunOptions(parse_policy(args.policy), getattr(args, "budget", None), getattr(args, "include_dir", None),
                      getattr(args, "memory_gb", None))  # fmt: skip


def _check_export(args: argparse.Namespace, inputs: list[str]) -> None:
    from daydream.files import check_output_path

    if args.export_trace is not None:
        check_output_path(args.export_trace, inputs, "--export-trace")


def _cmd_compare(args: argparse.Namespace) -> int:
    from daydream.api.compare import EXIT_REGRESSED, check_against, compare, compare_inputs, load_saved, parse_tolerance, save
    from daydream.files import check_output_path
    from daydream.presentation.terminal import render_comparison

    # everything that can be refused is refused before the work
    tolerance = parse_tolerance(args.tolerance)
    options = _options(args)
    inputs = compare_inputs(args.trace, args.scenarios, args.et, args.include_dir)
    saved = load_saved(args.against) if args.against else None
    if args.save is not None:
        check_output_path(args.save, [*inputs, args.against], "--save")
    result = compare(_workload(args), args.scenarios, options, jobs=args.jobs, ray=args.ray)
    against = check_against(result, saved, args.against, tolerance) if saved is not None else None
    if args.save is not None:
        save(result, args.save)
    if args.json:
        out = result.to_dict()
        if against is not None:
            out["against"] = msgspec.to_builtins(against)
        _print_json(out)
    else:
        console = _console()
        render_comparison(result, console, against)
        if args.save is not None:
            console.print(f"results written to {args.save}", highlight=False, markup=False)
    if against is not None and against.regressed:
        for v in against.regressed:
            _say(f"daydream: regressed: {v.name}: {v.message}")
        return EXIT_REGRESSED
    failed = [s for s in result.scenarios if s.error is not None]
    if failed:
        _say(
            f"daydream: {len(failed)} of {len(result.scenarios)} scenarios not predicted (first: {failed[0].name}: {failed[0].error})"
        )
        return failed[0].exit_code
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from daydream.presentation.page import check_report_dir, write_report
    from daydream.presentation.terminal import render_report

    work, options = _workload(args), _options(args)
    check_report_dir(args.out, work.inputs(args.scripts, options), bool(args.scripts))  # before the work
    report = write_report(work, args.scripts, _params(args.param), args.out, options)
    if args.json:
        _print_json(report.to_dict())
    else:
        render_report(report, _console())
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from daydream.api.chakra import export_chakra

    def show(line: str) -> None:
        print(terminal_text(line), file=sys.stderr if args.json else sys.stdout, flush=True)

    result = export_chakra(_workload(args), args.chakra, args.scripts, _params(args.param), _options(args), args.world,
                           "ctrl" if args.ctrl_deps else "data", on_print=show)  # fmt: skip
    if args.json:
        _print_json(result.to_dict())
        return 0
    w = result.written
    for line in result.warnings:
        _say(f"daydream: warning: {line}")
    if result.predicted_us is not None:
        show(f"after {', '.join(Path(s).name for s in result.scripts)}: step {result.predicted_us / 1e3:,.3f} ms "
             f"(baseline {(result.baseline_us or 0.0) / 1e3:,.3f} ms), as daydream run predicts it")  # fmt: skip
    repeat = (
        f"; each of the {w.traced_ranks} traced ranks repeated (rank r stands for r, r + {w.traced_ranks}, ...)"
        if w.world > w.traced_ranks
        else ""
    )
    show(f"wrote {w.world:,} Chakra execution trace{'s' if w.world > 1 else ''} ({result.world_from}{repeat}): "
         f"{w.nodes:,} nodes, {w.dependencies:,} dependencies, {w.workload}.0.et"
         + (f" to {w.workload}.{w.world - 1}.et" if w.world > 1 else "") + f"; process groups in {w.comm_groups}")  # fmt: skip
    show(f"ASTRA-sim: --workload-configuration={w.workload} --comm-group-configuration={w.comm_groups}; "
         f"daydream: simulate {os.path.dirname(w.workload) or '.'}")  # fmt: skip
    return 0


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
    render_script_list(scripts, _console())
    # every broken script in full, after the others are listed; then the status a script error has
    broken = [s for s in scripts if s.error is not None]
    for s in broken:
        _say(f"daydream: error: {s.error}")
    if broken:
        _say(f"daydream: {len(broken)} of {len(scripts)} scripts cannot be used (above); the others are listed")
        return ScriptError.exit_code
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from daydream.perf.kernels import mlp
    from daydream.presentation.terminal import render_accuracy

    console = _console(stderr=True)
    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    fitted = mlp.calibrate(args.out, kernels, args.device, quick=args.quick, threads=args.threads,
                           progress=lambda line: console.print(line, highlight=False, markup=False))  # fmt: skip
    for path, _ in fitted:
        console.print(f"model written to {path}", highlight=False, markup=False)
    render_accuracy([acc for _, acc in fitted], _console())
    return 0


def _cmd_record(args: argparse.Namespace) -> int:
    from daydream.record.command import record_program

    report = record_program(args.program, args.out, args.warmup, args.steps, execution_trace=args.execution_trace,
                            embedding_stats=args.embedding_stats, profile_memory=args.profile_memory,
                            keep_running=args.keep_running)  # fmt: skip
    if args.json:
        _print_json(report.as_dict())
        return 0
    print(terminal_text(f"daydream record: {report.message}"))
    for path in report.files:
        print(terminal_text(f"  {path}"))
    if report.trace:
        print(terminal_text(f"next: daydream simulate {report.trace}"))
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from daydream.api.plan import PlanOptions, plan
    from daydream.presentation.terminal import render_plans

    counts = None
    if args.micro_batches is not None:
        try:
            counts = tuple(int(input_number(x, whole=True)) for x in args.micro_batches.split(","))
        except ValueError:
            raise DaydreamError(
                f"--micro-batches {args.micro_batches!r}: whole numbers separated by commas, e.g. 4,8,16"
            ) from None
    if args.top is not None and args.top < 1:
        raise DaydreamError(f"--top {args.top}: give at least 1")
    options = PlanOptions(args.gpus, args.memory_gb, args.gpus_per_node, args.link, args.inter, counts, args.schedule,
                          args.sequence_parallel, args.max_tp, batch=args.batch, global_batch=args.global_batch,
                          zero=args.zero)  # fmt: skip
    result = plan(_workload(args), options, _options(args), jobs=args.jobs, ray=args.ray)
    if args.json:
        _print_json(result.to_dict())
    else:
        render_plans(result, _console(), args.top)
    failed = [p for p in result.plans if p.predicted_us is None]
    if failed and len(failed) == len(result.plans):
        _say(f"daydream: no plan predicted (first: {failed[0].name}: {failed[0].error})")
        return 1
    return 0


def _cmd_shard(args: argparse.Namespace) -> int:
    from daydream.perf.embeddings.sharding import ShardingProblem, best_plan, compare_sharders, format_plans, load_tables

    tables = load_tables(args.tables)
    link = args.link
    plans = compare_sharders(ShardingProblem(tables, args.ranks, args.batch, args.device, link, memory_bytes=args.memory))
    best = best_plan(ShardingProblem(tables, args.ranks, args.batch, args.device, link, memory_bytes=args.memory))
    if args.json:
        _print_json({"sharders": [msgspec.to_builtins(p) for p in plans], "best": msgspec.to_builtins(best),
                     "tables": [t.name for t in tables]})  # fmt: skip
        return 0
    print(terminal_text(f"{len(tables)} tables on {args.ranks} ranks, batch {args.batch}, {args.device}, {args.link}: the "
                        "sharders' plans by predicted time (embedding lookups and all-to-alls)"))  # fmt: skip
    print(terminal_text(format_plans(plans)))  # table names from the tables file
    print("best plan found:")
    print(terminal_text(format_plans([best])))
    return 0


def _cmd_embeddings_profile(args: argparse.Namespace) -> int:
    from daydream.api.embeddings import ProfileOptions, parse_counts, parse_fraction, parse_size, profile

    options = ProfileOptions(dtype=args.dtype, sample=parse_fraction(args.sample),
                             rows=parse_counts(args.rows, "--rows") if args.rows else None, layout=args.layout,
                             exact=args.exact, confidence=args.confidence, seed=args.seed, classify_all=args.classify_all)  # fmt: skip
    result = profile(args.indices, parse_size(args.budget), parse_counts(args.dim, "--dim"), args.batch, options)
    if args.json:
        _print_json(result.to_dict())
    else:
        from daydream.presentation.terminal import render_embedding_profile

        render_embedding_profile(result, _console())
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from daydream.api.validate import DEFAULT_CASES, load_cases, validate
    from daydream.files import check_output_path
    from daydream.perf.trust.uncertainty import write_table
    from daydream.presentation.terminal import render_ledger

    cases = args.cases or DEFAULT_CASES
    if args.errors_out is not None:  # never onto the cases file, a trace of it or a script it names
        from daydream.dsl.library import script_inputs

        loaded = load_cases(cases)
        inputs = [
            cases,
            *(t for c in loaded for t in (*c.before, *c.after)),
            *script_inputs({s for c in loaded for s in c.scripts}),
        ]
        check_output_path(args.errors_out, inputs, "--errors-out")
    ledger = validate(cases, jobs=args.jobs)
    if args.errors_out is not None:
        write_table(args.errors_out, ledger.errors())
    if args.json:
        _print_json(ledger.to_dict())
    else:
        render_ledger(ledger, _console())
    return 0


def _cmd_models_accuracy(args: argparse.Namespace) -> int:
    from daydream.perf.accuracy_report import model_accuracy
    from daydream.presentation.terminal import render_accuracy

    rows = model_accuracy(args.traces)
    if args.json:
        _print_json({"models": [r.to_dict() for r in rows]})
    else:
        render_accuracy(rows, _console())
    return 0


def _cmd_models_devices(args: argparse.Namespace) -> int:
    from daydream.perf.kernels.devices import load_catalog
    from daydream.presentation.terminal import render_devices

    catalog = load_catalog()
    if args.json:
        _print_json({"devices": [_device_dict(d) for d in catalog.values()]})
    else:
        render_devices(list(catalog.values()), _console())
    return 0


def _cmd_models_kernels(args: argparse.Namespace) -> int:
    import msgspec

    from daydream.perf.kernels import device_model
    from daydream.presentation.terminal import render_kernel_model

    if args.out and not args.refit:
        raise DaydreamError("--out is where --refit writes the model: give --refit DATA")
    if args.refit:
        classes = [c.strip() for c in args.classes.split(",") if c.strip()]
        unknown = sorted(set(classes) - set(device_model.CLASSES))
        if unknown or not classes:
            raise DaydreamError(f"--classes {args.classes}: the classes are {', '.join(device_model.CLASSES)}")
        from daydream.files import check_output_path

        out = args.out or device_model.MODEL_PATH
        data = [str(p) for root in args.refit for p in Path(root).glob("**/*") if p.is_file()]
        check_output_path(out, data, "--out")  # never onto the data
        model = device_model.refit(args.refit, out, classes,
                                   progress=None if args.json else lambda r: print(f"  {r.kernel_class} without {r.target}: "
                                   f"{r.calibrated_gmae_pct:.1f}% (roofline {r.roofline_gmae_pct:.1f}%)", file=sys.stderr, flush=True))  # fmt: skip
    else:
        model = device_model.shipped_model()
        if model is None:
            raise DaydreamError(f"no device model at {device_model.MODEL_PATH}: refit one with --refit DATA")
    if args.json:
        _print_json({"data": model.data, "dtype": model.dtype, "shrink": model.shrink,
                     "anchors": msgspec.to_builtins(model.anchors), "accuracy": msgspec.to_builtins(model.accuracy)})  # fmt: skip
    else:
        render_kernel_model(model, _console())
    return 0


def _device_dict(d: Any) -> dict[str, Any]:
    from dataclasses import asdict

    out = asdict(d)
    out["peak_tflops"] = dict(d.peak_tflops)
    return out


def _print_json(obj: object) -> None:
    sys.stdout.buffer.write(json_bytes(obj, enc_hook=_json_value) + b"\n")


def _cmd_repl(args: argparse.Namespace) -> int:
    from daydream.commands.repl import run_repl

    return run_repl(_workload(args), _params(args.param), _options(args))


def _version() -> str:
    from daydream._version import __version__

    return __version__


def _json_value(obj: object) -> object:
    """numpy scalars and other number-likes in results, as JSON numbers."""
    if hasattr(obj, "item"):
        return obj.item()  # type: ignore[attr-defined]
    raise NotImplementedError(f"cannot write {type(obj).__name__} as JSON")


def _cmd_simulate(args: argparse.Namespace) -> int:
    from daydream.api.replay import replay
    from daydream.presentation.terminal import render_job, render_replay
    from daydream.simulation import parse_policy

    work = _workload(args)
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
                raise DaydreamError("--export-trace needs the whole job's timeline in one process: give --no-by-workers")
            job = replay_job(args.trace, step=args.step, link=args.link, jobs=args.jobs, policy=parse_policy(args.policy),
                             ray=args.ray, by_workers=by_workers)  # fmt: skip
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


def _console(stderr: bool = False) -> Console:
    """A console for the tables; names from traces and scripts reach it as data (Text), never as markup or emoji codes."""
    from daydream.presentation.console import terminal_console

    return terminal_console(stderr=stderr, soft_wrap=True)


def _emit(args: argparse.Namespace, result: Any, render: Callable[[Any, Console], None], what: str, inputs: list[str]) -> None:
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
        _print_json(result.to_dict())
        return
    console = _console()
    render(result, console)
    if args.export_trace is not None:
        console.print(f"{what} timeline written to {args.export_trace}", highlight=False, markup=False)


def _cmd_demo(args: argparse.Namespace) -> int:
    from daydream.api.demo import run_demo
    from daydream.presentation.terminal import render_demo

    demo = run_demo(args.trace)
    if args.json:
        _print_json(demo.to_dict())
    else:
        render_demo(demo, _console())
    return 0


def _say(line: str) -> None:
    """One line to stderr, cut to MAX_MESSAGE; never raises (an error about an error would hide the first)."""
    with contextlib.suppress(Exception):  # stderr closed or unencodable: nothing left to tell the user with
        print(terminal_text(clip(line)), file=sys.stderr, flush=True)


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
            _say(f"daydream: warning: {clip(text, 300)}")

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
        _say(f"daydream: error: {_describe(exc)}")
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
        _say("daydream: error: input too deeply nested")
        return 1
    except MemoryError:
        _debug_traceback()
        # a script's own is said at its statement (dsl/execute.py); this is the rest: a trace past its estimate
        _say("daydream: error: out of memory: the work needs more than this process may have (docs/limits.md, Memory)")
        return 1
    except OSError as exc:
        if (code := _signalled(exc)) is not None:
            return code
        if exc.filename is None and exc.errno in _FULL:  # stdout on a full disk (or /dev/full)
            _say(f"daydream: error: writing the output: {exc.strerror}")
            return 1
        if exc.filename is None:
            return _internal_error(exc)
        _debug_traceback()
        _say(f"daydream: error: {exc.filename}: {exc.strerror or _describe(exc)}")
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
        _say("daydream: terminated")
        return EXIT_TERMINATED
    if isinstance(cause, KeyboardInterrupt) or got == signal.SIGINT:
        _say("daydream: interrupted")
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
                _say(f"daydream: error: writing the output: {_describe(exc)}")
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
    _say(f"daydream: internal error: {type(exc).__name__}: {clip(_describe(exc), 500)} "
         f"(a bug in daydream: please report it with the command that caused it{hint})")  # fmt: skip
    return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
