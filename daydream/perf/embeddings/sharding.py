"""Embedding-table sharding for DLRM-style models: the six sharders of Lin et al. (TPDS, Table III), the cost of
a sharding plan, and a search for the best plan.

The model
---------
DLRM trains its embedding tables model-parallel and the rest data-parallel. With a global batch of B samples on
R ranks, each rank holds whole tables (no row or column split) and:

1. looks up all B samples of each of its own tables (forward), later applies their gradients (backward);
2. forward all-to-all: rank r sends the pooled outputs of its tables for the B/R samples of each other rank,
   ``sent_r = (R-1) * B/R * sum_{t on r} D_t * bytes_per_element``, and receives the pooled outputs of every
   other table for its own B/R samples, ``received_r = B/R * sum_{t not on r} D_t * bytes_per_element``;
3. the data-parallel rest of the step (MLPs, interaction, all-reduce, optimizer): ``other_us``, one number that
   the caller supplies (0 by default): the sharding does not change it;
4. backward all-to-all: the gradients of the pooled outputs go back the same way, the same sizes.

An all-to-all ends together on all ranks and is as large as its largest split: its size is the maximum over
ranks of max(sent, received) (the reference notes, section 4), priced by
:func:`daydream.perf.collectives.collective_us` (``"alltoall"``, that size, R, the link). One rank has no
all-to-all (0 us). The lookups on the ranks run in parallel and the all-to-all waits for the slowest, so

    predicted_us = max_r forward_r + alltoall_us + max_r backward_r + alltoall_us + other_us

where ``alltoall_us`` is the time of one all-to-all (each direction pays it once).

Lookup times come from :func:`daydream.perf.embeddings.embedding_bag.embedding_bag_us` (the batched embedding-bag
heuristic of
Lin et al. (HiPC 2022), L2-aware by default), one call per table (``tables=1``, all B samples), summed over the rank's
tables.
Per table rather than grouped per rank because the tables of a rank differ in E, L and D and the kernel model
takes one of each; in that model a batched kernel's time is the sum of its warp groups' traffic and the L2 share
depends on the batch, not on the table count, so the sum of per-table calls is what a batched kernel of the
rank's tables would cost. The per-table times do not depend on the plan and are computed once per search.

Assumptions and limits
----------------------
- Identical ranks (one device kind, one link for all pairs): relabelling ranks does not change a plan's cost,
  which the exhaustive search exploits (it enumerates set partitions of the tables, not all R^T assignments).
- ``pooling`` (L) is a mean and may be fractional: the kernel model takes whole lookups, so a fractional L is
  priced by linear interpolation between floor(L) and ceil(L), and L < 1 (down to 0) is priced as L = 1 (an
  empty bag still reads its offsets and writes its output; the one row read is overcounted).
- The kernel model is fp32's; ``bytes_per_element`` scales the all-to-all and the memory a table takes, not the
  lookup time.
- Memory: a rank whose tables' rows (sum of E * D * bytes_per_element) exceed ``memory_bytes`` makes the plan
  infeasible: its ``predicted_us`` is inf and ``reason`` says which rank holds what. Optimizer state,
  activations and the all-to-all buffers are not counted; pass a ``memory_bytes`` that leaves room for them.
- No data-loading imbalance and no overlap between the lookups and the all-to-all of another batch.

Search
------
:func:`shard` runs one sharder; :func:`compare_sharders` prices every sharder's plan (the paper's use: predict
each, pick the fastest). :func:`best_plan` searches beyond the sharders: exhaustive when R^T is at most
``exhaustive_limit`` (set partitions in lexicographic order, depth-first, pruned by a lower bound: the lookup
maxima and the sent bytes only grow as tables are added), else the sharders' plans improved by local search
(move one table, or swap two tables on different ranks, taking the best neighbour, while the predicted time
falls or, at equal time, the sum of squared per-rank lookup times falls; at most ``max_iterations`` steps), from
each of the six plans, the best result kept. Starting from every sharder rather than the best one alone costs
six descents of about a millisecond each and closed most of the gap to the optimum on skewed synthetic DLRMs
(tests/test_perf_sharding.py measures it). Memory excess is minimised first, so a search that starts from
plans that do not fit moves towards one that does.
:func:`brute_force` enumerates all R^T assignments, no pruning and no symmetry: a check on the others. Both
exhaustive searches return the lexicographically first optimal assignment, so they agree exactly.
"""

