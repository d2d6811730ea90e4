"""bench/memory_pairs.py, the measured peaks of the memory corpus: per step, per phase, and per case (synthetic
traces)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "memory_pairs.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("memory_pairs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _trace(path: Path, activation: int) -> None:
    """Two steps of 100 us: zero_grad, a forward op allocating `activation`, a backward op allocating a 64-byte
    gradient and freeing the activation, an optimizer step with a 32-byte temporary. The first step's zero_grad frees
    nothing the trace saw (the gradient came before the profiler), the second's frees the first step's."""
    events: list[dict] = []
    total = 0
    addr = iter(range(1000, 10**6, 8))

    def mem(ts: float, nbytes: int, where: int) -> None:
        nonlocal total
        total += nbytes
        args = {
            "Addr": where,
            "Bytes": nbytes,
            "Total Allocated": total,
            "Total Reserved": 0,
            "Device Type": 0,
            "Device Id": -1,
        }
        events.append(
            {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts, "args": args}
        )

    def op(name: str, ts: float, dur: float, cat: str = "cpu_op") -> None:
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur})

    grad = None
    for k, t0 in ((3, 0.0), (4, 100.0)):
        op(f"ProfilerStep#{k}", t0, 100, "user_annotation")
        op("Optimizer.zero_grad#SGD.zero_grad", t0 + 1, 5, "user_annotation")
        if grad is not None:
            mem(t0 + 2, -64, grad)
        op("aten::addmm", t0 + 10, 10)
        act = next(addr)
        mem(t0 + 11, activation, act)
        op("autograd::engine::evaluate_function: AddmmBackward0", t0 + 30, 20, "cpu_op")
        op("aten::mm", t0 + 31, 5)
        grad = next(addr)
        mem(t0 + 32, 64, grad)
        mem(t0 + 40, -activation, act)
        op("Optimizer.step#SGD.step", t0 + 60, 20, "user_annotation")
        op("aten::mul", t0 + 61, 5)
        tmp = next(addr)
        mem(t0 + 62, 32, tmp)
        mem(t0 + 70, -32, tmp)
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)


def test_steps_phases_and_cases(bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = tmp_path / "traces" / "memory"
    for setting, activation in (("base", 16), ("big", 256)):
        for run in (1, 2):
            (traces / setting / f"run{run}").mkdir(parents=True)
            _trace(traces / setting / f"run{run}" / "rank0.json.gz", activation)
    run = bench.measure(traces / "base" / "run1" / "rank0.json.gz")
    first, second = run.steps
    assert (first.name, first.start, first.peak, first.end) == ("ProfilerStep#3", 0, 96, 64)
    assert (second.start, second.peak, second.end) == (64, 96, 64)  # the first step's gradient freed by zero_grad
    assert first.phases == {"forward": 16, "backward": 80, "optimizer": 96}
    assert second.phases == {"forward": 16, "backward": 80, "optimizer": 96, "zero_grad": 0}
    assert first.where == "Optimizer.step#SGD.step > aten::mul"
    assert run.peak == 96 and run.unknown_frees == 0 and run.outside_steps == 0
    big = bench.measure(traces / "big" / "run1" / "rank0.json.gz")
    assert big.peak == 256 + 64 and big.steps[1].where.startswith("autograd::engine::evaluate_function")
    cases = tmp_path / "memory_cases.toml"
    runs = lambda s: [f"traces/memory/{s}/run{k}/rank0.json.gz" for k in (1, 2)]  # noqa: E731
    cases.write_text(
        f'[[case]]\nname = "bigger"\nbefore = {json.dumps(runs("base"))}\nafter = {json.dumps(runs("big"))}\nscripts ='
        f' []\n[[case]]\nname = "same"\nbefore = {json.dumps(runs("base"))}\nafter ='
        f" {json.dumps(runs('base'))}\nscripts = []\n"
    )
    assert bench.main(["--traces", str(traces), "--cases", str(cases)]) == 0
    out = capsys.readouterr().out
    assert "bigger" in out and "x3.333" in out and "differs" in out and "unchanged" in out
    assert bench.main(["--traces", str(traces), "--cases", str(cases), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["differs"] for c in doc["cases"]] == [True, False]
    assert doc["settings"]["big"]["peak"] == {"mean": 320, "min": 320, "max": 320}


def test_the_allocators_peak_from_the_sidecar_and_xz_traces(bench: ModuleType, tmp_path: Path) -> None:
    """A GPU run's sidecar keeps torch's own peak of the recorded steps (device_memory): shown beside the events'
    peak; a run compacted to xz (validation/compact_traces.py) is read as its gzip was."""
    import lzma

    run = tmp_path / "traces" / "gpu" / "run1"
    run.mkdir(parents=True)
    _trace(run / "rank0.json.gz", 16)
    gz = bench.measure(run / "rank0.json.gz")
    assert gz.allocator is None
    (run / "rank0.json.xz").write_bytes(lzma.compress(gzip.decompress((run / "rank0.json.gz").read_bytes())))
    (run / "rank0.json.gz").unlink()
    peak = {"device": "cuda:0", "max_allocated": 5 << 20, "max_reserved": 8 << 20}
    (run / "rank0.daydream.json").write_text(json.dumps({"format": "daydream.recording/1", "device_memory": peak}))
    xz = bench.measure(run / "rank0.json.xz")
    assert xz.peak == gz.peak and xz.allocator == peak
    assert bench.settings(tmp_path / "traces") == {"gpu": [run / "rank0.json.xz"]}
