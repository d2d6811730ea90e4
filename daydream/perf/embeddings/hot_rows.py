"""Hot embedding rows under a GPU memory budget: FAE's estimator (Adnan et al., PVLDB 2022, section 4.1) and the exact
count it
stands in for, and what a hot set means for mini-batches.

A row of table z is hot when its accesses k reach t * T_z (T_z: the table's accesses), one threshold t for all
tables; a table under 1 MB is hot outright (FAE: it fits any GPU). The accesses are counted on a sample of x of the
inputs, so the cutoff on the sampled counts is H = t * T_z * x, which is t times the sampled accesses (Eq. 1).

The estimator does not scan a table's rows for each candidate t. It draws chunks of m = 1024 rows at random and
counts the hot ones in each (C_i, Eq. 2); with n chunks of the N = rows / m a table has, the hot rows are
rows / m * ybar within a Student-t interval ybar +- t_{a/2} sqrt((N - n) / N * s^2 / n) (Eq. 3-4; 99.9% as the
paper). The paper draws n = 35 chunks. Where a table's hot rows are rare (1% of the rows: 358 of 35 x 1024 drawn
rows), 35 chunks leave the interval +-17% wide, so here n starts at 35 and doubles until the interval is within
``precision`` (5%) of the estimate or every row has been drawn. Rows are drawn one by one (a chunk is m rows drawn
at random, not m neighbours), so a table whose rows are ordered by popularity is not mis-sampled. The threshold is
searched by bisection on log t (the hot-set size only grows as t falls) for the lowest t whose upper bound fits
the budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
import numpy as np

from daydream.errors import DaydreamError

CHUNK_ROWS = 1024  # m: rows per chunk (the paper's)
MIN_CHUNKS = 35  # n: the paper's chunk count; the CLT needs n >= 30
SMALL_TABLE_BYTES = 2**20  # tables under 1 MB are hot outright (the paper's rule)
CONFIDENCE = 0.999  # the paper's interval
PRECISION = 0.05  # draw chunks until the interval's half width is within this share of the estimate
SEARCH_STEPS = 60  # bisection steps on log t: far below a row's share of accesses


class TableCounts(msgspec.Struct):
    """One table's access counts: ``counts[r]``, how often row r was looked up in the sampled inputs."""

    name: str
    counts: np.ndarray
    row_bytes: int

    @property
    def rows(self) -> int:
        return int(self.counts.size)

    @property
    def accesses(self) -> int:
        return int(self.counts.sum(dtype=np.int64))

    @property
    def small(self) -> bool:
        return self.rows * self.row_bytes < SMALL_TABLE_BYTES


class HotRows(msgspec.Struct, frozen=True):
    """A table's hot rows at one threshold: the estimate, its interval, and how many rows were drawn for it."""

    estimate: float
    low: float
    high: float
    drawn: int


def cutoff(table: TableCounts, threshold: float) -> float:
    """H: the sampled accesses a row needs to be hot at ``threshold`` (Eq. 1, with x folded into the sampled T)."""
    return threshold * table.accesses


def exact_hot_rows(table: TableCounts, threshold: float) -> int:
    """The hot rows at ``threshold``, counted over every row."""
    if table.small:
        return table.rows
    if table.accesses == 0:
        return 0
    return int(np.count_nonzero(table.counts >= cutoff(table, threshold)))


def hot_mask(table: TableCounts, threshold: float) -> np.ndarray:
    """Which rows are hot (a boolean per row): the embedding classifier's output."""
    if table.small:
        return np.ones(table.rows, dtype=bool)
    if table.accesses == 0:
        return np.zeros(table.rows, dtype=bool)
    return table.counts >= cutoff(table, threshold)


def hot_access_fraction(table: TableCounts, mask: np.ndarray) -> float:
    """The share of the table's sampled lookups that hit hot rows (in-sample: the rows were chosen on these counts,
    so this overstates the share on other inputs; the profile measures that on its held-out inputs)."""
    total = table.accesses
    return float(table.counts[mask].sum(dtype=np.int64)) / total if total else 0.0


class RowSampler:
    """The rows drawn from one table, in the order they are drawn: the same draws serve every threshold, so the
    estimates of a search differ only by the threshold (the search stays monotone up to the interval's width)."""

    def __init__(self, table: TableCounts, rng: np.random.Generator) -> None:
        self.table = table
        self.rng = rng
        self.drawn = np.empty(0, dtype=table.counts.dtype)

    def counts(self, n_rows: int) -> np.ndarray:
        """The counts of the first ``n_rows`` rows drawn (without replacement), drawing more as needed."""
        rows = self.table.rows
        n_rows = min(n_rows, rows)
        if n_rows > self.drawn.size:
            if n_rows > rows // 4:  # many draws: a permutation is cheaper than rejecting repeats
                order = self.rng.permutation(rows)
            else:
                order = self.rng.choice(rows, size=min(rows, 2 * n_rows), replace=False)
            self.drawn = self.table.counts[order]
        return self.drawn[:n_rows]


