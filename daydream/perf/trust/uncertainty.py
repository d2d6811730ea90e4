"""How far to trust a predicted step time: a 90% interval around it, from two measured sources.

- **Noise**: the trace's own steady steps vary (the step-to-step spread of the periods of every step but the first,
  ``graph.graph["steady_periods_us"]``); a measured step time of the changed program would vary as much.
- **Model error**: the error the library's scripts made on the validation ledger (``daydream validate``: measured
  before/after pairs), per script: the largest relative error of its cases (``kernels/data/ledger_errors.json``,
  written by ``daydream validate --errors-out``). Where the change leaves what was validated the part is widened
  (``WIDEN``) and marked ``extrapolated``: a script with no ledger case (its bound is the pooled one, twice), a
  param beyond the values its cases used, a script of the user's own.
- **Estimated gradient sizes**: where a script read gradient sizes the trace does not record (``ddp``, ``fsdp``,
  ``p3``, ... on a trace without shapes: sizes from the traced all-reduces, the forward ops' weight shapes or the
  optimizer's fused kernels, ``daydream.graph.gradients``), a ``gradient sizes`` part: the relative half-width of a
  step's gradient bytes that the estimate's source allows (at least ``ESTIMATE_FLOOR_PCT``), taken whole as the
  step's - an upper bound, the step moving less than the bytes since its compute does not - and marked
  extrapolated.

The parts are independent and combine in quadrature: half-width = sqrt(noise^2 + sum of the models'^2), in percent
of the predicted time; the interval is the prediction times (1 -+ that). The driving part is the largest.
Calibrated on the ledger itself, leave-one-out (each case's model part from the other cases): ``daydream validate``
reports how many measured AFTERs fall inside their intervals and the median half-width.

**Rankings** decide on the interval of the *difference* between two predictions of one trace, not on whether their
own intervals overlap (:func:`paired_half_width`): the trace's noise is common to both and cancels; a model part
both share (the same script with the same non-numeric params: the two differ only in degree) errs by the same
relative amount in both, so it holds their difference to that share of it; a part only one has keeps its whole
width. A scenario's place is one more than the number decidedly ahead of it (:func:`rank_paired`): ``1, 2=, 2=, 4``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

import msgspec

from daydream.files import write_atomically
from daydream.graph.gradients import used_estimate
from daydream.perf.paths import KERNELS_DIR
from daydream.stats import quantile

CONFIDENCE = 0.9
Z = 1.6449  # the standard normal's 95th percentile: a two-sided 90% interval is +-Z sigma
MAD_TO_SIGMA = 1.4826  # a normal's sigma over its median absolute deviation
PAIR_TO_SIGMA = math.sqrt(math.pi) / 2  # a normal's sigma from two draws: E|a - b| = 2 sigma / sqrt(pi)
WIDEN = 2.0  # what is extrapolated gets twice the bound
POOLED_QUANTILE = 0.9  # a script without enough cases: this quantile of every case's error
MIN_CASES = 2  # cases of a script for its own bound
LEDGER_ERRORS = KERNELS_DIR / "data" / "ledger_errors.json"


class Part(msgspec.Struct):
    """One source of uncertainty: its half-width (% of the predicted time), what it comes from, and whether the
    prediction leaves what was measured there."""

    name: str  # "noise", or the script's name ("batch_size")
    half_width_pct: float
    source: str
    extrapolated: bool = False
    # the model whose error this is: the script (library name, or its path) with its non-numeric params ("device
    # device=h100"); two predictions holding parts of one model err together (a ranking's paired difference). None:
    # the trace's noise, or a part saved before models were named (never shared)
    model: str | None = None


class Interval(msgspec.Struct):
    """A 90% interval around ``value_us``: [low_us, high_us], half-width in % of the value, the part that drives it."""

    value_us: float
    low_us: float
    high_us: float
    half_width_pct: float
    driver: str
    extrapolated: bool
    parts: list[Part]
    confidence: float = CONFIDENCE

    def text(self, scale: float = 1e-3, digits: int = 3) -> str:
        """``35.400 ms (33.900-36.800)``: the value and its interval, in ms by default; ``extrapolated`` said."""
        lo, hi = self.low_us * scale, self.high_us * scale
        mark = ", extrapolated" if self.extrapolated else ""
        return f"({lo:,.{digits}f}-{hi:,.{digits}f}{mark})"

    def overlaps(self, other: Interval) -> bool:
        return self.low_us <= other.high_us and other.low_us <= self.high_us

    def __repr__(self) -> str:
        """``Interval(31.799 ms, 90%: 28.412-35.186 ms, ±10.7%, driven by noise; parts: noise ±9.2%, batch_size
        ±5.4%)``: the figures in ms, as people read them (the fields keep the microseconds)."""
        parts = ", ".join(f"{p.name} ±{p.half_width_pct:.1f}%" for p in self.parts[:4])
        more = f" and {len(self.parts) - 4} more" if len(self.parts) > 4 else ""
        return (
            f"Interval({self.value_us / 1e3:,.3f} ms, {100 * self.confidence:.0f}%: {self.low_us / 1e3:,.3f}-"
            f"{self.high_us / 1e3:,.3f} ms, ±{self.half_width_pct:.1f}%, driven by {self.driver}"
            + (", extrapolated" if self.extrapolated else "")
            + (f"; parts: {parts}{more}" if parts else "")
            + ")"
        )


def gradient_sizes_part(graph: Any) -> Part | None:
    """The part for the estimated gradient sizes a change to ``graph`` read (the module docstring), None where it read
    none."""
    used = used_estimate(graph)
    # one estimate of the trace's gradients, whatever the scripts do with them: every prediction that reads it errs
    # alike (a ranking's pairs share it)
    return (
        None
        if used is None
        else Part("gradient sizes", used.error_pct, used.how(), True, f"gradient sizes from {used.source}")
    )


def noise_of(graph: Any) -> Part | None:
    """The noise part of a graph built from a trace: :func:`noise_part` of its steady steps' periods."""
    return noise_part(graph.graph.get("steady_periods_us") or [])


