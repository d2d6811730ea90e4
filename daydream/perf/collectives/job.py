"""Pricing the collectives of a multi-rank job: each collective's duration from a model of its message size and
rank count, never its traced duration, which holds the time its earlier ranks spent waiting for the last.

A collective's members (one comm task per rank, sharing a ``collective_id``: :mod:`daydream.graph.job`) take one
duration: its message size is the largest member's (all-to-all: the most any rank sends or receives, Lin et al. (TPDS)),
its ranks the process group's. Two ways to price it:

- ``link`` given (a preset of kernels/links.toml or a bus bandwidth in GB/s): the nccl-tests formula,
  :func:`daydream.perf.collectives.collective_us`.
- otherwise, fitted to the job itself: per collective, the alpha-beta formula fitted to the transfers of the
  job's collectives, each observed as the traced duration of its last-arriving member (NCCL kernels end together
  on all ranks, so the last to start waited for nobody: its duration is the transfer). A collective whose kind
  the job holds at fewer than two message sizes (no slope to fit) keeps its last member's duration, the
  transfer as traced; so does one whose size the trace does not record. The result says how many of each.

The traced duration stays in ``traced_us``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import networkx as nx

from daydream.errors import DaydreamError
from daydream.graph.adjacency import attrs_of
from daydream.graph.job import CommTask, comm_tasks
from daydream.graph.schema import CollectivePricing
from daydream.perf.collectives import AlphaBeta, Link, collective_us, normalize_collective, resolve_link


def _gangs(graph: nx.DiGraph) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = defaultdict(list)
    for n, a in attrs_of(graph).items():
        cid = a.get("collective_id")
        if cid is not None:
            out[cid].append(n)
    return out


def price_collectives(graph: nx.DiGraph, link: str | float | Link | None = None) -> CollectivePricing:
    """Set every matched collective's members' ``duration`` to the modelled transfer (module docstring); the traced
    duration moves to ``traced_us`` (kept from an earlier pricing). Returns how each was priced."""
    attrs = attrs_of(graph)
    gangs = _gangs(graph)
    for members in gangs.values():
        for m in members:
            attrs[m].setdefault("traced_us", float(attrs[m]["duration"]))
    tasks = {t.order: t for t in comm_tasks(graph, nodes=[m for members in gangs.values() for m in members])}
    durations, pricing = price_gangs([[tasks[m] for m in members] for members in gangs.values()], link)
    for members, us in zip(gangs.values(), durations):
        for m in members:
            attrs[m]["duration"] = us
    return pricing


def price_gangs(
    gangs: list[list[CommTask]], link: str | float | Link | None = None
) -> tuple[list[float], CollectivePricing]:
    """Each collective's modelled duration (its members: comm tasks with their traced start on the job's clock and
    traced duration, their ``group_size`` the matched one), in the order given, and how each was priced."""
    observed: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    facts: list[tuple[str | None, int | None, int, float]] = []
    for members in gangs:
        last = max(members, key=lambda m: (m.start_us, m.order))
        sizes = [m.bytes for m in members if isinstance(m.bytes, (int, float))]
        kind = _kind(last.collective or last.name)
        ranks = int(last.group_size or len(members))
        nbytes = int(max(sizes)) if sizes else None
        transfer = last.traced_us
        facts.append((kind, nbytes, ranks, transfer))
        if kind is not None and nbytes and ranks > 1:
            observed[kind].append((float(nbytes), transfer, ranks))
    models: dict[str, AlphaBeta] = {}
    lk = resolve_link(link) if link is not None else None
    if lk is None:
        for kind, obs in observed.items():
            if len({m for m, _, _ in obs}) >= 2:
                ranks = max(r for _, _, r in obs)
                models[kind] = AlphaBeta.fit([m for m, _, _ in obs], [t for _, t, _ in obs], kind, ranks)
    modelled = 0
    durations = []
    for kind, nbytes, ranks, transfer in facts:
        us = transfer
        if kind is not None and nbytes is not None and ranks > 1:
            if lk is not None:
                us = collective_us(kind, nbytes, ranks, lk)
                modelled += 1
            elif kind in models:
                us = models[kind].predict_us(nbytes, ranks)
                modelled += 1
        durations.append(us)
    return durations, CollectivePricing(
        model=lk.name if lk is not None else "fitted to the job's transfers",
        collectives=len(gangs),
        modelled=modelled,
        as_traced=len(gangs) - modelled,
        models={k: m.to_dict() for k, m in sorted(models.items())},
    )


def _kind(name: str) -> str | None:
    try:
        return normalize_collective(name)
    except DaydreamError:
        return None
