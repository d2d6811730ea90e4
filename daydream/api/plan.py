"""The best way to train a model on N GPUs, from one GPU's trace: ``daydream plan``.

Every plan (dp, tp, pp, micro-batches) whose product is the GPU count - tensor parallelism within a node (tp divides
``gpus_per_node``), pipeline stages no more than the model's blocks - is predicted as a scenario of ``compare``: the
scripts ``ddp``, ``tensor_parallel`` and ``pipeline_parallel`` in that order with each one's params (``ddp.ranks``,
``tensor_parallel.tp``, ...). Ranks are placed as Megatron-LM places them (tensor parallelism innermost, then data,
then pipeline): a tensor-parallel group within a node over its link; each data-parallel group spans nodes once it has
more ranks than a node holds of it (``gpus_per_node / tp`` GPUs a node, each with its NIC), reducing only its rank's
part of the gradients (``ddp.share``: the largest stage's, split Linears by tp); pipeline stages over the link between
nodes once the plan spans more than one.

Each plan keeps the traced batch per model replica (weak scaling: dp replicas process dp times the samples of the
trace's step), or with a fixed ``global_batch`` gives each replica global_batch / dp samples (``batch_size`` first),
so plans are ranked by throughput - samples per second over the traced GPU's: the plan's samples a step over the
trace's x the trace's step time / the plan's - among those that fit in ``memory_gb``; plans whose intervals overlap
share a rank. A plan's memory is what its fullest rank holds (daydream.graph.model_memory): parameters, gradients and
optimizer state of its stage (split by tp; with ``zero``, sharded over dp), DDP's buckets, and the activations of the
micro-batches its schedule keeps in flight.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import msgspec

from daydream.api.compare import Bound, Scenario, compare
from daydream.api.workload import RunOptions, Workload
from daydream.dsl.model_functions import compute_dtype
from daydream.errors import DaydreamError
from daydream.graph.model_memory import SCHEDULES, Parallelism, RankMemory, model_memory, rank_memory
from daydream.graph.pipeline import blocks, cut_stages
from daydream.graph.tensor_parallel import split_pairs
from daydream.perf.trust.uncertainty import Interval, rank_paired
from daydream.units import brief_repr

GiB = 2**30
# a plan's memory is the model's (daydream.graph.model_memory): its largest error on the programs whose memory
# bench/bench_model_memory.py measures (8.9%, 4.3% their geometric mean) bounds its 90% interval
MEMORY_MODEL_ERROR_PCT = 9.0
MAX_PLANS = 2_000  # the plans of one search: bounded work


class PlanOptions(msgspec.Struct, frozen=True):
    """What a search may choose from and the machine it plans for: ``gpus`` in nodes of ``gpus_per_node`` joined
    by ``inter`` (a NIC per GPU), ``link`` within a node ("auto": the trace's GPU's own); GPU memory ``memory_gb``
    (None: the trace's GPU's); ``micro_batches``: the counts a pipeline may cut the batch into (None: pp, 2 pp and
    4 pp), run in ``schedule``'s order (interleaved: 2 model chunks a rank); ``max_tp``: the largest tensor-parallel
    group. ``global_batch`` (with ``batch``, the traced step's samples): every plan processes that many samples a
    step, a replica global_batch / dp of them (``batch_size`` scales its work), in whole micro-batches. ``zero``: data
    parallelism with Megatron's distributed optimizer (ZeRO stage 1: optimizer state sharded over dp; 2: gradients too;
    ``ddp -p zero``)."""

    gpus: int
    memory_gb: float | None = None
    gpus_per_node: int = 8
    link: str = "auto"
    inter: str = "ib-ndr"
    micro_batches: tuple[int, ...] | None = None
    schedule: str = "1f1b"
    sequence_parallel: bool = False
    max_tp: int | None = None
    param_bytes: int = (
        4  # bytes per parameter element (and its gradient): fp32, as PyTorch's mixed precision keeps them
    )
    batch: int | None = None  # the samples of the traced step (with global_batch)
    global_batch: int | None = None  # the samples of every plan's step (None: each replica keeps the traced batch)
    zero: int = 0  # ZeRO stage of data parallelism: 1 shards the optimizer state, 2 the gradients too

    def replica_batch(self, dp: int) -> float | None:
        """The samples a model replica processes a step under a fixed global batch (None: the traced batch)."""
        return None if self.global_batch is None else self.global_batch / dp


class Layout(msgspec.Struct, frozen=True):
    """One plan's shape: data-, tensor- and pipeline-parallel degrees and the micro-batches of its pipeline."""

    dp: int
    tp: int
    pp: int
    micro_batches: int

    @property
    def name(self) -> str:
        return f"dp={self.dp} tp={self.tp} pp={self.pp}" + (f" m={self.micro_batches}" if self.pp > 1 else "")


