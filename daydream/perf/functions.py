"""The performance models as .whatif functions: ``allreduce(bytes, ranks = 8, link = "nvlink4")`` and friends.

Imported by :mod:`daydream.dsl` so every script can call them; each impl gets the graph being changed first (for
the trace's device), then the script's arguments, and raises DaydreamError for bad ones.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from daydream.dsl.functions import register_function, type_name
from daydream.errors import DaydreamError

_DEFAULT_LINK = "nvlink4"


def _number(value: Any, fn: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DaydreamError(f"{fn}(): {what} must be a number, not {type_name(value)}")
    return float(value)


def _ranks(value: Any, fn: str) -> int:
    n = _number(value, fn, "ranks")
    if n != int(n) or n < 1:
        raise DaydreamError(f"{fn}(): ranks must be a whole number >= 1, got {value}")
    return int(n)


def _link(value: Any, fn: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DaydreamError(f"{fn}(): link is a preset name (\"nvlink4\") or a bus bandwidth in GB/s, not {type_name(value)}")
    return value


def _collective(name: str) -> Any:
    def impl(graph: nx.DiGraph, nbytes: Any, ranks: Any = 8, link: Any = _DEFAULT_LINK, latency: Any = None) -> float:
        from daydream.perf.collectives import collective_us

        n = _ranks(ranks, name)
        size = _number(nbytes, name, "bytes")
        if n == 1:
            return 0.0  # one rank has nothing to exchange: NCCL returns at once
        lat = None if latency is None else _number(latency, name, "latency")
        return collective_us(name, size, n, _link(link, name), lat)

    return impl


def _collective_any(
    graph: nx.DiGraph, name: Any, nbytes: Any, ranks: Any = 8, link: Any = _DEFAULT_LINK, latency: Any = None
) -> float:
    if not isinstance(name, str):
        raise DaydreamError(f"collective(): the first argument names the collective (\"allgather\"), not {type_name(name)}")
    from daydream.perf.nccl_tests import normalize_collective

    return _collective(normalize_collective(name))(graph, nbytes, ranks, link, latency)


_COLLECTIVE_DOC = (
    "{name}(BYTES, ranks = 8, link = \"nvlink4\", latency = none): microseconds for one {name} by the nccl-tests formula, "
    "latency + {factor} x BYTES / bus bandwidth of the link (a preset: nvlink2..5, pcie3..5, ib-edr/hdr/ndr, "
    "eth-10g/25g/100g/400g; or a bus bandwidth in GB/s); 0 on one rank"
)
for _name, _factor in [
    ("allreduce", "2(n-1)/n"), ("allgather", "(n-1)/n"), ("reducescatter", "(n-1)/n"), ("alltoall", "(n-1)/n"),
    ("broadcast", "1"),
]:  # fmt: skip
    register_function(
        _name, _collective(_name), 1, 4, _COLLECTIVE_DOC.format(name=_name, factor=_factor), keywords=("ranks", "link", "latency")
    )
register_function(
    "collective", _collective_any, 2, 5,
    "collective(NAME, BYTES, ranks = 8, link = \"nvlink4\", latency = none): any collective by name (sendrecv, reduce, ...)",
    keywords=("ranks", "link", "latency"),
)  # fmt: skip