from __future__ import annotations

import itertools
import math
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import msgspec

from daydream.errors import DaydreamError, did_you_mean
from daydream.files import MAX_INPUT_NUMBER, clip, read_toml, shown_number
from daydream.perf.collectives import Link, collective_us, resolve_link
from daydream.perf.embeddings.embedding_bag import BagModel, embedding_bag_us
from daydream.perf.kernels.devices import Device, get_device

__all__ = [
    "BRUTE_FORCE_LIMIT",
    "SHARDERS",
    "PlanCost",
    "RankLoad",
    "ShardingProblem",
    "Table",
    "best_plan",
    "brute_force",
    "compare_sharders",
    "evaluate",
    "format_plans",
    "shard",
]

BRUTE_FORCE_LIMIT = 2_000_000  # assignments: about 10 s of plain enumeration (about 5 us each on one core)
DEFAULT_MAX_ITERATIONS = 1_000
# neighbours the local search looks at in all, over its starts: about 1.7 us each on one core (bench/bench_limits.py
# shard), so a search ends in about 20 s however many tables (an iteration looks at all tables x ranks moves and
# tables^2 / 2 swaps: 8 million at 4,096 tables); a search stopped by it says so in its plan's label
DEFAULT_MAX_NEIGHBOURS = 10_000_000


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


# A table's sizes, bounded so that no product of them (bytes, lookups, an all-to-all's message) leaves the range a
# float and the cost model hold: rows as docs/limits.md says (embeddings profile reads this bound too); widths past
# 65,536 and more than a million lookups per
# sample are no embedding table; 16 bytes an element is the widest type (complex128).
MAX_TABLE_ROWS = 268_435_456
MAX_TABLE_DIM = 65_536
MAX_POOLING = 1_000_000
MAX_ELEMENT_BYTES = 16
# ranks a plan spreads tables over: the sharders' work grows with them (65,536: about 2 s)
MAX_SHARD_RANKS = 65_536
MAX_SHARD_BATCH = 1 << 40  # samples a step: past any data set's, and every product of it stays a float


class Table(msgspec.Struct, frozen=True):
    """One embedding table: ``rows`` (E), ``dim`` (D), ``pooling`` (L, mean lookups per sample), and the bytes of
    one element (4: fp32)."""

    name: str
    rows: int
    dim: int
    pooling: float
    bytes_per_element: int = 4

    def __post_init__(self) -> None:
        for what, most in (("rows", MAX_TABLE_ROWS), ("dim", MAX_TABLE_DIM), ("bytes_per_element", MAX_ELEMENT_BYTES)):
            value = getattr(self, what)
            if not _positive_int(value) or value > most:
                raise DaydreamError(
                    f"table {self.name!r}: {what} must be a positive integer of at most {most:,}, got "
                    f"{shown_number(value)}"
                )
        p = self.pooling
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= MAX_POOLING:  # nan fails too
            raise DaydreamError(
                f"table {self.name!r}: pooling must be a number from 0 to {MAX_POOLING:,}, got {shown_number(p)}"
            )

    @property
    def nbytes(self) -> int:
        """The rows' bytes: E * D * bytes_per_element."""
        return self.rows * self.dim * self.bytes_per_element


# ---- sharders ---------------------------------------------------------------------------------------------------


def _naive(tables: Sequence[Table], ranks: int, seed: int) -> tuple[int, ...]:
    return tuple(i % ranks for i in range(len(tables)))


def _random(tables: Sequence[Table], ranks: int, seed: int) -> tuple[int, ...]:
    rng = random.Random(seed)
    return tuple(rng.randrange(ranks) for _ in tables)


def _greedy(cost: Callable[[Table], float]) -> Callable[[Sequence[Table], int, int], tuple[int, ...]]:
    """Tables by cost, largest first (equal costs: table order), each to the rank with the least total cost so far
    (equal totals: the lowest rank)."""

    def sharder(tables: Sequence[Table], ranks: int, seed: int) -> tuple[int, ...]:
        costs = [cost(t) for t in tables]
        load = [0.0] * ranks
        out = [0] * len(tables)
        for i in sorted(range(len(tables)), key=lambda i: -costs[i]):
            r = min(range(ranks), key=lambda r: load[r])
            out[i] = r
            load[r] += costs[i]
        return tuple(out)

    return sharder


