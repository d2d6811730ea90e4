"""A trace, a job or a what-if written as Chakra execution traces: ``daydream export TRACE [SCRIPTS] --chakra DIR``.

The baseline graph (no scripts) or the graph after the scripts (``scale_out -p ranks=1024``, ``amp``) becomes one
``.et`` file per rank that ASTRA-sim and other Chakra consumers read, and that ``daydream simulate DIR`` reads back
(:mod:`daydream.graph.chakra` says what maps to what). A script that sets the job's data-parallel size
(``scale_out``, ``ddp``, ``fsdp``: their ``ranks``) sets how many ranks are written, unless ``world`` is given.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from daydream.api.workload import RunOptions, Workload
from daydream.dsl.params import script_name
from daydream.errors import DaydreamError
from daydream.graph.chakra import ChakraWritten, check_out_dir, write_chakra
from daydream.trace.job import TRACE_SUFFIXES

# the library's scripts whose ``ranks`` is the job's data-parallel size after them: the ranks a what-if's files hold
WORLD_SCRIPTS = ("scale_out", "ddp", "fsdp")


class ChakraExport(msgspec.Struct):
    """What ``daydream export --chakra`` did: what it read, the scripts it ran (with the step they predict, as
    ``daydream run`` gives it), and what it wrote (:class:`~daydream.graph.chakra.ChakraWritten`)."""

    trace: str
    scripts: list[str]
    params: dict[str, Any]
    world_from: str  # why that many ranks: "--world", "the graph", or the script whose ``ranks`` set it
    written: ChakraWritten
    baseline_us: float | None = None  # the scripts' baseline step, where scripts ran
    predicted_us: float | None = None  # the step after them
    warnings: list[str] = []

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


def export_name(path: str | os.PathLike[str]) -> str:
    """The files' prefix for a trace or job at ``path``: its name without the trace's suffixes (``dlrm8``,
    ``resnet_kineto``), in letters, digits, ``_``, ``-`` and ``.``."""
    name = Path(os.path.normpath(os.fspath(path))).name
    for suffix in (*sorted(TRACE_SUFFIXES, key=len, reverse=True), ".et.gz", ".et", ".pt.trace"):
        name = name.removesuffix(suffix)
    name = re.sub(r"[^\w.-]", "_", name).strip(".") or "workload"
    return re.sub(r"\.\d+$", "", name) or "workload"  # a Chakra file's own rank: not part of the name


def export_chakra(
    workload: Workload | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    scripts: Sequence[str | os.PathLike[str]] = (),
    params: dict[str, Any] | None = None,
    options: RunOptions | None = None,
    world: int | None = None,
    order_deps: str = "data",
    on_print: Callable[[str], None] | None = None,
) -> ChakraExport:
    """Write the workload's graph, after ``scripts`` where given, as Chakra execution traces in ``out_dir``.
    ``world``: the ranks to write (None: what a scale-out script set, else the graph's); ``order_deps``: ``data``
    (every dependency a data dependency, as ASTRA-sim's ETFeeder reads them) or ``ctrl`` (a thread's and a stream's
    order as control dependencies)."""
    work, opts = Workload.of(workload), options or RunOptions()
    if world is not None and world < 1:
        raise DaydreamError(f"--world {world}: give at least 1 rank")
    inputs = work.inputs(scripts, opts)
    check_out_dir(out_dir, inputs)  # before the work
    baseline = predicted = None
    warnings: list[str] = []
    world_from = "--world" if world is not None else "the job's ranks" if work.is_job else "the trace's world size"
    if scripts:
        from daydream.api.whatif import whatif

        # the graph after the scripts is what is written: one process holds it (a job not simulated by workers)
        whole = dataclasses.replace(work, by_workers=False)
        result = whatif(whole, scripts, params, opts, on_print=on_print)
        graph = result.graph
        baseline, predicted = result.baseline_us, result.predicted_us
        warnings = list(result.warnings)
        ran = [script_name(s) for s in result.scripts]
        if world is None:
            for name in WORLD_SCRIPTS:
                ranks = result.param_values.get("ranks")
                if name in ran and isinstance(ranks, int) and not isinstance(ranks, bool) and ranks >= 1:
                    world, world_from = ranks, f"{name}'s ranks = {ranks}"
                    break
    else:
        graph, _ = work.load()
        warnings = list(graph.graph.get("warnings", []))
    written = write_chakra(graph, out_dir, export_name(work.path), world, order_deps, inputs)
    return ChakraExport(
        trace=work.path,
        scripts=[os.fspath(s) for s in scripts],
        params=dict(params or {}),
        world_from=world_from,
        written=written,
        baseline_us=baseline,
        predicted_us=predicted,
        warnings=warnings,
    )


__all__ = ["ChakraExport", "export_chakra", "export_name"]
