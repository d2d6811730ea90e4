"""daydream._arrays: unique_ints is np.unique of integer arrays, without a sort where their range is small (the same
arrays, the same types, whichever way it takes); order_by_start is np.lexsort by start, the longest first (the same
order, ties of every kind included)."""

from __future__ import annotations

import numpy as np
import pytest

from daydream._arrays import order_by_start, unique_ints


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.uint64])
@pytest.mark.parametrize(
    ("low", "high", "n"),
    [(0, 9, 200), (-50, 50, 1000), (-3, 3, 7), (0, 1 << 40, 300), (5, 5, 10), (0, 0, 1), (0, 100, 0)],
)
def test_the_same_arrays_as_np_unique(dtype: type, low: int, high: int, n: int) -> None:
    info = np.iinfo(dtype)
    values = (
        np.random.default_rng(n + high)
        .integers(max(low, info.min), min(high, info.max), n, endpoint=True)
        .astype(dtype)
    )
    for index in (False, True):
        for inverse in (False, True):
            want = np.unique(values, return_index=index, return_inverse=inverse)
            got = unique_ints(values, return_index=index, return_inverse=inverse)
            want, got = (
                (want,) if isinstance(want, np.ndarray) else want,
                (got,) if isinstance(got, np.ndarray) else got,
            )
            assert len(got) == len(want)
            for w, g in zip(want, got, strict=True):
                assert g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g, w)


def test_each_first_place_is_the_first() -> None:
    values = np.array([7, 3, 7, 3, 1, 7, 1], np.int64)
    distinct, first, inverse = unique_ints(values, return_index=True, return_inverse=True)
    assert distinct.tolist() == [1, 3, 7] and first.tolist() == [4, 1, 0] and inverse.tolist() == [2, 1, 2, 1, 0, 2, 0]


def test_the_order_by_start_is_lexsorts() -> None:
    rng = np.random.default_rng(3)
    for trial in range(300):
        n = int(rng.integers(0, 400))
        ts = rng.integers(0, max(1, n // int(rng.integers(1, 5))), n).astype(np.float64)  # starts that repeat
        if trial % 3 == 0:  # almost in order, as a trace's events come
            ts = np.sort(ts) + rng.normal(0, 0.5, n).round()
        if trial % 7 == 0 and n:
            ts[rng.integers(0, n, 3)] = np.nan
        if trial % 11 == 0 and n:
            ts[rng.integers(0, n, 3)] = -0.0
        dur = rng.integers(0, 4, n).astype(np.float64)
        group, then = rng.integers(0, 4, n).astype(np.int32), rng.integers(0, 3, n).astype(np.int8)
        assert np.array_equal(order_by_start(ts, dur), np.lexsort((-dur, ts)))
        assert np.array_equal(order_by_start(ts, dur, group), np.lexsort((-dur, ts, group)))
        assert np.array_equal(order_by_start(ts, dur, group, then), np.lexsort((then, -dur, ts, group)))
        assert np.array_equal(order_by_start(ts, dur, None, then), np.lexsort((then, -dur, ts)))
