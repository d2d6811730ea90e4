"""What a run reads and how it runs: a :class:`Workload` (a trace file, or a job's folder of one trace per rank, with
the step, execution trace, link and workers to read it with) and :class:`RunOptions` (the scheduling policy, the
scripts' work budget and include folders). The command line builds them once; ``whatif``, ``compare``, the HTML
report and the REPL take them, so that "a trace or a job" is decided in one place (:meth:`Workload.load`)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx

from daydream.api.replay import run_inputs
from daydream.files import open_input
from daydream.graph.build import build_graph
from daydream.graph.chakra import chakra_inputs, chakra_is_job, is_chakra
from daydream.graph.schema import GPU_KINDS, CollectivePricing
from daydream.simulation import EARLIEST, Policy
from daydream.trace import load_trace
from daydream.trace.job import is_job


@dataclass(frozen=True)
class Workload:
    """A trace file or a job folder, and how to read it: what :func:`~daydream.whatif`, :func:`~daydream.compare` and
    :func:`~daydream.plan` run on.

    Parameters
    ----------
    path : str
        A Kineto trace (``.json``, ``.json.gz``, ``.json.xz``), a folder of one trace per rank of a job, or Chakra
        ``.et`` files.
    step : str or int, optional
        A ProfilerStep number or name, ``"all"``, ``"trace"`` or an annotation's name; None: a steady-state step.
    et : str, optional
        The PyTorch execution trace of a single trace's run (default: the one found next to it).
    link : str or float, optional
        What a job's collectives are priced over: a preset (``nvlink4``, ``ib-ndr``) or GB/s; None: fitted to the
        job's own transfers.
    jobs : int, optional
        Worker processes that build a job's ranks (None: one per 32 ranks; default 1).
    ray : str, optional
        The address of a Ray cluster that builds a job's ranks instead (and, by workers, holds them).
    by_workers : bool, optional
        A job: simulated (and its scripts run, :func:`~daydream.whatif`) by ``jobs`` workers that each hold some of
        its ranks, none all of them (:mod:`daydream.api.job_whatif`); False: every rank in this process; None (the
        default): by workers where its traces hold more than 8 MiB.

    Examples
    --------
    >>> from daydream import Workload, bundled_example
    >>> graph, has_gpu = Workload(bundled_example(), step=3).load()
    >>> graph.number_of_nodes(), has_gpu
    (260, False)
    """

    path: str
    step: str | int | None = None
    et: str | None = None
    link: str | float | None = None
    jobs: int | None = 1  # None: as many as the job's ranks are worth (daydream.api.job.load_job)
    ray: str | None = None
    # a job simulated by workers that each hold some of its ranks (daydream.api.job_workers); None: where its traces
    # are large enough for that to pay (daydream.api.job.by_workers_pays)
    by_workers: bool | None = None

    @classmethod
    def of(cls, trace: Workload | str | os.PathLike[str]) -> Workload:
        """``trace`` as a workload: one already, or a path read with the defaults."""
        return trace if isinstance(trace, Workload) else cls(os.fspath(trace))

    @property
    def is_chakra(self) -> bool:
        """Whether the path is a Chakra execution trace: a ``.et`` file, or a folder of them (one per rank)."""
        return is_chakra(self.path)

    @property
    def is_job(self) -> bool:
        """Whether the path is a job's folder of rank traces (Kineto's, or Chakra's of more than one rank)."""
        return chakra_is_job(self.path) if self.is_chakra else is_job(self.path)

    def by_workers_pays(self, policy: Policy = EARLIEST) -> bool:
        """Whether this workload is a job (Kineto's) that workers simulate, each holding some of its ranks, under
        ``policy``."""
        if self.by_workers is False or self.is_chakra or not self.is_job:
            return False
        from daydream.api.job import by_workers_pays  # a job's workers: imported for jobs only

        return self.by_workers or by_workers_pays(self.path, policy)

    def worker_count(self) -> int:
        """The workers that simulate this job (``jobs``, None: as many as its size is worth)."""
        from daydream.api.job import job_worker_count

        return job_worker_count(self.path, self.jobs, self.ray)

    def load(self) -> tuple[nx.DiGraph, bool]:
        """The graph scripts run on: one trace's step, or the job's ranks in one graph with its collectives priced
        (every rank its own tasks: a script may change one). With whether the trace holds GPU activity. A Chakra
        trace is read as it was written: its steps are its own (``step`` and ``et`` do not apply); a job's
        collectives keep the durations daydream priced them at, re-priced over ``link`` where given, fitted to the
        job's own transfers where another producer wrote them."""
        return self._load(share=False)

    def load_shared(self) -> tuple[nx.DiGraph, bool]:
        """:meth:`load` for a replay: a job's ranks with the same tasks share one set (``daydream simulate``)."""
        return self._load(share=True)

    def _load(self, share: bool) -> tuple[nx.DiGraph, bool]:
        if self.is_chakra:
            return self._load_chakra(share)
        if self.is_job:
            from daydream.api.job import load_priced_job  # a job's collective models: imported for jobs only

            return load_priced_job(self.path, self.step, self.link, self.jobs, share=share, ray=self.ray), True
        trace = load_trace(self.path, et=self.et)
        has_gpu = trace.has_gpu_activity  # before the build releases the trace's events
        return build_graph(trace, self.step, release_events=True), has_gpu

    def _load_chakra(self, share: bool) -> tuple[nx.DiGraph, bool]:
        from daydream.errors import DaydreamError
        from daydream.graph.chakra import read_chakra

        for name, value in (("--step", self.step), ("--et", self.et)):
            if value is not None:
                raise DaydreamError(
                    f"{self.path}: a Chakra trace holds the steps it was written with: {name} does not apply"
                )
        graph = read_chakra(self.path, share=share)
        collectives = graph.graph.get("collectives")
        if collectives is not None and (self.link is not None or collectives.pricing is None):
            from daydream.perf.collectives.job import price_collectives  # a job's collective models: for jobs only

            ids = {a["collective_id"] for a in graph.nodes.values() if a.get("collective_id")}
            timeless = {
                a["collective_id"] for a in graph.nodes.values() if a.get("collective_id") and not a["duration"] > 0
            }
            if self.link is None and timeless:
                # a workload for a simulator that prices its collectives itself (ASTRA-sim's): nothing to fit
                collectives.pricing = CollectivePricing("as the Chakra trace gives them", len(ids), 0, len(ids), {})
                graph.graph["warnings"].append(
                    f"{self.path}: {len(timeless):,} of its {len(ids):,} collectives last 0 us "
                    "in the trace (their simulator prices them): give --link to price them"
                )
            else:
                collectives.pricing = price_collectives(graph, self.link)
        has_gpu = any(a["kind"] in GPU_KINDS for a in graph.nodes.values())
        return graph, has_gpu

    def inputs(self, scripts: Sequence[str | os.PathLike[str]] = (), options: RunOptions | None = None) -> list[str]:
        """Every file a run of ``scripts`` on it reads (outputs are checked against them before the work)."""
        include_dirs = options.include_dirs if options is not None else None
        return run_inputs(self.path, self.et, scripts, include_dirs)

    def trace_files(self) -> list[str]:
        """The trace file, or each rank trace of the job (a Chakra trace: its files)."""
        if self.is_chakra:
            return chakra_inputs(self.path)
        if not self.is_job:
            return [self.path]
        from daydream.api.job import job_inputs

        return sorted(job_inputs(self.path))

    def sha256(self) -> str:
        """The SHA-256 of the trace file; of a job folder, over its rank files' names and hashes."""
        if not self.is_job and not self.is_chakra:
            return sha256_file(self.path)
        h = hashlib.sha256()
        for f in self.trace_files():
            h.update(f"{os.path.basename(f)}\0{sha256_file(f)}\n".encode())
        return h.hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open_input(path) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class RunOptions:
    """How scripts run; the scripts' params, the what of a run, are passed beside it.

    Parameters
    ----------
    policy : Policy, optional
        How ready tasks are scheduled (:func:`~daydream.simulation.parse_policy`); default ``earliest``.
    budget : int, optional
        The units of work each script's check and run may do (None: the default for the graph's size).
    include_dirs : sequence of str or os.PathLike, optional
        Folders, besides the scripts' own and the library, whose files the scripts may ``include``.
    memory_gb : float, optional
        The device memory in GiB a predicted peak must fit in (None: the trace's GPU's).

    Examples
    --------
    >>> from daydream import RunOptions, bundled_example, parse_policy, whatif
    >>> result = whatif(bundled_example(), ["fused_optimizer"], options=RunOptions(parse_policy("fifo")))
    >>> result.predicted_us < result.baseline_us
    True
    """

    policy: Policy = EARLIEST
    budget: int | None = None
    include_dirs: Sequence[str | os.PathLike[str]] | None = field(default=None)
    memory_gb: float | None = None  # the device memory a predicted peak must fit in (None: the trace's GPU's)

    @property
    def memory_bytes(self) -> float | None:
        return None if self.memory_gb is None else self.memory_gb * (1 << 30)
