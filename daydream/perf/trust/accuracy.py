"""How the papers state a model's error: the geometric mean of absolute relative errors (GMAE)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import msgspec


class Accuracy(msgspec.Struct, frozen=True):
    """One model's error on data it was not fitted on (JSON: to_dict, in field order).

    ``name``: the model (e.g. ``gemm-mlp/cpu``); ``data``: what it was checked against, in words (a file, a trace).
    """

    name: str
    gmae_pct: float
    n: int
    data: str

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


def gmae(predicted: Iterable[float], observed: Iterable[float]) -> float:
    """Geometric mean of |predicted - observed| / observed, in percent.

    Pairs with a non-positive observation are dropped (no relative error exists); an exact prediction counts
    as a tiny error (1e-6 %) so one perfect case does not zero the product."""
    logs = []
    for p, o in zip(predicted, observed):
        if o <= 0:
            continue
        logs.append(math.log(max(abs(p - o) / o, 1e-8)))
    if not logs:
        raise ValueError("gmae: no positive observations")
    return 100.0 * math.exp(sum(logs) / len(logs))