def noise_part(periods: Sequence[float]) -> Part | None:
    """The spread of a trace's steady step periods as a 90% half-width (% of their median): from their median
    absolute deviation with three or more, from the difference of the two with two; None with fewer (one step
    says nothing of its variation)."""
    ps = [float(p) for p in periods if math.isfinite(p) and p > 0]
    if len(ps) < 2:
        return None
    median = statistics.median(ps)
    if len(ps) >= 3:
        sigma = MAD_TO_SIGMA * statistics.median(abs(p - median) for p in ps)
        how = f"the median absolute deviation of the trace's {len(ps)} steady steps"
    else:
        sigma = PAIR_TO_SIGMA * abs(ps[0] - ps[1])
        how = "the difference of the trace's 2 steady steps"
    return Part("noise", 100.0 * Z * sigma / median, how)


class ScriptErrors(msgspec.Struct):
    """One script's errors on the ledger: each case's signed error (%) and the params its cases bound (numbers)."""

    errors_pct: list[float]
    params: dict[str, list[float]] = {}  # each numeric param: the values its cases used

    def bound_pct(self) -> float:
        return max(abs(e) for e in self.errors_pct)


class ErrorTable(msgspec.Struct):
    """What ``daydream validate --errors-out`` writes: the ledger's errors by script, of the step time (``scripts``)
    and of the step's peak memory (``memory``: its memory cases)."""

    cases_file: str
    scripts: dict[str, ScriptErrors]
    memory: dict[str, ScriptErrors] = {}

    def pooled_pct(self, excluding: str | None = None) -> float:
        errors = [abs(e) for name, s in self.scripts.items() if name != excluding for e in s.errors_pct]
        return quantile(errors, POOLED_QUANTILE) if errors else 10.0

    def memory_pooled_pct(self) -> float:
        errors = [abs(e) for s in self.memory.values() for e in s.errors_pct]
        return quantile(errors, POOLED_QUANTILE) if errors else 10.0


@cache
def shipped_table() -> ErrorTable | None:
    """The table that ships with daydream, from the ledger of validation/cases.toml; None where it is absent."""
    if not LEDGER_ERRORS.is_file():
        return None
    return msgspec.json.decode(LEDGER_ERRORS.read_bytes(), type=ErrorTable)


def model_parts(
    scripts: Iterable[str | None],
    params: Mapping[str, Any],
    table: ErrorTable | None = None,
    models: Iterable[str | None] | None = None,
) -> list[Part]:
    """A part per script run (its library name; None: a script of the user's own): its ledger bound (the largest
    error of its cases), widened and marked extrapolated where it has fewer than MIN_CASES cases (the pooled bound),
    none (a script of the user's own, one the ledger never ran) or where a numeric param lies beyond its cases'
    values. ``models``: each script's :func:`model_key` (default: its library name), what a ranking pairs parts by."""
    table = table if table is not None else shipped_table()
    pooled = table.pooled_pct() if table is not None else 10.0
    scripts = list(scripts)
    keys = list(models) if models is not None else scripts
    parts = []
    for name, model in zip(scripts, keys):
        entry = table.scripts.get(name) if table is not None and name is not None else None
        errors = list(entry.errors_pct) if entry is not None else []
        if name is None or not errors:
            who = "a script of your own" if name is None else "a script the ledger never ran"
            parts.append(
                Part(
                    name or "your script", WIDEN * pooled, f"{who}: twice the pooled bound ({pooled:.1f}%)", True, model
                )
            )
            continue
        if len(errors) >= MIN_CASES:
            bound, source = max(abs(e) for e in errors), f"the largest error of its {len(errors)} ledger cases"
        else:  # one case says little of the next: at least the pooled bound
            bound, source = max(pooled, abs(errors[0])), f"its 1 ledger case, at least the pooled bound ({pooled:.1f}%)"
        beyond = _beyond(params, entry.params if entry is not None else {})
        if beyond:
            parts.append(
                Part(name, WIDEN * bound, f"{source} ({bound:.1f}%), twice: {beyond} beyond the cases", True, model)
            )
        else:
            parts.append(Part(name, bound, source, model=model))
    return parts


