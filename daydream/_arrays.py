"""``np.unique`` of integer arrays without a sort, where their values span a small range.

The builder and the loader number ids (string ids, categories, places, contexts) with ``np.unique``: a sort, and with
``return_index`` a stable one, 91 ms for 650k values at 1M events where a table over the values' range takes 5 ms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# a range of values this much wider than the array is numbered by np.unique's sort (the table would cost more)
_DENSE_SLACK = 65536


def unique_ints(values: np.ndarray, return_index: bool = False, return_inverse: bool = False) -> Any:
    """``np.unique(values, return_index=..., return_inverse=...)`` of a 1-D integer array: the same arrays (the
    distinct values in order, each one's first place, each value's number among them), by a table over the values'
    range where it is at most twice the array's length (plus 65,536), else by np.unique itself."""
    values = np.asarray(values)
    n = len(values)
    if values.ndim != 1 or values.dtype.kind not in "iu" or values.dtype == np.uint64 or n == 0:
        return np.unique(values, return_index=return_index, return_inverse=return_inverse)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo > 2 * n + _DENSE_SLACK:
        return np.unique(values, return_index=return_index, return_inverse=return_inverse)
    at = values.astype(np.intp, copy=False)
    if lo:
        at = at - lo
    present = np.zeros(hi - lo + 1, np.bool_)
    present[at] = True
    distinct = np.flatnonzero(present)
    out: list[np.ndarray] = [(distinct + lo).astype(values.dtype)]
    if return_index or return_inverse:
        inverse = (np.cumsum(present, dtype=np.intp) - 1)[at]
        if return_index:
            first = np.full(len(distinct), n, np.intp)
            np.minimum.at(first, inverse, np.arange(n, dtype=np.intp))
            out.append(first)
        if return_inverse:
            out.append(inverse)
    return out[0] if len(out) == 1 else tuple(out)