class PlanResult(msgspec.Struct):
    """A plan's prediction (or why there is none), its throughput and its memory."""

    __repr__ = brief_repr  # one screen, whatever it holds

    name: str
    layout: Layout
    scripts: list[str]
    params: dict[str, object]  # the scenario's, as given (SCRIPT.NAME)
    predicted_us: float | None
    interval: Interval | None
    throughput: float | None  # samples/s over the traced GPU's: dp x samples per replica x baseline / predicted
    memory: list[RankMemory]  # each pipeline rank's (one for pp = 1)
    memory_bytes: float  # the fullest rank's
    fits: bool | None  # memory_bytes within the GPU's memory (None: the memory is not known)
    bound: Bound | None = None
    # memory_bytes' 90% interval: the plan's memory model's largest error on measured programs (MEMORY_MODEL_ERROR_PCT)
    memory_low_bytes: float | None = None
    memory_high_bytes: float | None = None
    error: str | None = None
    rank: int | None = None  # its place among the plans that fit: one more than those decidedly ahead in throughput
    ties: list[str] = []


class Plans(msgspec.Struct):
    """The search's results: the plans that fit by throughput, then those that do not, then those not predicted."""

    trace: str
    device: str | None
    gpus: int
    gpus_per_node: int
    memory_bytes: float | None  # the GPU memory a plan must fit in
    baseline_us: float  # the traced step, simulated
    measured_us: float
    optimizer: str | None
    parameters: int  # the model's, from the step's gradients
    gradient_sizes: (
        str  # where their sizes came from: shapes, execution trace, collectives, weight shapes, optimizer kernels
    )
    plans: list[PlanResult]
    # the one traced GPU's memory by the same model (the plans' before): state and activations of the traced step
    baseline_memory_bytes: float | None = None
    memory_source: str = (
        "shapes"  # a plan's memory is the model's, from the trace's shapes (daydream.graph.model_memory)
    )
    batch: int | None = None  # the traced step's samples, where given
    global_batch: int | None = None  # every plan's samples a step (None: each replica keeps the traced batch)
    notes: list[str] = []
    warnings: list[str] = []

    @property
    def best(self) -> PlanResult | None:
        return next((p for p in self.plans if p.predicted_us is not None and p.fits is not False), None)

    def __repr__(self) -> str:
        best = self.best
        lead = f", best {best.name!r} {best.throughput:.2f}x" if best and best.throughput else ""
        return f"Plans(trace={self.trace!r}, {self.gpus} GPUs, {len(self.plans)} plans{lead})"

    def to_dict(self) -> dict[str, object]:
        return msgspec.to_builtins(self)