# Table III of Lin et al. (TPDS): an index function (naive, random) or the cost function of a greedy sharder.
SHARDERS: dict[str, Callable[[Sequence[Table], int, int], tuple[int, ...]]] = {
    "naive": _naive,
    "random": _random,
    "size_greedy": _greedy(lambda t: t.rows),
    "lookup_greedy": _greedy(lambda t: t.pooling * t.dim),
    "norm_lookup_greedy": _greedy(lambda t: t.pooling / t.rows),
    "size_lookup_greedy": _greedy(lambda t: t.pooling * t.dim * math.log10(t.rows)),
}


def _sharder(name: str) -> Callable[[Sequence[Table], int, int], tuple[int, ...]]:
    if name in SHARDERS:
        return SHARDERS[name]
    hint = did_you_mean(str(name), SHARDERS)
    raise DaydreamError(f"unknown sharder {name!r}" + (f"; {hint}" if hint else "") + f"; known: {', '.join(SHARDERS)}")


def _check_ranks(ranks: int) -> None:
    if not _positive_int(ranks) or ranks > MAX_SHARD_RANKS:
        raise DaydreamError(
            f"sharding: ranks must be a positive integer of at most {MAX_SHARD_RANKS:,}, got {shown_number(ranks)}"
        )


def _check_tables(tables: Sequence[Table]) -> tuple[Table, ...]:
    tables = tuple(tables)
    if not tables:
        raise DaydreamError("sharding: no tables to shard")
    for i, t in enumerate(tables):
        if not isinstance(t, Table):
            raise DaydreamError(f"sharding: table {i} is a {type(t).__name__}, not a Table")
    return tables


def shard(tables: Sequence[Table], ranks: int, sharder: str, seed: int = 0) -> tuple[int, ...]:
    """The rank of each table under ``sharder`` (a name of :data:`SHARDERS`); ``seed`` drives ``random``."""
    fn = _sharder(sharder)
    _check_ranks(ranks)
    return fn(_check_tables(tables), ranks, seed)


# ---- the cost of a plan -----------------------------------------------------------------------------------------


class RankLoad(msgspec.Struct, frozen=True):
    """One rank of a plan: its tables (names), lookup times (us, all B samples), all-to-all bytes (each direction)
    and the bytes of its tables' rows."""

    rank: int
    tables: tuple[str, ...]
    forward_us: float
    backward_us: float
    sent_bytes: int
    received_bytes: int
    memory_bytes: int


class PlanCost(msgspec.Struct, frozen=True):
    """A plan and its predicted step time. ``sharder``: how the plan was made (a sharder, ``exhaustive``,
    ``brute force``, ``<sharder>+local search`` or a caller's label); ``assignment``: the rank of each table;
    ``alltoall_bytes``: the priced size (max over ranks of max(sent, received)); ``alltoall_us``: one all-to-all
    (forward and backward each pay it); ``reason``: why the plan is infeasible, empty when it is not (then
    ``predicted_us`` is inf)."""

    sharder: str
    assignment: tuple[int, ...]
    ranks: tuple[RankLoad, ...]
    alltoall_bytes: int
    alltoall_us: float
    predicted_us: float
    other_us: float = 0.0
    reason: str = ""

    @property
    def feasible(self) -> bool:
        return not self.reason

    @property
    def forward_us(self) -> float:
        """The slowest rank's forward lookups."""
        return max(r.forward_us for r in self.ranks)

    @property
    def backward_us(self) -> float:
        """The slowest rank's backward lookups."""
        return max(r.backward_us for r in self.ranks)


def _lookup_us(t: Table, batch: int, device: Device, backward: bool, l2_aware: bool) -> float:
    """One table's lookups for the whole batch; fractional pooling interpolated, below 1 priced as 1."""
    pooling = max(float(t.pooling), 1.0)
    lo, hi = math.floor(pooling), math.ceil(pooling)
    t_lo = embedding_bag_us(batch, t.rows, 1, lo, t.dim, device, backward=backward, model=BagModel(l2_aware=l2_aware))
    if hi == lo:
        return t_lo
    t_hi = embedding_bag_us(batch, t.rows, 1, hi, t.dim, device, backward=backward, model=BagModel(l2_aware=l2_aware))
    return t_lo + (pooling - lo) * (t_hi - t_lo)


