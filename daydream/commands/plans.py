"""The commands that plan a job: plan (data, tensor and pipeline parallelism), shard (embedding tables), embeddings
(hot rows)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import msgspec

from daydream.commands.arguments import CORES, add_script_options, integer, number, run_options, workload
from daydream.commands.output import print_json, say, tables_console
from daydream.errors import DaydreamError
from daydream.files import input_number
from daydream.names import terminal_text

if TYPE_CHECKING:
    from daydream.commands.arguments import Commands


def add_plan(sub: Commands) -> None:
    pln = sub.add_parser(
        "plan",
        help="the best data/tensor/pipeline-parallel plan for N GPUs, from one GPU's trace",
        description=(
            "Predict every (dp, tp, pp, micro-batches) plan for --gpus GPUs from one GPU's "
            "trace (the ddp, tensor_parallel and pipeline_parallel scripts, as compare scenarios) and rank "
            "them by throughput among those whose memory fits; docs/optimizations.md, Planning."
        ),
    )
    pln.add_argument(
        "trace",
        metavar="TRACE",
        help=(
            "one GPU's Kineto trace (.json, .json.gz or .json.xz) with modules and shapes (daydream record), or a job's"
            " folder (its first rank)"
        ),
    )
    pln.add_argument("--gpus", type=integer, required=True, metavar="N", help="GPUs to plan for")
    pln.add_argument(
        "--memory-gb",
        type=number,
        default=None,
        metavar="GiB",
        help="memory of each GPU in GiB (default: the trace's GPU's)",
    )
    pln.add_argument("--gpus-per-node", type=integer, default=8, metavar="N", help="GPUs in one node (default 8)")
    pln.add_argument(
        "--link",
        default="auto",
        metavar="LINK",
        help="link within a node: a preset or GB/s (default auto: the trace's GPU's NVLink or PCIe)",
    )
    pln.add_argument(
        "--inter", default="ib-ndr", metavar="LINK", help="one NIC between nodes, one per GPU (default ib-ndr)"
    )
    pln.add_argument(
        "--micro-batches",
        default=None,
        metavar="M,M,...",
        help="micro-batch counts a pipeline may use (default: pp, 2 pp and 4 pp)",
    )
    pln.add_argument(
        "--schedule", default="1f1b", choices=("1f1b", "gpipe", "interleaved"), help="pipeline schedule (default 1f1b)"
    )
    pln.add_argument(
        "--sequence-parallel", action="store_true", help="tensor parallelism with Megatron's sequence parallelism"
    )
    pln.add_argument(
        "--max-tp", type=integer, default=None, metavar="N", help="the largest tensor-parallel group (default: a node)"
    )
    pln.add_argument(
        "--zero",
        type=int,
        default=0,
        choices=(0, 1, 2),
        help="data parallelism's ZeRO stage: 1 shards the optimizer state, 2 the gradients too (default 0: DDP)",
    )
    pln.add_argument(
        "--batch", type=integer, default=None, metavar="B", help="the samples of the traced step (with --global-batch)"
    )
    pln.add_argument(
        "--global-batch",
        type=integer,
        default=None,
        metavar="G",
        help="samples a step for every plan, G / dp a replica (default: each replica keeps the traced batch)",
    )
    pln.add_argument("--top", type=integer, default=None, metavar="N", help="show the N best plans (default: all)")
    pln.add_argument("--step", default=None, help="ProfilerStep number or name, 'all', 'trace', or an annotation name")
    pln.add_argument("--et", default=None, metavar="FILE", help="PyTorch execution trace of the same run")
    pln.add_argument(
        "--policy", default="earliest", help="schedule policy before any script's schedule (default: earliest)"
    )
    add_script_options(pln)
    pln.add_argument(
        "--jobs", type=integer, default=1, metavar="N", help=f"worker processes that predict plans (default 1; {CORES})"
    )
    pln.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="predict plans on this Ray cluster (ray://host:10001, auto, or local; Ray optional)",
    )
    pln.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    pln.set_defaults(func=_cmd_plan)


def add_shard(sub: Commands) -> None:
    sh = sub.add_parser("shard", help="embedding-table sharding plans of a DLRM-style model, by predicted time")
    sh.add_argument(
        "tables", metavar="TABLES.toml", help="[[table]] entries: name, rows, dim, pooling (mean lookups per sample)"
    )
    sh.add_argument("--ranks", type=integer, required=True, help="GPUs the tables are sharded over")
    sh.add_argument("--batch", type=integer, required=True, help="global batch (samples per step, all ranks)")
    sh.add_argument("--device", default="V100", help="GPU of the device catalog (default V100)")
    sh.add_argument(
        "--link", default="nvlink2", help="interconnect preset or bus GB/s for the all-to-alls (default nvlink2)"
    )
    sh.add_argument("--memory", type=number, default=None, metavar="BYTES", help="table bytes a rank may hold")
    sh.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    sh.set_defaults(func=_cmd_shard)


def add_embeddings(sub: Commands) -> None:
    emb = sub.add_parser("embeddings", help="embedding-table access profiles: hot rows under a GPU budget (FAE)")
    esub = emb.add_subparsers(dest="embeddings_command", metavar="WHAT", required=True)
    prof = esub.add_parser(
        "profile",
        help="the hot rows that fit a GPU budget, hot inputs and all-hot mini-batches",
        description=(
            "Estimate, from a sample of the inputs, the embedding rows that are hot under "
            "--budget (FAE's sampling, chunked confidence-interval estimator and threshold search), "
            "and how many inputs and mini-batches touch only hot rows. The formats: python -c "
            "'import daydream.api.embeddings as e; print(e.__doc__)', or docs/embeddings.md."
        ),
    )
    prof.add_argument(
        "indices", metavar="INDICES", nargs="+", help="index data: .npy, .npz or .pt files (one row per input)"
    )
    prof.add_argument("--budget", required=True, metavar="SIZE", help="GPU memory for hot rows, e.g. 512MB or 256MiB")
    prof.add_argument(
        "--dim",
        required=True,
        metavar="D",
        help="embedding dimension: one for all tables, or one per table (64,32,...)",
    )
    prof.add_argument(
        "--dtype", default="fp32", help="element type of the rows: fp32, fp16, bf16, fp8, int8 (default fp32)"
    )
    prof.add_argument(
        "--rows",
        default=None,
        metavar="N",
        help=(
            "rows of every table, or one per table: indices are checked "
            "against it (default: each table's largest index + 1)"
        ),
    )
    prof.add_argument(
        "--sample", default="5%", metavar="PCT", help="share of the inputs read (default 5%%, the paper's)"
    )
    prof.add_argument(
        "--batch", type=integer, default=None, metavar="B", help="mini-batch size: how many batches are all hot"
    )
    prof.add_argument(
        "--layout",
        choices=("columns", "bags"),
        default="columns",
        help="an (N, K) .npy: K tables, one per column (default), or one table of K lookups per input",
    )
    prof.add_argument(
        "--exact", action="store_true", help="read every input and count every row: a check on small data"
    )
    prof.add_argument(
        "--classify-all",
        action="store_true",
        help="find the hot inputs among all inputs (FAE's classifier's pass) instead of a held-out sample",
    )
    prof.add_argument(
        "--confidence", type=number, default=0.999, help="confidence of the estimator's interval (default 0.999)"
    )
    prof.add_argument("--seed", type=integer, default=0, help="seed of the sampling (default 0)")
    prof.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    prof.set_defaults(func=_cmd_embeddings_profile)


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
    options = PlanOptions(
        args.gpus,
        args.memory_gb,
        args.gpus_per_node,
        args.link,
        args.inter,
        counts,
        args.schedule,
        args.sequence_parallel,
        args.max_tp,
        batch=args.batch,
        global_batch=args.global_batch,
        zero=args.zero,
    )
    result = plan(workload(args), options, run_options(args), jobs=args.jobs, ray=args.ray)
    if args.json:
        print_json(result.to_dict())
    else:
        render_plans(result, tables_console(), args.top)
    failed = [p for p in result.plans if p.predicted_us is None]
    if failed and len(failed) == len(result.plans):
        say(f"daydream: no plan predicted (first: {failed[0].name}: {failed[0].error})")
        return 1
    return 0


def _cmd_shard(args: argparse.Namespace) -> int:
    from daydream.perf.embeddings.sharding import (
        ShardingProblem,
        best_plan,
        compare_sharders,
        format_plans,
        load_tables,
    )

    tables = load_tables(args.tables)
    link = args.link
    plans = compare_sharders(
        ShardingProblem(tables, args.ranks, args.batch, args.device, link, memory_bytes=args.memory)
    )
    best = best_plan(ShardingProblem(tables, args.ranks, args.batch, args.device, link, memory_bytes=args.memory))
    if args.json:
        print_json(
            {
                "sharders": [msgspec.to_builtins(p) for p in plans],
                "best": msgspec.to_builtins(best),
                "tables": [t.name for t in tables],
            }
        )
        return 0
    print(
        terminal_text(
            f"{len(tables)} tables on {args.ranks} ranks, batch {args.batch}, {args.device}, {args.link}: the "
            "sharders' plans by predicted time (embedding lookups and all-to-alls)"
        )
    )
    print(terminal_text(format_plans(plans)))  # table names from the tables file
    print("best plan found:")
    print(terminal_text(format_plans([best])))
    return 0


def _cmd_embeddings_profile(args: argparse.Namespace) -> int:
    from daydream.api.embeddings import ProfileOptions, parse_counts, parse_fraction, parse_size, profile

    options = ProfileOptions(
        dtype=args.dtype,
        sample=parse_fraction(args.sample),
        rows=parse_counts(args.rows, "--rows") if args.rows else None,
        layout=args.layout,
        exact=args.exact,
        confidence=args.confidence,
        seed=args.seed,
        classify_all=args.classify_all,
    )
    result = profile(args.indices, parse_size(args.budget), parse_counts(args.dim, "--dim"), args.batch, options)
    if args.json:
        print_json(result.to_dict())
    else:
        from daydream.presentation.terminal import render_embedding_profile

        render_embedding_profile(result, tables_console())
    return 0
