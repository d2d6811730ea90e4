"""The fused CPU optimizer step's price (daydream.perf.cpu.optimizer_step), by hand."""

from __future__ import annotations

import pytest

from daydream.errors import DaydreamError
from daydream.perf.cpu.optimizer_step import fused_cpu_step_us, step_optimizer

# One parameter of 1000 elements, torch's for-loop Adam step: the step counter, then the per-parameter ops.
ADAM_LOOP = [
    ("aten::add_", [[], [], []], 5.0),  # the step counter: a scalar, not a pass over the parameter
    ("aten::lerp_", [[1000], [1000], []], 30.0),  # exp_avg, grad: 2 reads + 1 write = 3000 element passes
    ("aten::mul_", [[1000], []], 20.0),  # 2000
    ("aten::addcmul_", [[1000], [1000], [1000], []], 40.0),  # 4000
    ("aten::sqrt", [[1000]], 50.0),  # out of place: not counted in the rate
    ("aten::div", [[1000], []], 30.0),
    ("aten::add_", [[1000], [], []], 20.0),  # 2000
    ("aten::addcdiv_", [[1000], [1000], [1000], []], 40.0),  # 4000
]


def test_adam_by_hand() -> None:
    # 15000 element passes in 150 us (100 a microsecond); the fused kernel makes 7 over 1000 elements: 70 us.
    assert fused_cpu_step_us(ADAM_LOOP, "Adam") == pytest.approx(70.0)
    assert fused_cpu_step_us(ADAM_LOOP, "AdamW") == pytest.approx(70.0)
    # amsgrad keeps a max state: 2 passes more
    assert fused_cpu_step_us([*ADAM_LOOP, ("aten::maximum", [[1000], [1000]], 10.0)], "Adam") == pytest.approx(90.0)


def test_the_parameters_are_the_least_frequent_in_place_op() -> None:
    # SGD with momentum over two parameters (1000 and 10 elements): buf.mul_ once, add_ twice per parameter.
    ops = []
    for n in (1000, 10):
        ops += [
            ("aten::mul_", [[n], []], n * 2 / 100),
            ("aten::add_", [[n], [n], []], n * 3 / 100),
            ("aten::add_", [[n], [n], []], n * 3 / 100),
        ]
    # 8 passes per element at 100 a microsecond; fused: 5 passes over 1010 elements = 50.5 us
    assert fused_cpu_step_us(ops, "SGD") == pytest.approx(50.5)
    plain = [op for op in ops if op[0] == "aten::add_"][::2]  # SGD without momentum: param.add_(grad) alone
    assert fused_cpu_step_us(plain, "SGD") == pytest.approx(3 * 1010 / 100)


def test_what_it_cannot_price() -> None:
    with pytest.raises(DaydreamError, match="no fused CPU kernel for RMSprop.*foreach"):
        fused_cpu_step_us(ADAM_LOOP, "RMSprop")
    with pytest.raises(DaydreamError, match="recorded input dims"):
        fused_cpu_step_us([(name, None, d) for name, _, d in ADAM_LOOP], "Adam")


def test_step_optimizer() -> None:
    assert step_optimizer("Optimizer.step#AdamW.step") == "AdamW"
    assert step_optimizer("Optimizer.zero_grad#AdamW.zero_grad") is None and step_optimizer(None) is None