@dataclass
class _Problem:
    """Everything about a plan's cost that does not depend on the plan, computed once."""

    tables: tuple[Table, ...]
    ranks: int
    batch: int
    link: Link
    other_us: float
    memory_bytes: float | None
    fwd: list[float] = field(default_factory=list)
    bwd: list[float] = field(default_factory=list)
    width: list[int] = field(default_factory=list)  # bytes of one pooled output: D * bytes_per_element
    mem: list[int] = field(default_factory=list)
    per_rank: int = 0  # B / R
    total_width: int = 0
    _a2a: dict[int, float] = field(default_factory=dict)

    @classmethod
    def make(cls, problem: ShardingProblem) -> _Problem:
        ranks, batch, device, link = problem.ranks, problem.batch, problem.device, problem.link
        other_us, memory_bytes, l2_aware = problem.other_us, problem.memory_bytes, problem.l2_aware
        tables = _check_tables(problem.tables)
        _check_ranks(ranks)
        if not _positive_int(batch) or batch > MAX_SHARD_BATCH:
            raise DaydreamError(
                f"sharding: batch must be a positive integer of at most {MAX_SHARD_BATCH:,}, got {shown_number(batch)}"
            )
        if batch % ranks:
            raise DaydreamError(
                f"sharding: batch {batch} is not divisible by {ranks} ranks: each rank takes batch/ranks samples of the"
                " data-parallel part (use a multiple of the rank count)"
            )
        # bounded as a file's numbers are (daydream.files.MAX_INPUT_NUMBER): a 400-digit int overflows the floats
        if (
            isinstance(other_us, bool)
            or not isinstance(other_us, (int, float))
            or not 0 <= other_us <= MAX_INPUT_NUMBER
        ):
            raise DaydreamError(f"sharding: other_us must be a finite time, not negative, got {shown_number(other_us)}")
        if memory_bytes is not None and (
            isinstance(memory_bytes, bool)
            or not isinstance(memory_bytes, (int, float))
            or not 0 < memory_bytes <= MAX_INPUT_NUMBER
        ):
            raise DaydreamError(
                "sharding: memory_bytes must be positive (bytes per rank, at most 10^18) or None, got "
                f"{shown_number(memory_bytes)}"
            )
        dev = device if isinstance(device, Device) else get_device(device)
        p = cls(tables, ranks, batch, resolve_link(link), float(other_us), memory_bytes)
        p.fwd = [_lookup_us(t, batch, dev, False, l2_aware) for t in tables]
        p.bwd = [_lookup_us(t, batch, dev, True, l2_aware) for t in tables]
        p.width = [t.dim * t.bytes_per_element for t in tables]
        p.mem = [t.nbytes for t in tables]
        p.per_rank = batch // ranks
        p.total_width = sum(p.width)
        return p

    def alltoall_us(self, nbytes: int) -> float:
        if self.ranks == 1:
            return 0.0
        t = self._a2a.get(nbytes)
        if t is None:
            t = self._a2a[nbytes] = collective_us("alltoall", nbytes, self.ranks, self.link)
        return t

    def sums(self, assignment: Sequence[int]) -> tuple[list[float], list[float], list[int], list[int]]:
        """Per-rank forward and backward lookup times, output widths and memory, summed in table order."""
        n = self.ranks
        f, b, w, m = [0.0] * n, [0.0] * n, [0] * n, [0] * n
        for t, r in enumerate(assignment):
            f[r] += self.fwd[t]
            b[r] += self.bwd[t]
            w[r] += self.width[t]
            m[r] += self.mem[t]
        return f, b, w, m

    def alltoall_bytes(self, w: Sequence[int]) -> int:
        return max(max((self.ranks - 1) * self.per_rank * wr, self.per_rank * (self.total_width - wr)) for wr in w)

    def excess(self, m: Sequence[int]) -> float:
        """Bytes over the per-rank memory, summed over ranks (0: the plan fits)."""
        cap = self.memory_bytes
        return 0.0 if cap is None else float(sum(max(0.0, mr - cap) for mr in m))

    def time(self, f: Sequence[float], b: Sequence[float], w: Sequence[int]) -> float:
        a2a = self.alltoall_us(self.alltoall_bytes(w))
        return max(f) + a2a + max(b) + a2a + self.other_us

    def key(self, assignment: Sequence[int]) -> tuple[float, float, float]:
        """What the searches minimise: memory excess, then predicted time, then the sum of squared per-rank lookup
        times (a tie-breaker that moves load off the busier ranks when the maximum does not change)."""
        f, b, w, m = self.sums(assignment)
        return self.excess(m), self.time(f, b, w), sum((x + y) ** 2 for x, y in zip(f, b))

    def check_assignment(self, assignment: Sequence[int]) -> tuple[int, ...]:
        a = tuple(assignment)
        if len(a) != len(self.tables):
            raise DaydreamError(f"sharding: the assignment has {len(a)} ranks for {len(self.tables)} tables")
        for i, r in enumerate(a):
            if not (isinstance(r, int) and not isinstance(r, bool) and 0 <= r < self.ranks):
                raise DaydreamError(
                    f"sharding: table {self.tables[i].name!r} is assigned to rank {r!r}, not one of 0..{self.ranks - 1}"
                )
        return a

    def plan(self, assignment: Sequence[int], label: str) -> PlanCost:
        a = self.check_assignment(assignment)
        f, b, w, m = self.sums(a)
        n, k = self.ranks, self.per_rank
        loads = tuple(
            RankLoad(
                r,
                tuple(t.name for t, rr in zip(self.tables, a) if rr == r),
                f[r],
                b[r],
                (n - 1) * k * w[r] if n > 1 else 0,
                k * (self.total_width - w[r]),
                m[r],
            )
            for r in range(n)
        )
        size = self.alltoall_bytes(w) if n > 1 else 0
        a2a = self.alltoall_us(size)
        reason = ""
        if self.excess(m) > 0:
            cap = self.memory_bytes
            over = [ld for ld in loads if ld.memory_bytes > cap]
            reason = "; ".join(
                f"rank {ld.rank} holds {ld.memory_bytes:,} bytes of tables ({', '.join(ld.tables)}), over its"
                f" {cap:,.0f}"
                for ld in over
            )
        predicted = math.inf if reason else self.time(f, b, w)
        return PlanCost(label, a, loads, size, a2a, predicted, self.other_us, reason)


