"""One helper per job: the quantile every model reads, the interval text the terminal and the page write (each in its
own marks), and a result's step time under a name that does not collide with its steps' periods."""

from __future__ import annotations

from types import SimpleNamespace

import msgspec
import numpy as np
import pytest

from daydream.api.whatif import Summary
from daydream.stats import quantile
from daydream.units import PAGE_MARKS, TERMINAL_MARKS, interval_line, interval_range


@pytest.mark.parametrize("q", [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0])
def test_the_quantile_is_numpys_linear_one(q: float) -> None:
    values = [5.0, 1.0, 4.0, 2.5, 3.0, 9.0, 0.5]
    assert quantile(values, q) == pytest.approx(float(np.quantile(values, q)))
    assert quantile([7.0], q) == 7.0


def _interval(extrapolated: bool) -> SimpleNamespace:
    parts = [
        SimpleNamespace(name="noise", half_width_pct=1.23, source="the trace's steps"),
        SimpleNamespace(name="amp", half_width_pct=8.9, source="ledger"),
    ]
    return SimpleNamespace(half_width_pct=4.06, driver="amp", extrapolated=extrapolated, parts=parts)


def test_the_terminal_and_the_page_write_one_interval_each_in_its_marks() -> None:
    assert interval_range("1.000", "2.000", False, TERMINAL_MARKS) == interval_range(
        "1.000", "2.000", False, PAGE_MARKS
    )
    assert interval_range("1.000", "2.000", True, TERMINAL_MARKS) == "(1.000-2.000) extrap."
    assert interval_range("1.000", "2.000", True, PAGE_MARKS) == "(1.000-2.000, extrapolated)"
    assert interval_line(_interval(True), TERMINAL_MARKS) == (
        "90% interval +-4.1%, driven by amp (extrapolated): noise +-1.2% (the trace's steps); amp +-8.9% (ledger)"
    )
    assert interval_line(_interval(True), PAGE_MARKS) == (
        "90% interval ±4.1%, driven by amp: noise ±1.2% (the trace's steps); amp ±8.9% (ledger)"
    )


def test_a_summarys_step_time_keeps_its_old_name_deprecated() -> None:
    s = Summary(period_us=1500.0, breakdown={}, gpu_time_by_class={}, gpu_time_by_phase={}, tasks=3, step_us={"s": 1.0})
    with pytest.warns(DeprecationWarning, match="period_us"):
        assert s.step_time_us == 1500.0
    assert msgspec.to_builtins(s)["step_time_us"] == 1500.0  # written under the name it always had
