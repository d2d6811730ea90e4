"""Summaries of measured numbers that more than one model reads: the one quantile rule of the package."""

from __future__ import annotations

import math
from collections.abc import Sequence


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) of ``values``, interpolated linearly between the two nearest (numpy's default,
    ``method="linear"``); ``values`` need not be sorted.

    >>> quantile([4.0, 1.0, 3.0, 2.0], 0.5)
    2.5
    """
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