class ShardingProblem(msgspec.Struct, frozen=True):
    """What a plan is sought for: the ``tables``, the ``ranks`` they are spread over, the global ``batch``, the GPU
    (``device``, a catalog name or a Device), the ``link`` the all-to-all crosses (a preset name, GB/s or a Link),
    the step's time outside the embeddings (``other_us``), each rank's memory for tables (``memory_bytes``; None:
    unbounded) and whether lookups are priced with the L2 term (``l2_aware``). Checked when a function reads it."""

    tables: Sequence[Table]
    ranks: int
    batch: int
    device: Device | str
    link: str | float | Link
    other_us: float = 0.0
    memory_bytes: float | None = None
    l2_aware: bool = True


def evaluate(problem: ShardingProblem, assignment: Sequence[int], label: str = "plan") -> PlanCost:
    """The cost of one plan: ``assignment[i]`` is the rank of ``problem.tables[i]``."""
    return _Problem.make(problem).plan(assignment, label)


def _sharder_plans(p: _Problem, seed: int) -> list[PlanCost]:
    plans = [p.plan(fn(p.tables, p.ranks, seed), name) for name, fn in SHARDERS.items()]
    return sorted(plans, key=lambda c: c.predicted_us)  # stable: equal times keep SHARDERS order


def compare_sharders(problem: ShardingProblem, seed: int = 0) -> list[PlanCost]:
    """Every sharder's plan, fastest first (equal times: :data:`SHARDERS` order; infeasible plans, at inf, last).
    ``seed`` drives the random sharder."""
    return _sharder_plans(_Problem.make(problem), seed)


# ---- search -----------------------------------------------------------------------------------------------------


def _no_plan(p: _Problem, how: str) -> DaydreamError:
    biggest = max(p.tables, key=lambda t: t.nbytes)
    return DaydreamError(
        f"sharding: {how} found no plan that fits {p.memory_bytes:,.0f} bytes per rank: the {len(p.tables)} tables take"
        f" {sum(p.mem):,} bytes on {p.ranks} ranks, the largest ({biggest.name!r}) {biggest.nbytes:,}"
    )