def estimate_hot_rows(
    sampler: RowSampler,
    threshold: float,
    confidence: float = CONFIDENCE,
    precision: float = PRECISION,
    chunk_rows: int = CHUNK_ROWS,
    min_chunks: int = MIN_CHUNKS,
) -> HotRows:
    """The hot rows of one table at ``threshold`` from random chunks of its rows (module docstring)."""
    table = sampler.table
    if table.small:
        return HotRows(table.rows, table.rows, table.rows, 0)
    if table.accesses == 0:
        return HotRows(0.0, 0.0, 0.0, 0)
    h = cutoff(table, threshold)
    population = table.rows / chunk_rows  # N, in chunks
    n = min_chunks
    while True:
        drawn = sampler.counts(n * chunk_rows)
        if drawn.size >= table.rows:  # every row drawn: the count is exact
            hot = float(np.count_nonzero(drawn >= h))
            return HotRows(hot, hot, hot, int(drawn.size))
        per_chunk = (drawn >= h).reshape(n, chunk_rows).sum(axis=1)
        mean = float(per_chunk.mean())
        scale = table.rows / chunk_rows
        if mean == 0:
            # no hot row drawn: the interval is degenerate, so bound with the zero-count binomial bound instead
            # (with q = -ln(1 - confidence) / drawn of the rows hot, a draw of that many sees none with 1 - confidence)
            return HotRows(
                0.0, 0.0, min(-math.log1p(-confidence) / drawn.size * table.rows, table.rows), int(drawn.size)
            )
        spread = float(per_chunk.std(ddof=1))
        from scipy import stats  # slow to import: only when an estimate is made

        t = float(stats.t.ppf(0.5 + confidence / 2, n - 1))
        half = t * math.sqrt(max(population - n, 0.0) / population * spread**2 / n)
        if half <= precision * mean:
            return HotRows(
                mean * scale, max(mean - half, 0.0) * scale, min((mean + half) * scale, table.rows), int(drawn.size)
            )
        n *= 2


class Threshold(msgspec.Struct, frozen=True):
    """The threshold chosen for a budget and each table's hot rows at it."""

    threshold: float
    tables: list[HotRows]
    bytes_estimate: float
    bytes_high: float
    # every row the counts saw is hot and the budget has room left: the rows they never saw cannot be ranked
    unranked_room: bool = False


def _hot_bytes(tables: Sequence[TableCounts], rows: Sequence[HotRows], which: str) -> float:
    return sum(getattr(r, which) * t.row_bytes for t, r in zip(tables, rows))


def choose_threshold(
    tables: Sequence[TableCounts],
    budget_bytes: float,
    rng: np.random.Generator,
    exact: bool = False,
    confidence: float = CONFIDENCE,
    precision: float = PRECISION,
) -> Threshold:
    """The lowest threshold t whose hot set fits ``budget_bytes``: by the estimator's upper bound, or, with
    ``exact``, by counting every row. Raises when not even one row, or not even the small tables, fit."""
    if not tables:
        raise DaydreamError("no embedding tables to profile")
    smallest_row = min(t.row_bytes for t in tables)
    if budget_bytes < smallest_row:
        raise DaydreamError(f"the budget ({budget_bytes:,.0f} bytes) is smaller than one row ({smallest_row:,} bytes)")
    small = sum(t.rows * t.row_bytes for t in tables if t.small)
    if small > budget_bytes:
        raise DaydreamError(
            f"the tables under 1 MB, hot outright, take {small:,} bytes: more than the budget "
            f"({budget_bytes:,.0f} bytes)"
        )
    whole = sum(t.rows * t.row_bytes for t in tables)
    if whole <= budget_bytes:
        # every row fits, the ones no sampled input looked up too: all hot (t = 0), as counting everything finds;
        # the search below could not get there, its lowest threshold keeps a row no sampled input touched cold
        return Threshold(0.0, [HotRows(*(float(t.rows),) * 3, 0) for t in tables], float(whole), float(whole))
    samplers = [RowSampler(t, rng) for t in tables]

    def at(threshold: float) -> list[HotRows]:
        if exact:
            return [HotRows(*(float(exact_hot_rows(t, threshold)),) * 3, t.rows) for t in tables]
        return [estimate_hot_rows(s, threshold, confidence, precision) for s in samplers]

    # t above 1 makes no large table's row hot; below the least share of one access, every row seen is hot
    least = min((1.0 / t.accesses for t in tables if t.accesses and not t.small), default=1.0)
    lo, hi = math.log(least / 2), math.log(2.0)
    best = at(math.exp(hi))
    best_t = math.exp(hi)
    floor = False
    if _hot_bytes(tables, at(math.exp(lo)), "high") <= budget_bytes:  # everything seen fits
        best_t = math.exp(lo)
        best = at(best_t)
        floor = any(t.accesses and not t.small and np.count_nonzero(t.counts) < t.rows for t in tables)
    else:
        for _ in range(SEARCH_STEPS):
            mid = (lo + hi) / 2
            rows = at(math.exp(mid))
            if _hot_bytes(tables, rows, "high") <= budget_bytes:
                hi, best, best_t = mid, rows, math.exp(mid)
            else:
                lo = mid
            if hi - lo < 1e-3:  # t within 0.1%: far finer than the step between whole sampled counts
                break
    return Threshold(best_t, best, _hot_bytes(tables, best, "estimate"), _hot_bytes(tables, best, "high"), floor)


def random_batch_hot_fraction(hot_input_fraction: float, batch: int) -> float:
    """The share of mini-batches that are all hot when ``batch`` inputs are drawn at random: p ** B."""
    return hot_input_fraction**batch


def fae_batches(inputs: int, hot_inputs: int, batch: int) -> tuple[int, int]:
    """(hot, cold) mini-batches after FAE's input classifier: hot inputs fill whole hot batches, and the hot inputs
    left over ride in cold batches with the cold ones (a batch with one cold input is cold)."""
    if batch < 1:
        raise DaydreamError(f"the batch must be at least 1 input, not {batch}")
    hot = hot_inputs // batch
    cold = math.ceil((inputs - hot * batch) / batch)
    return hot, cold


def fae_batch_hot_fraction(inputs: int, hot_inputs: int, batch: int) -> float:
    """The share of an epoch's mini-batches that are hot with FAE's classification."""
    hot, cold = fae_batches(inputs, hot_inputs, batch)
    return hot / (hot + cold) if hot + cold else 0.0
