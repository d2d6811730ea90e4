"""Embedding-table sharding as .whatif functions (daydream/perf/embeddings/sharding.py): a plan by a sharder of Lin et
al. (TPDS) or
the best one found, and a plan's per-rank load. transforms/sharding.whatif applies them to a job's graph.

Tables are given as lists, one entry per table: ``rows`` (E), ``dims`` (D; one number for all tables), ``pooling``
(L, mean lookups per sample). A plan is a list of ranks, one per table.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from daydream.dsl.functions import Cost, is_whole, number_argument, register_function, type_name
from daydream.dsl.limits import MAX_LIST, charge_work
from daydream.dsl.model_functions import trace_ranks
from daydream.errors import DaydreamError


def _tables(fn: str, rows: Any, dims: Any, pooling: Any) -> list[Any]:
    from daydream.perf.embeddings.sharding import Table

    if not isinstance(rows, list) or not rows:
        raise DaydreamError(f"{fn}(): ROWS is a list of each table's row count, got {type_name(rows)}")
    if len(rows) > min(MAX_LIST, 4096):
        raise DaydreamError(f"{fn}(): at most 4096 tables, got {len(rows)}")
    n = len(rows)
    dims = dims if isinstance(dims, list) else [dims] * n
    pooling = pooling if isinstance(pooling, list) else [pooling] * n
    if len(dims) != n or len(pooling) != n:
        raise DaydreamError(
            f"{fn}(): {n} tables, but {len(dims)} dims and {len(pooling)} poolings (one per table, or one number)"
        )
    out = []
    for i, (e, d, p) in enumerate(zip(rows, dims, pooling, strict=True)):
        e, d = number_argument(e, fn, f"rows of table {i}"), number_argument(d, fn, f"dim of table {i}")
        p = number_argument(p, fn, f"pooling of table {i}")
        if not (is_whole(e) and is_whole(d) and 1 <= e <= 2**40 and 1 <= d <= 2**16):
            raise DaydreamError(
                f"{fn}(): table {i} needs whole rows (1 to 2**40) and dim (1 to 65536), got {e} and {d}"
            )
        out.append(Table(f"t{i}", int(e), int(d), float(p)))
    return out


def _problem_args(graph: nx.DiGraph, fn: str, batch: Any, ranks: Any) -> tuple[int, int, Any]:
    from daydream.perf.kernels.devices import device_of_graph

    b = number_argument(batch, fn, "batch")
    n = number_argument(ranks, fn, "ranks") if ranks is not None else float(trace_ranks(graph))
    if not (is_whole(b) and is_whole(n) and 1 <= n <= 2**20 and 1 <= b <= 2**40):
        raise DaydreamError(f"{fn}(): batch and ranks are whole numbers >= 1, got {batch} and {ranks}")
    device = device_of_graph(graph)
    if device is None:
        raise DaydreamError(
            f"{fn}(): the lookups are priced on the trace's GPU, and the trace names none the device catalog holds"
        )
    return int(b), int(n), device


def _plan(
    graph: nx.DiGraph,
    sharder: Any,
    rows: Any,
    dims: Any,
    pooling: Any,
    batch: Any,
    ranks: Any = None,
    link: Any = "nvlink4",
) -> list[int]:
    from daydream.perf.embeddings.sharding import ShardingProblem, best_plan, shard

    fn = "shard_plan"
    tables = _tables(fn, rows, dims, pooling)
    b, n, device = _problem_args(graph, fn, batch, ranks)
    if isinstance(sharder, list):
        return _checked_plan(fn, sharder, len(tables), n)
    if not isinstance(sharder, str):
        raise DaydreamError(
            f'{fn}(): SHARDER is a sharder\'s name, "best", or a list of ranks, not {type_name(sharder)}'
        )
    if sharder == "best":
        if n ** len(tables) > 100_000 and len(tables) * n > 4096:
            raise DaydreamError(
                f"{fn}(): {len(tables)} tables on {n} ranks is past the search's bound in a script; "
                "use daydream shard, or a sharder"
            )
        # the search's work charged as it goes: a neighbour looked at takes about 1.7 us (perf/embeddings/sharding.py)
        found = best_plan(ShardingProblem(tables, n, b, device, link), work=lambda units: charge_work(3 * units))
        return list(found.assignment)
    return list(shard(tables, n, sharder))


def _checked_plan(fn: str, plan: list[Any], tables: int, ranks: int) -> list[int]:
    if len(plan) != tables or not all(is_whole(x) and 0 <= x < ranks for x in plan):
        raise DaydreamError(
            f"{fn}(): a plan is one rank (0 to {ranks - 1}) per table, {tables} of them; got {plan[:20]}"
        )
    return [int(x) for x in plan]


def _evaluate(
    graph: nx.DiGraph, fn: str, plan: Any, rows: Any, dims: Any, pooling: Any, batch: Any, ranks: Any, link: Any
) -> Any:
    """The sharding model's cost of ``plan`` (daydream.perf.embeddings.sharding.PlanCost), the arguments checked for
    ``fn``."""
    from daydream.perf.embeddings.sharding import ShardingProblem, evaluate

    tables = _tables(fn, rows, dims, pooling)
    b, n, device = _problem_args(graph, fn, batch, ranks)
    if not isinstance(plan, list):
        raise DaydreamError(
            f"{fn}(): PLAN is a list of ranks, one per table (shard_plan gives one), not {type_name(plan)}"
        )
    return evaluate(ShardingProblem(tables, n, b, device, link), _checked_plan(fn, plan, len(tables), n))


def _plan_loads(
    graph: nx.DiGraph, plan: Any, rows: Any, dims: Any, pooling: Any, batch: Any, ranks: Any = None
) -> list[Any]:
    cost = _evaluate(graph, "plan_loads", plan, rows, dims, pooling, batch, ranks, "nvlink4")  # the link prices no load
    return [[r.forward_us, r.backward_us, r.sent_bytes, r.received_bytes] for r in cost.ranks]


def _plan_time(
    graph: nx.DiGraph,
    plan: Any,
    rows: Any,
    dims: Any,
    pooling: Any,
    batch: Any,
    ranks: Any = None,
    link: Any = "nvlink4",
) -> float:
    return float(_evaluate(graph, "plan_time", plan, rows, dims, pooling, batch, ranks, link).predicted_us)


# each table's lookups priced by the kernel model (forward and backward, a fractional pooling twice): about 100 us
# a table, 10 units an item of the arguments (a table is three or four of them), and the model's own 50 a call
_TABLES_COST = Cost(per_call=50, per_item=10)

register_function(
    "plan_time",
    _plan_time,
    5,
    7,
    'plan_time(PLAN, ROWS, DIMS, POOLING, BATCH, ranks = none, link = "nvlink4"): the sharding model\'s time of a'
    " plan's embedding part (us): the slowest rank's forward and backward lookups and two all-to-alls over link",
    keywords=("ranks", "link"),
    cost=_TABLES_COST,
)
register_function(
    "shard_plan",
    _plan,
    5,
    7,
    'shard_plan(SHARDER, ROWS, DIMS, POOLING, BATCH, ranks = none, link = "nvlink4"): the rank of each embedding table'
    " (a list) under SHARDER: naive, random, size_greedy, lookup_greedy, norm_lookup_greedy, size_lookup_greedy (Lin et"
    ' al., TPDS), "best" (the fastest plan the search finds: exhaustive on small cases), or a list of ranks (checked'
    " and returned). ROWS, POOLING: one per table; DIMS: one per table or one for all; BATCH: the global batch; ranks:"
    " the job's by default; lookups priced on the trace's GPU, all-to-alls over link",
    keywords=("ranks", "link"),
    cost=_TABLES_COST,
)
register_function(
    "plan_loads",
    _plan_loads,
    5,
    6,
    "plan_loads(PLAN, ROWS, DIMS, POOLING, BATCH, ranks = none): per rank of a plan, [forward lookups us, backward "
    "lookups us, all-to-all bytes sent, received] by the sharding model of Lin et al. (TPDS)",
    keywords=("ranks",),
    cost=_TABLES_COST,
)