def _exhaustive(p: _Problem) -> tuple[int, ...] | None:
    """The lexicographically first optimal feasible assignment, or None when none fits.

    Depth-first over tables in order, each to a rank already used or to the next unused one (restricted growth
    strings: one assignment per set partition, the first of its relabellings). A branch is cut when its lower bound
    (max lookups so far, both directions, and the all-to-all priced at the largest sent bytes so far: all grow as
    tables are added) is no better than the best plan found, or when a rank's memory is over."""
    n, t_count = p.ranks, len(p.tables)
    cap = math.inf if p.memory_bytes is None else p.memory_bytes
    if n == 1:  # one plan; and no recursion as deep as the table count
        return (0,) * t_count if sum(p.mem) <= cap else None
    f, b, w, m = [0.0] * n, [0.0] * n, [0] * n, [0] * n
    a = [0] * t_count
    best: list[float] = [math.inf]
    best_a: list[tuple[int, ...] | None] = [None]
    sent = (n - 1) * p.per_rank

    def visit(t: int, used: int) -> None:
        if t == t_count:
            time = p.time(f, b, w)
            if time < best[0]:
                best[0], best_a[0] = time, tuple(a)
            return
        for r in range(min(used + 1, n)):
            # Saved and restored, not subtracted back: a leaf's sums are then exactly the fresh sums in table order
            # that brute force and evaluate compute, so all three agree to the bit.
            saved = f[r], b[r], w[r], m[r]
            f[r] += p.fwd[t]
            b[r] += p.bwd[t]
            w[r] += p.width[t]
            m[r] += p.mem[t]
            if m[r] <= cap:
                a2a = p.alltoall_us(sent * max(w))
                if max(f) + a2a + max(b) + a2a + p.other_us < best[0]:
                    a[t] = r
                    visit(t + 1, max(used, r + 1))
            f[r], b[r], w[r], m[r] = saved

    visit(0, 0)
    return best_a[0]


def _top3(values: Sequence[float]) -> list[tuple[float, int]]:
    """The three largest values with their ranks (fewer on fewer ranks), largest first."""
    return sorted(((v, r) for r, v in enumerate(values)), reverse=True)[:3]


def _max_but(top: list[tuple[float, int]], i: int, j: int) -> float:
    """The largest value of the ranks other than ``i`` and ``j`` (-inf where there is none)."""
    for v, r in top:
        if r != i and r != j:
            return v
    return -math.inf


class _Sums:
    """An assignment's per-rank sums, with what a neighbour's key needs in constant time (_local_search)."""

    def __init__(self, p: _Problem, a: Sequence[int]) -> None:
        self.p = p
        self.f, self.b, self.w, self.m = f, b, w, m = p.sums(a)
        self.top_f, self.top_b = _top3(f), _top3(b)
        self.c_sent, self.k = (p.ranks - 1) * p.per_rank, p.per_rank
        # each rank's all-to-all split (alltoall_bytes)
        self.top_g = _top3([max(self.c_sent * x, self.k * (p.total_width - x)) for x in w])
        self.cap = math.inf if p.memory_bytes is None else p.memory_bytes
        self.ex = [max(0.0, x - self.cap) for x in m]
        self.sq = [(x + y) ** 2 for x, y in zip(f, b)]
        self.total_ex, self.total_sq = sum(self.ex), sum(self.sq)

    def changed(self, i: int, j: int, df: float, db: float, dw: int, dm: int) -> tuple[float, float, float]:
        """The key (_Problem.key) with ``d*`` taken from rank i and given to rank j."""
        f, b, w, m, c_sent, k, total_width = self.f, self.b, self.w, self.m, self.c_sent, self.k, self.p.total_width
        fi, fj, bi, bj = f[i] - df, f[j] + df, b[i] - db, b[j] + db
        wi, wj = w[i] - dw, w[j] + dw
        size = max(_max_but(self.top_g, i, j), c_sent * wi, k * (total_width - wi), c_sent * wj, k * (total_width - wj))
        a2a = self.p.alltoall_us(int(size))
        time = max(_max_but(self.top_f, i, j), fi, fj) + a2a + max(_max_but(self.top_b, i, j), bi, bj) + a2a
        cap = self.cap
        excess = self.total_ex - self.ex[i] - self.ex[j] + max(0.0, m[i] - dm - cap) + max(0.0, m[j] + dm - cap)
        squares = self.total_sq - self.sq[i] - self.sq[j] + (fi + bi) ** 2 + (fj + bj) ** 2
        return (excess if cap != math.inf else 0.0), time + self.p.other_us, squares