def memory_parts(
    scripts: Iterable[str | None], params: Mapping[str, Any], table: ErrorTable | None = None
) -> list[Part]:
    """A part per script run for a predicted peak memory, as :func:`model_parts` makes them for a time, from the
    ledger's memory cases (``ErrorTable.memory``): a script's largest error there, at least the pooled memory error
    (the 0.9 quantile of every memory case's), or, without memory cases (or for a script of the user's own), twice
    the pooled error, marked extrapolated."""
    table = table if table is not None else shipped_table()
    memory = ErrorTable(table.cases_file if table else "", table.memory if table else {})
    pooled = memory.pooled_pct()
    # the memory cases are few and their errors near zero: a script's bound is at least the pooled one, so that one
    # exact case does not vouch for a program it has not seen
    return [
        p
        if p.extrapolated or p.half_width_pct >= pooled
        else msgspec.structs.replace(p, half_width_pct=pooled, source=f"{p.source}, at least the pooled {pooled:.1f}%")
        for p in model_parts(scripts, params, memory)
    ]


def model_key(script: str, params: Mapping[str, Any]) -> str:
    """What names one model for a ranking's pairs: the script (its library name, or its path) and the params that
    change what it does in kind, not degree - those that are not numbers (``device device=h100``). Two scenarios of
    one key differ only in numbers (``factor``, ``ranks``), so the model's relative error is common to both."""
    kinds = sorted((k, v) for k, v in params.items() if isinstance(v, bool) or not isinstance(v, (int, float)))
    return " ".join([script, *(f"{k}={v}" for k, v in kinds)])


def paired_half_width(a_us: float, a_parts: Sequence[Part], b_us: float, b_parts: Sequence[Part]) -> float:
    """The 90% half-width (us) of ``a_us - b_us``, two predictions of one trace with their intervals' parts: the
    trace's noise cancels (both replay the same steps); a model part both hold (one :attr:`Part.model`) errs by the
    same relative amount in both, so it bounds the difference to its share of the difference (the larger share of
    the two where one is widened); a part only one holds keeps its whole width of that prediction. Independent
    parts combine in quadrature, as in :func:`interval`. A baseline (the trace replayed, no model) has no parts."""
    a_models = {p.model: p for p in a_parts if p.model is not None and p.name != "noise"}
    b_models = {p.model: p for p in b_parts if p.model is not None and p.name != "noise"}
    diff = abs(a_us - b_us)
    total = 0.0
    for key in a_models.keys() & b_models.keys():
        total += (max(a_models[key].half_width_pct, b_models[key].half_width_pct) / 100.0 * diff) ** 2
    for value, parts, other in ((a_us, a_parts, b_models), (b_us, b_parts, a_models)):
        for p in parts:
            if p.name != "noise" and (p.model is None or p.model not in other):
                total += (p.half_width_pct / 100.0 * value) ** 2
    return math.sqrt(total)


def decided(a_us: float, a_parts: Sequence[Part], b_us: float, b_parts: Sequence[Part]) -> bool:
    """Whether the paired difference of two predictions holds no zero: which is smaller is what the evidence says."""
    return abs(a_us - b_us) > paired_half_width(a_us, a_parts, b_us, b_parts)


class Paired(msgspec.Struct, frozen=True):
    """One prediction against another of the same trace (its baseline): the difference ``difference_us`` (this one
    less the other), the 90% half-width of that difference (:func:`paired_half_width`), and what they say together:
    ``faster``, ``slower``, or ``not decided`` where the interval of the difference holds zero."""

    verdict: str
    difference_us: float
    half_width_us: float

    def __repr__(self) -> str:
        return (
            f"Paired({self.verdict}: {self.difference_us / 1e3:+,.3f} ms, ±{self.half_width_us / 1e3:,.3f} ms at 90%)"
        )


