"""A sample set summarized as one overhead: outliers outside [Q1 - 1.5 IQR, Q3 + 1.5 IQR] dropped, the mean of the
rest kept with its count and the raw median (see :mod:`daydream.perf.cpu.overheads`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np


class Stat(msgspec.Struct, frozen=True):
    """One overhead: ``mean_us`` of the samples left after outlier removal (``count`` of them), and the median
    of all ``raw_count`` samples before removal."""

    mean_us: float
    count: int
    raw_median_us: float
    raw_count: int

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


NO_SAMPLES = Stat(0.0, 0, 0.0, 0)


def without_outliers(samples: Sequence[float]) -> list[float]:
    """The samples inside [Q1 - 1.5 IQR, Q3 + 1.5 IQR] (quartiles by linear interpolation, as numpy's default)."""
    if len(samples) < 4:  # quartiles of fewer points say nothing about what is unusual
        return list(samples)
    q1, q3 = np.percentile(samples, [25, 75])
    lo, hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    return [x for x in samples if lo <= x <= hi]


def summarize(samples: Sequence[float]) -> Stat:
    if not samples:
        return NO_SAMPLES
    kept = without_outliers(samples)
    return Stat(float(statistics.fmean(kept)), len(kept), float(statistics.median(samples)), len(samples))