def _local_search(
    p: _Problem,
    start: tuple[int, ...],
    max_iterations: int,
    max_neighbours: int = DEFAULT_MAX_NEIGHBOURS,
    work: Callable[[int], None] | None = None,
) -> tuple[tuple[int, ...], int, int, bool]:
    """Best-neighbour descent on :meth:`_Problem.key` over moves and swaps; the assignment and the steps taken.

    A neighbour changes two ranks' sums (a move: the table's rank and the one it goes to; a swap: the two tables'
    ranks, each by the difference of the tables), so its key is had in constant time from the current sums: the
    others' maxima from the three largest per quantity, the excess and the sum of squares less the two ranks' old
    terms plus their new ones. (Summed afresh per neighbour, in O(tables), ``shard`` grew as tables^3 an
    iteration: 256 tables took 22 s.) It stops before an iteration that would look at more than ``max_neighbours``
    in all. ``work``: called with the neighbours of each iteration, before it looks at them (a script's budget,
    limits.charge_work). Returns the assignment, the iterations taken, the neighbours looked at and whether
    ``max_neighbours`` stopped it."""
    a = list(start)
    t_count, n = len(a), p.ranks
    fwd, bwd, width, mem = p.fwd, p.bwd, p.width, p.mem
    key = p.key(a)
    neighbours = t_count * (n - 1) + t_count * (t_count - 1) // 2
    looked = 0
    for step in range(max_iterations):
        if looked + neighbours > max_neighbours:
            return tuple(a), step, looked, True
        looked += neighbours
        if work is not None:
            work(neighbours)
        changed = _Sums(p, a).changed
        best_key, best_move = key, None
        for t in range(t_count):
            old = a[t]
            for r in range(n):
                if r != old:
                    kk = changed(old, r, fwd[t], bwd[t], width[t], mem[t])
                    if kk < best_key:
                        best_key, best_move = kk, (t, r, -1)
        for t, u in itertools.combinations(range(t_count), 2):
            i, j = a[t], a[u]
            if i != j:  # t goes to j and u to i: rank i loses t and gains u
                kk = changed(i, j, fwd[t] - fwd[u], bwd[t] - bwd[u], width[t] - width[u], mem[t] - mem[u])
                if kk < best_key:
                    best_key, best_move = kk, (t, j, u)
        if best_move is None:
            return tuple(a), step, looked, False
        t, r, u = best_move
        before = tuple(a)
        if u >= 0:
            a[u] = a[t]
        a[t] = r
        new_key = p.key(a)  # afresh, in table order: the sums every other function computes
        if not new_key < key:  # the constant-time key and the fresh sums disagreed in the last bits: a fixed point
            return before, step, looked, False
        key = new_key
    return tuple(a), max_iterations, looked, False


def best_plan(
    problem: ShardingProblem,
    *,
    exhaustive_limit: int = 100_000,
    seed: int = 0,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    max_neighbours: int = DEFAULT_MAX_NEIGHBOURS,
    work: Callable[[int], None] | None = None,
) -> PlanCost:
    """The fastest plan found: exhaustive (labelled ``exhaustive``) when ranks ** tables <= ``exhaustive_limit``,
    else local search from each sharder's plan, the best result kept (``<sharder>+local search``, the sharder it
    started from; ``, stopped after N neighbours`` where ``max_neighbours`` ended it before it converged).
    DaydreamError when no plan that fits ``memory_bytes`` is found. ``work``: called with units of work as the
    search does it (a neighbour or an exhaustive search's branch each; a script's budget, limits.charge_work)."""
    p = _Problem.make(problem)
    ranks = p.ranks
    if not (isinstance(max_iterations, int) and max_iterations >= 0):
        raise DaydreamError(f"sharding: max_iterations must be a non-negative integer, got {max_iterations!r}")
    if ranks ** len(p.tables) <= exhaustive_limit:
        if work is not None:
            work(ranks ** len(p.tables) * len(p.tables))  # at most every assignment's branch, a table at a time
        found = _exhaustive(p)
        if found is None:
            raise _no_plan(p, "the exhaustive search")
        return p.plan(found, "exhaustive")
    best: tuple[tuple[float, float, float], tuple[int, ...], str] | None = None
    left, stopped = max_neighbours, False
    for start in _sharder_plans(p, seed):  # fastest first: equal results keep the faster start's label
        found, _, looked, bounded = _local_search(p, start.assignment, max_iterations, left, work)
        left -= looked
        stopped = stopped or bounded
        key = p.key(found)
        if best is None or key < best[0]:
            best = (key, found, start.sharder)
    assert best is not None
    bound = f", stopped after {max_neighbours - left:,} neighbours" if stopped else ""
    result = p.plan(best[1], f"{best[2]}+local search{bound}")
    if not result.feasible:
        raise _no_plan(p, "local search from every sharder's plan")
    return result