MAX_GPUS = 2**20  # a plan's GPU count: bounded work
MAX_MICRO_BATCHES = 4096


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def layouts(gpus: int, options: PlanOptions, max_pp: int, can_split: bool) -> list[Layout]:
    """Every plan for ``gpus``: tp within a node (dividing ``gpus_per_node``, at most ``max_tp``; 1 where the model
    has no Linear pairs to split), pp at most ``max_pp`` (the model's blocks), dp the rest; micro-batches for pp > 1."""
    g = options.gpus_per_node
    out = []
    for tp in _divisors(gpus):
        if tp > 1 and (not can_split or g % tp or tp > (options.max_tp or g)):
            continue
        for pp in _divisors(gpus // tp):
            if pp > max_pp:
                continue
            dp = gpus // (tp * pp)
            replica = options.global_batch // dp if options.global_batch is not None else None
            if options.global_batch is not None and (replica == 0 or options.global_batch % dp):
                continue  # a fixed global batch splits into whole replica batches
            counts = options.micro_batches or (pp, 2 * pp, 4 * pp)
            for m in sorted(set(counts)) if pp > 1 else [1]:
                if options.schedule == "interleaved" and m % pp:
                    continue
                if replica is not None and replica % m:
                    continue  # ... and those into whole micro-batches
                out.append(Layout(dp, tp, pp, m))
    if len(out) > MAX_PLANS:
        raise DaydreamError(
            f"{len(out):,} plans for {gpus} GPUs: more than {MAX_PLANS:,} (give --micro-batches, --max-tp)"
        )
    return out


def _scenario(layout: Layout, options: PlanOptions, on_gpu: bool, share: float) -> Scenario:
    """The scripts and params that make ``layout`` of the traced GPU (the module docstring's placement)."""
    g = options.gpus_per_node
    link = options.link if on_gpu else "gloo-local"
    inter = options.inter if on_gpu else "gloo-local"
    scripts: list[str] = []
    params: dict[str, object] = {}
    replica = options.replica_batch(layout.dp)
    if replica is not None and options.batch is not None and replica != options.batch:
        scripts.append("batch_size")  # first: the other scripts split the replica's step
        params["batch_size.factor"] = replica / options.batch
    if layout.dp > 1 or (layout.tp == 1 and layout.pp == 1 and not scripts):  # (one GPU: ddp of 1 rank, unchanged)
        scripts.append("ddp")
        params |= {
            "ddp.ranks": layout.dp,
            "ddp.link": link,
            "ddp.inter": inter,
            "ddp.gpus_per_node": max(1, g // layout.tp),
            "ddp.share": share,
            "ddp.element_bytes": options.param_bytes,
            "ddp.zero": options.zero,
        }
    if layout.tp > 1:
        scripts.append("tensor_parallel")
        params |= {
            "tensor_parallel.tp": layout.tp,
            "tensor_parallel.link": link,
            "tensor_parallel.sequence_parallel": options.sequence_parallel,
        }
    if layout.pp > 1:
        spans_nodes = layout.dp * layout.tp * layout.pp > g
        scripts.append("pipeline_parallel")
        params |= {
            "pipeline_parallel.pp": layout.pp,
            "pipeline_parallel.micro_batches": layout.micro_batches,
            "pipeline_parallel.schedule": options.schedule,
            "pipeline_parallel.link": inter if spans_nodes else link,
        }
        if options.schedule == "interleaved":
            params["pipeline_parallel.chunks"] = 2
    return Scenario(layout.name, scripts, params)


def _stage_blocks(cut: list[list[str]], pp: int) -> list[list[str]]:
    """Each rank's blocks: stage r, r + pp, ... of the cut (one chunk each, or several interleaved)."""
    return [[b for k in range(r, len(cut), pp) for b in cut[k]] for r in range(pp)]


def _check(options: PlanOptions) -> None:
    """Refuse what cannot be planned before any work."""
    if options.schedule not in SCHEDULES:
        raise DaydreamError(f"--schedule {options.schedule}: one of {', '.join(SCHEDULES)}")
    if not 1 <= options.gpus <= MAX_GPUS:
        raise DaydreamError(f"--gpus {options.gpus}: give 1 to {MAX_GPUS:,}")
    counts = options.micro_batches
    if counts is not None and max(counts, default=0) > MAX_MICRO_BATCHES:
        raise DaydreamError(f"--micro-batches: at most {MAX_MICRO_BATCHES:,} (a pipeline's tasks grow with them)")
    too_few = options.gpus_per_node < 1 or (options.max_tp is not None and options.max_tp < 1)
    if too_few or (counts is not None and min(counts, default=0) < 1):
        raise DaydreamError("--gpus-per-node, --max-tp and --micro-batches: whole numbers >= 1")
    if options.memory_gb is not None and not (0 < options.memory_gb < math.inf):
        raise DaydreamError(f"--memory-gb {options.memory_gb}: a size in GiB above 0")
    if options.zero not in (0, 1, 2):
        raise DaydreamError(f"--zero {options.zero}: 0, 1 or 2 (stage 3 shards the parameters too: the fsdp script)")
    if (options.global_batch is None) != (options.batch is None):
        raise DaydreamError("--global-batch needs --batch (the samples of the traced step), and --batch --global-batch")
    if options.batch is not None and options.global_batch is not None and min(options.batch, options.global_batch) < 1:
        raise DaydreamError("--batch and --global-batch: whole numbers >= 1")


def plan(
    workload: Workload | str | os.PathLike[str],
    options: PlanOptions,
    run: RunOptions | None = None,
    jobs: int = 1,
    ray: str | None = None,
) -> Plans:
    """The data/tensor/pipeline-parallel plans for N GPUs from one GPU's trace, ranked (what ``daydream plan`` does).

    Parameters
    ----------
    workload : Workload, str or os.PathLike
        One GPU's trace (a path or a :class:`~daydream.api.workload.Workload`), best recorded with its modules and
        shapes (``daydream record``); a job's folder is planned from its first rank.
    options : PlanOptions
        What the search may choose from and the machine it plans for: ``gpus``, ``gpus_per_node``, the links, the GPU
        memory, micro-batch counts, schedule, ZeRO stage, batch sizes.
    run : RunOptions, optional
        The policy before any script's schedule and the scripts' budget.
    jobs : int, optional
        Worker processes that predict plans (default 1: this process).
    ray : str, optional
        The address of a Ray cluster to predict plans on.

    Returns
    -------
    Plans
        The plans that fit by throughput, then those that do not, then those not predicted (``plans``), each with
        its predicted step, interval and memory; the model's parameters and the notes on what the plans rest on.

    Raises
    ------
    DaydreamError
        Options no plan can meet (a global batch that does not split, a GPU count below 1); a
        :class:`~daydream.errors.TraceError` for the trace.

    Notes
    -----
    Each plan is a scenario of :func:`~daydream.api.compare.compare`: the scripts ``ddp``, ``tensor_parallel`` and
    ``pipeline_parallel`` with its params. How ranks are placed, what a plan's throughput and memory are: the
    module's docstring and docs/optimizations.md, Planning.

    Examples
    --------
    >>> from daydream import PlanOptions, bundled_example, plan
    >>> plans = plan(bundled_example(), PlanOptions(gpus=2))
    >>> sorted(p.name for p in plans.plans)
    ['dp=1 tp=1 pp=2 m=2', 'dp=1 tp=1 pp=2 m=4', 'dp=1 tp=1 pp=2 m=8', 'dp=1 tp=2 pp=1', 'dp=2 tp=1 pp=1']
    """
    _check(options)
    work, notes = Workload.of(workload), []
    if work.is_job:  # a data-parallel job: its first rank is a replica (its collectives re-priced by ddp)
        first = work.trace_files()[0]
        notes.append(f"a job: planned from its first rank, {os.path.basename(first)}, whose collectives are re-priced")
        work = Workload(first, work.step, work.et)
    graph, has_gpu = work.load()
    model = model_memory(graph)
    if model.sizes.estimated:  # the parameters' count, and with it every plan's memory
        notes.append(f"the parameters and the plans' memory rest on {model.sizes.note()}")
    found = blocks(graph)
    can_split = bool(split_pairs(graph))
    if model.parameters and not model.activations:
        notes.append(
            "no forward op records its input shapes (torch.profiler.profile(record_shapes=True)): activations "
            "are not counted, a plan's memory is its model state alone"
        )
    if not found:
        notes.append(
            "the trace's ops carry no modules (record with `daydream record`): one block, no pipeline (pp = 1)"
        )
    if not can_split:
        notes.append("no Linear pairs to split in the forward pass: tensor parallelism left out (tp = 1)")
    candidates = layouts(options.gpus, options, max(1, len(found)), can_split)
    if not candidates:
        raise DaydreamError(
            f"no plan for {options.gpus} GPUs splits the global batch of {options.global_batch} into whole "
            "replica batches and micro-batches (--global-batch, --micro-batches)"
        )
    dtype = compute_dtype(graph)
    act_bytes = {"bf16": 2, "fp16": 2, "fp8": 1}.get(dtype or "", 4)
    dtypes = (options.param_bytes, 4, act_bytes)
    memories: dict[str, list[RankMemory]] = {}
    scenarios = []
    for layout in candidates:
        chunks = 2 if options.schedule == "interleaved" and layout.pp > 1 else 1
        # the cut pipeline_parallel makes (balanced on the traced times); one stage: every block
        cut = (
            [list(st.blocks) for st in cut_stages(found, layout.pp * chunks)]
            if layout.pp > 1
            else [[b.name for b in model.blocks]]
        )
        replica = options.replica_batch(layout.dp)
        split = Parallelism(
            layout.tp,
            layout.micro_batches,
            options.schedule if layout.pp > 1 else "1f1b",
            chunks,
            layout.dp,
            options.sequence_parallel,
            1.0 if replica is None or options.batch is None else replica / options.batch,
            options.zero,
        )
        ranks = rank_memory(model, _stage_blocks(cut, layout.pp), split, dtypes)
        memories[layout.name] = ranks
        largest = max(r.parameters for r in ranks) / options.param_bytes
        share = min(1.0, largest / model.parameters) if model.parameters else 1.0
        scenarios.append(_scenario(layout, options, has_gpu, share))
    result = compare(work, scenarios, run, jobs=jobs, ray=ray, loaded=(graph, has_gpu))
    by_name = {s.name: s for s in result.scenarios}
    total = (
        options.memory_gb * GiB
        if options.memory_gb is not None
        else graph.graph.get("device_properties", {}).get("totalGlobalMem")
    )
    baseline = result.baseline.baseline_us
    out = []
    for layout, scenario in zip(candidates, scenarios):
        r = by_name[layout.name]
        ranks = memories[layout.name]
        peak = max(m.total for m in ranks)
        out.append(
            PlanResult(
                name=layout.name,
                layout=layout,
                scripts=scenario.scripts,
                params=dict(scenario.params),
                predicted_us=r.predicted_us,
                interval=r.interval,
                throughput=layout.dp * (r.throughput or 0.0) if r.predicted_us else None,
                memory=ranks,
                memory_bytes=peak,
                fits=None if total is None else peak <= total,
                memory_low_bytes=peak * (1 - MEMORY_MODEL_ERROR_PCT / 100),
                memory_high_bytes=peak * (1 + MEMORY_MODEL_ERROR_PCT / 100),
                bound=r.bound,
                error=r.error,
            )
        )
    ranked = _rank(out)
    if total is None:
        notes.append("the GPU's memory is not in the trace: give --memory-gb to mark the plans that do not fit")
    return Plans(
        trace=work.path,
        device=graph.graph.get("device"),
        gpus=options.gpus,
        gpus_per_node=options.gpus_per_node,
        memory_bytes=float(total) if total is not None else None,
        baseline_us=baseline,
        measured_us=result.baseline.measured_us,
        optimizer=model.optimizer,
        parameters=model.parameters,
        gradient_sizes=model.sizes.source,
        plans=ranked,
        baseline_memory_bytes=max(
            m.total for m in rank_memory(model, [[b.name for b in model.blocks]], Parallelism(), dtypes)
        ),
        batch=options.batch,
        global_batch=options.global_batch,
        notes=notes,
        warnings=result.warnings,
    )


def _rank(plans: Sequence[PlanResult]) -> list[PlanResult]:
    """Plans that fit by throughput (highest first), then those that do not, then those not predicted. A fitting
    plan's place is one more than the fitting plans decidedly ahead of it in throughput, by the paired difference of
    their times per sample (daydream.perf.trust.uncertainty.rank_paired, the rule ``compare`` ranks by): plans the
    evidence
    cannot tell apart share a place, and ``ties`` names them."""
    predicted = sorted(
        (p for p in plans if p.predicted_us is not None), key=lambda p: (p.fits is False, -(p.throughput or 0.0))
    )
    fitting = [p for p in predicted if p.fits is not False]
    # time per sample (1 / throughput) scales with the plan's step time, so its interval's parts hold for it as they are
    places = rank_paired(
        [(1.0 / p.throughput if p.throughput else math.inf, p.interval.parts if p.interval else []) for p in fitting]
    )
    for p, (place, tied) in zip(fitting, places):
        p.rank = place
        p.ties = [fitting[j].name for j in tied]
    return [*predicted, *(p for p in plans if p.predicted_us is None)]