def versus_baseline(predicted_us: float, parts: Sequence[Part], baseline_us: float) -> Paired:
    """A prediction against its baseline (the trace replayed, which no model priced) by their paired difference,
    whose interval is the prediction's model parts alone: the trace's noise cancels."""
    half = paired_half_width(predicted_us, parts, baseline_us, [])
    diff = predicted_us - baseline_us
    verdict = "not decided" if not abs(diff) > half else "faster" if diff < 0 else "slower"
    return Paired(verdict, diff, half)


def rank_paired(items: Sequence[tuple[float, Sequence[Part]]]) -> list[tuple[int, list[int]]]:
    """Places of predictions of one trace (``(value, parts)``, smaller better: a step time, or time per sample): each
    one more than the number of items decidedly smaller (:func:`decided`), and the items tied with it (indices), in
    the order given. Ties whose predictions cannot be told apart share a place: ``1, 2=, 2=, 4``."""
    out = []
    for i, (v, parts) in enumerate(items):
        ahead, tied = 0, []
        for j, (w, other) in enumerate(items):
            if j == i:
                continue
            if decided(v, parts, w, other):
                ahead += w < v
            else:
                tied.append(j)
        out.append((1 + ahead, tied))
    return out


def _beyond(params: Mapping[str, Any], validated: Mapping[str, list[float]]) -> str:
    """The params whose value lies outside the values the ledger's cases used (``factor = 8 (cases: 0.5-2)``)."""
    out = []
    for name, values in validated.items():
        v = params.get(name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not values:
            continue
        lo, hi = min(values), max(values)
        if not lo - 1e-9 <= v <= hi + 1e-9:
            out.append(f"{name} = {v:g} (cases: {lo:g}" + (f"-{hi:g})" if hi != lo else ")"))
    return ", ".join(out)


def device_part(swaps: Mapping[str, Mapping[str, Any]] | None, step_us: float) -> Part | None:
    """The kernels a device swap moved (``roofline.count_swap`` tallies them per target GPU): each kernel's expected
    error (the measured-kernels model's leave-one-GPU-out error for its class and target; the roofline ratio's for a
    kernel the model does not price) weighted by its new time, as a share of the step - as if the errors did not
    average out over kernels, since much of them is the GPU's (its efficiency), not the kernel's. Extrapolated where
    most of that time is on a GPU or in a dtype the model has no measured kernels of."""
    if not swaps:
        return None
    time_us = sum(float(t.get("time_us", 0.0)) for t in swaps.values())
    error_us = sum(float(t.get("error_us", 0.0)) for t in swaps.values())
    extrapolated_us = sum(float(t.get("extrapolated_us", 0.0)) for t in swaps.values())
    modelled = sum(int(t.get("modelled", 0)) for t in swaps.values())
    kernels = sum(int(t.get("kernels", 0)) for t in swaps.values())
    if time_us <= 0 or kernels == 0:
        return None
    half = 100.0 * error_us / max(time_us, step_us)
    extrapolated = extrapolated_us > 0.5 * time_us
    source = (
        f"the kernel model's error per kernel, {modelled:,} of {kernels:,} kernels priced by it, the rest by the "
        f"roofline ratio"
        + (" (mostly extrapolated: a GPU or dtype the model has no measured kernels of)" if extrapolated else "")
    )
    return Part("device", half, source + _read_as(swaps), extrapolated)


def _read_as(swaps: Mapping[str, Mapping[str, Any]]) -> str:
    """Where a target GPU without measured kernels was read as its chip's measured one (``roofline.count_swap``
    tallies it): said (an H200 as the H100 SXM), so that "extrapolated" says from what."""
    said = [f"{key} read as {t['read_as']}, its chip's measured GPU" for key, t in swaps.items() if t.get("read_as")]
    return f"; {', '.join(said)}" if said else ""


def interval(value_us: float, parts: Sequence[Part | None]) -> Interval:
    """The 90% interval of ``value_us`` from independent ``parts`` (quadrature); no part: a zero-width interval."""
    kept = [p for p in parts if p is not None]
    half = math.sqrt(sum(p.half_width_pct**2 for p in kept))
    driver = max(kept, key=lambda p: p.half_width_pct).name if kept else "none"
    frac = half / 100.0
    return Interval(
        value_us=value_us,
        low_us=value_us * max(0.0, 1 - frac),
        high_us=value_us * (1 + frac),
        half_width_pct=half,
        driver=driver,
        extrapolated=any(p.extrapolated for p in kept),
        parts=kept,
    )


def numeric_params(params: Mapping[str, Any]) -> dict[str, float]:
    """The params that are numbers (not booleans): the ones a ledger's cases bound by value."""
    return {
        k: float(v)
        for k, v in params.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


def write_table(path: str | os.PathLike[str], table: ErrorTable) -> None:
    write_atomically(
        path, json.dumps(msgspec.to_builtins(table), indent=1, sort_keys=True).encode() + b"\n", "--errors-out"
    )