def brute_force(problem: ShardingProblem, *, limit: int = BRUTE_FORCE_LIMIT) -> PlanCost:
    """The optimum by plain enumeration of all ranks ** tables assignments (no symmetry, no pruning; the first
    optimal one in lexicographic order), labelled ``brute force``. DaydreamError above ``limit`` assignments, or when
    none fits ``memory_bytes``."""
    p = _Problem.make(problem)
    ranks = p.ranks
    count = ranks ** len(p.tables)
    if count > limit:
        raise DaydreamError(
            f"sharding: brute force over {len(p.tables)} tables on {ranks} ranks is {count:,} assignments, over the"
            f" limit of {limit:,}: use best_plan, or raise limit"
        )
    best, best_a = math.inf, None
    for a in itertools.product(range(ranks), repeat=len(p.tables)):
        f, b, w, m = p.sums(a)
        if p.excess(m) > 0:
            continue
        time = p.time(f, b, w)
        if time < best:
            best, best_a = time, a
    if best_a is None:
        raise _no_plan(p, "brute force")
    return p.plan(best_a, "brute force")


def format_plans(plans: Sequence[PlanCost]) -> str:
    """A plain-text table of plans, one a line, in the given order: label, predicted time, slowest lookups, the
    all-to-all, the assignment (or why the plan does not fit)."""
    rows = [
        f"{'plan':<28} {'predicted us':>13} {'fwd us':>9} {'bwd us':>9} {'a2a bytes':>12} {'a2a us':>8}  assignment"
    ]
    for c in plans:
        what = str(list(c.assignment)) if c.feasible else f"{list(c.assignment)} infeasible: {c.reason}"
        rows.append(
            f"{c.sharder:<28} {c.predicted_us:>13.1f} {c.forward_us:>9.1f} {c.backward_us:>9.1f} "
            f"{c.alltoall_bytes:>12,} {c.alltoall_us:>8.1f}  {what}"
        )
    return "\n".join(rows)


def load_tables(path: str | os.PathLike[str]) -> list[Table]:
    """Tables from a TOML file of ``[[table]]`` entries (``name``, ``rows``, ``dim``, ``pooling``, optional
    ``bytes_per_element``); errors name the file and the entry."""
    doc = read_toml(path, "tables file")  # the one checked opener: a FIFO or /dev/zero is refused, size bounded
    entries = doc.get("table")
    if not isinstance(entries, list) or not entries:
        raise DaydreamError(f"{path}: no [[table]] entries (each: name, rows, dim, pooling)")
    out = []
    for k, e in enumerate(entries, 1):
        if not isinstance(e, dict):
            raise DaydreamError(f"{path}: table #{k} is not a table of keys")
        unknown = sorted(set(e) - {"name", "rows", "dim", "pooling", "bytes_per_element"})
        if unknown:
            raise DaydreamError(
                f"{path}: table #{k} has unknown keys {', '.join(unknown)} (keys: name, rows, dim, pooling, "
                "bytes_per_element)"
            )
        try:
            out.append(msgspec.convert({"name": f"table{k}", **e}, Table))
        except msgspec.ValidationError as exc:
            raise DaydreamError(f"{path}: table #{k}: {clip(str(exc), 300)}") from None
        except DaydreamError as exc:  # a size out of bounds: said with the file (the message names the table)
            raise DaydreamError(f"{path}: {exc}") from None
    return out
