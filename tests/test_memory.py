"""The step's memory: the trace's allocator events tied to its tasks, the memory timeline and peak, the language's
memory statements, and what every command says of it (issue: memory what-ifs)."""

from __future__ import annotations

import gzip
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, SHARED_TRACES

from daydream.api.replay import replay
from daydream.api.whatif import run_whatif, whatif
from daydream.commands.cli import main
from daydream.errors import ScriptError
from daydream.graph import build_graph
from daydream.graph.memory import ACTIVATIONS, GRADIENTS, TEMPORARIES, memory_of
from daydream.simulation import simulate
from daydream.simulation.memory import memory_timeline
from daydream.trace import load_trace
from daydream.trace.load import _load_columnar, _load_in_batches

NORMALIZATION = SHARED_TRACES / "tracelens" / "mi300_normalization_layer_test.json.gz"
MEMORY_TRACES = ROOT / "validation" / "traces" / "memory"
PID, TID = 1, 1


def _op(name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": dur, "args": args}


def _mem(ts: float, nbytes: int, addr: int, total: int) -> dict[str, Any]:
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": PID,
        "tid": TID,
        "ts": ts,
        "args": {
            "Bytes": nbytes,
            "Addr": addr,
            "Total Allocated": total,
            "Total Reserved": 0,
            "Device Type": 0,
            "Device Id": -1,
        },
    }


def tiny_trace(path: Path) -> Path:
    """Two steps of a CPU training loop, 100 us each, the second measured after the first. Per step (from its base):

    forward  aten::linear [3, 12]   allocates A 1000 at 4 (an activation: freed in the backward at 35)
             aten::relu   [12, 20]  allocates T 300 at 14, frees it at 18 (a temporary)
    backward autograd::engine::evaluate_function: AddmmBackward0 [30, 40]: allocates G 200 at 31 (a gradient: freed by
             the next step's zero_grad at 1), frees A at 35
    optimizer Optimizer.step#SGD.step > aten::add_ [50, 60]: allocates S 50 at 52, frees it at 58
    zero_grad at [0, 2] of the next step frees the gradient (the first step: none to free)

    The level in the measured step: 200 (the last step's gradient) until zero_grad frees it at 1: 0; 1000 at 4; 1300
    at 14: the peak; 1000 at 18; 1200 at 31; 200 at 35; 250 at 52, 200 at 58."""
    events: list[dict[str, Any]] = []
    total = 0
    for step in range(2):
        b = 1000.0 + 100 * step
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step}",
                "pid": PID,
                "tid": TID,
                "ts": b,
                "dur": 99.0,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "Optimizer.zero_grad#SGD.zero_grad",
                "pid": PID,
                "tid": TID,
                "ts": b,
                "dur": 2.0,
            }
        )
        events.append(_op("aten::zero_", b + 0.2, 1.6))
        if step:  # the gradient of the step before
            total -= 200
            events.append(_mem(b + 1, -200, 30 + step - 1, total))
        events.append(_op("aten::linear", b + 3, 9.0))
        total += 1000
        events.append(_mem(b + 4, 1000, 10 + step, total))
        events.append(_op("aten::relu", b + 12, 8.0))
        total += 300
        events.append(_mem(b + 14, 300, 20 + step, total))
        total -= 300
        events.append(_mem(b + 18, -300, 20 + step, total))
        events.append(
            _op("autograd::engine::evaluate_function: AddmmBackward0", b + 30, 10.0, **{"Sequence number": 1})
        )
        total += 200
        events.append(_mem(b + 31, 200, 30 + step, total))
        total -= 1000
        events.append(_mem(b + 35, -1000, 10 + step, total))
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "Optimizer.step#SGD.step",
                "pid": PID,
                "tid": TID,
                "ts": b + 50,
                "dur": 10.0,
            }
        )
        events.append(_op("aten::add_", b + 50, 10.0))
        total += 50
        events.append(_mem(b + 52, 50, 40 + step, total))
        total -= 50
        events.append(_mem(b + 58, -50, 40 + step, total))
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return tiny_trace(tmp_path / "tiny.json")


def test_the_events_become_tensors_tied_to_their_tasks(tiny: Path) -> None:
    graph = build_graph(load_trace(tiny), "all")
    memory = memory_of(graph)
    assert memory is not None and memory.source == "trace" and [d.key for d in memory.devices] == ["cpu"]
    by_size = {float(b): int(c) for b, c in zip(memory.nbytes, memory.category)}
    # the activation (forward -> backward), the temporary, the gradient (freed by the next step's zero_grad), the
    # optimizer's temporary
    assert by_size == {1000.0: ACTIVATIONS, 300.0: TEMPORARIES, 200.0: GRADIENTS, 50.0: TEMPORARIES}
    assert len(memory) == 8  # each of the two steps'
    timeline = simulate(graph)
    mt = memory_timeline(timeline)
    assert mt is not None and mt.peak_bytes == 1300.0 == memory.devices[0].measured_peak_bytes
    assert mt.at_peak == {"activations": 1000.0, "temporaries": 300.0}  # the categories add up to the peak
    assert sum(mt.at_peak.values()) == mt.peak_bytes


def test_the_memory_statements_worked_by_hand(tiny: Path, tmp_path: Path) -> None:
    """On the tiny trace's levels (its docstring), each statement's peak by hand."""
    graph = build_graph(load_trace(tiny), "all")

    def peak(text: str) -> float:
        m = run_whatif(graph, [str(_write(tmp_path, text))]).report.memory
        assert m is not None and m.baseline_peak_bytes == 1300.0
        return m.predicted_peak_bytes

    # the activation halved: 500 + 300 at the relu, 500 + 200 at the backward
    assert peak('scale tensors(select cpu where phase == "forward", category = "activations") by 0.5\n') == 800.0
    # every temporary released: the activation and the gradient at the backward, 1,200
    assert peak('scale tensors(category = "temporaries") by 0\n') == 1200.0
    # the activation released from the linear's end to the backward op's start: 300 at the relu, 1,200 at the backward
    assert (
        peak(
            'let fwd = select where name == "aten::linear"\nlet bwd = select where name ~ "AddmmBackward"\n'
            'scale tensors(fwd, category = "activations") by 0 after last(fwd) until last(bwd)\n'
        )
        == 1200.0
    )
    # a tensor of 1,000 from the linear's end to the backward op's start: 2,300 at the relu
    assert (
        peak(
            'let fwd = select where name == "aten::linear"\nlet bwd = select where name ~ "AddmmBackward"\n'
            'alloc 1000 as "activations" after last(fwd) until last(bwd)\n'
        )
        == 2300.0
    )
    assert peak("alloc 5000\n") == 6300.0  # a tensor of the whole window
    # the gradient four times as large: 1,000 + 800 at the backward, the peak moves there
    m = run_whatif(graph, [str(_write(tmp_path, 'scale tensors(category = "gradients") by 4\n'))]).report.memory
    assert m is not None and m.predicted_peak_bytes == 1800.0
    assert m.predicted_at_peak == {"activations": 1000.0, "gradients": 800.0}


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "w.whatif"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scale tensors() by -1\n", "a memory scale factor is a finite number >= 0"),
        ("scale tensors() by 2 before first(cpu)\n", "a stretch of memory begins 'after TASK'"),
        ("scale tensors() by 2 after cpu\n", "after takes one task"),
        ('scale tensors(category = "weights") by 2\n', "unknown memory category 'weights'"),
        ("alloc -5\n", "alloc takes a number of bytes >= 0"),
        ("scale cpu by 2 after first(cpu)\n", "'after' and 'until' bound a stretch of tensors' lives"),
        (
            'let t = tensors()\nremove select where name == "aten::relu"\nscale t by 2\n',
            "taken before tasks holding tensors",
        ),
    ],
)
def test_memory_statements_refuse_what_they_cannot_do(tiny: Path, tmp_path: Path, text: str, message: str) -> None:
    graph = build_graph(load_trace(tiny), "all")
    with pytest.raises(ScriptError, match=re.escape(message)):
        run_whatif(graph, [str(_write(tmp_path, text))])


def test_a_removed_task_takes_its_own_tensors(tiny: Path, tmp_path: Path) -> None:
    """The relu allocated and freed its temporary: removed, the temporary goes; the backward op freed the activation
    the linear allocated: removed, the activation is freed where the task before it on its thread ends."""
    graph = build_graph(load_trace(tiny), "all")
    result = run_whatif(graph, [str(_write(tmp_path, 'remove select where name == "aten::relu"\n'))])
    memory = memory_of(result.graph)
    assert memory is not None and 300.0 not in memory.nbytes.tolist() and len(memory) == 6
    result = run_whatif(graph, [str(_write(tmp_path, 'remove select where name ~ "AddmmBackward"\n'))])
    m = result.report.memory
    assert m is not None and m.predicted_peak_bytes == 1300.0  # the linear's activation and the relu's temporary


def test_both_loaders_read_the_same_memory_events(tiny: Path) -> None:
    """The compiled scanner (large traces) and the batched decoder keep the same allocator events."""
    paths = [tiny]
    if NORMALIZATION.is_file():
        paths.append(NORMALIZATION)
    for p in paths:
        a, b = _load_columnar(str(p)), _load_in_batches(str(p))
        assert a is not None and b is not None and a.memory is not None and b.memory is not None
        for f in ("ts", "nbytes", "addr", "total_allocated", "device_type", "device_id"):
            assert np.array_equal(getattr(a.memory, f), getattr(b.memory, f), equal_nan=True), f
        assert a.memory.thread == b.memory.thread


@pytest.mark.skipif(not NORMALIZATION.is_file(), reason=f"{NORMALIZATION} is absent")
def test_the_measured_gpu_peak_is_the_largest_total_allocated(capsys: pytest.CaptureFixture[str]) -> None:
    """TraceLens's MI300X normalization test: the GPU's (HIP, Device Type 6) peak is the largest Total Allocated of its
    GPU events, 8,154,624 bytes, measured and replayed alike."""
    with gzip.open(NORMALIZATION, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    largest = max(
        e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]" and e["args"]["Device Type"] != 0
    )
    assert largest == 8_154_624
    assert main(["simulate", str(NORMALIZATION), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["memory"]
    assert (m["source"], m["device"], m["measured_peak_bytes"], m["baseline_peak_bytes"]) == (
        "trace",
        "hip:0",
        largest,
        largest,
    )
    assert sum(m["at_peak"].values()) == pytest.approx(largest)
    assert main(["simulate", str(NORMALIZATION)]) == 0
    assert "measured 7.8 MiB, replayed 7.8 MiB" in " ".join(capsys.readouterr().out.split())


def _runs(setting: str) -> Path:
    return MEMORY_TRACES / setting / "run1" / "rank0.json.xz"


@pytest.mark.parametrize(
    ("before", "after", "scripts", "params"),
    [
        ("transformer/base", "transformer/batch32", ["batch_size"], {"factor": 2}),
        (
            "transformer/base",
            "transformer/checkpoint",
            ["activation_checkpointing"],
            {"layers": r"^Encoder\.layers\.", "segments": 4},
        ),
        ("base", "batch64acc2", ["batch_size", "grad_accumulation"], {"factor": 0.5, "k": 2}),
    ],
)
def test_run_gives_the_memory_keys_on_a_cpu_trace(
    before: str, after: str, scripts: list[str], params: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """What a held-out pair is run with: `run BEFORE SCRIPTS --json` gives the memory keys, and here the prediction
    lands within 5% of the AFTER run's measured peak."""
    argv = ["run", str(_runs(before)), *scripts, *(a for k, v in params.items() for a in ("-p", f"{k}={v}")), "--json"]
    assert main(argv) == 0
    m = json.loads(capsys.readouterr().out)["memory"]
    assert set(m) >= {
        "source",
        "device",
        "measured_peak_bytes",
        "baseline_peak_bytes",
        "predicted_peak_bytes",
        "predicted_interval",
        "capacity_bytes",
    }
    assert set(m["predicted_interval"]) >= {"low_bytes", "high_bytes"} and m["source"] == "trace"
    measured = replay(_runs(after)).report.memory
    assert measured is not None and measured.measured_peak_bytes is not None
    assert m["predicted_peak_bytes"] == pytest.approx(measured.measured_peak_bytes, rel=0.05)


def test_a_trace_without_events_is_estimated_from_shapes() -> None:
    from daydream.api.demo import bundled_example

    m = whatif(bundled_example(), ["batch_size"], {"factor": 2}).report.memory
    assert m is not None and m.source == "shapes" and m.predicted_peak_bytes > m.baseline_peak_bytes
    assert "estimated from the trace's shapes" in m.counted


def test_does_not_fit_against_the_memory_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(_runs("transformer/base"))
    assert main(["run", trace, "batch_size", "-p", "factor=2", "--memory-gb", "0.05", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["memory"]
    assert m["capacity_bytes"] == 0.05 * 2**30 and m["fits"] is False
    assert main(["run", trace, "batch_size", "-p", "factor=2", "--memory-gb", "0.05"]) == 0
    assert "does NOT fit the device's 51.2 MiB" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_the_memory_ledger(capsys: pytest.CaptureFixture[str]) -> None:
    """The memory cases of validation/cases.toml: geometric-mean error <= 5%, every case the change moved better than
    "no change", the measured AFTERs inside their 90% intervals >= 85%."""
    from daydream.api.validate import Ledger, _validate_memory, load_cases, with_intervals

    ledger = with_intervals(
        Ledger("cases", [], _validate_memory(load_cases(ROOT / "validation" / "cases.toml", memory=True)))
    )
    assert len(ledger.memory_cases) >= 5
    assert ledger.memory_geomean_error_pct is not None and ledger.memory_geomean_error_pct <= 5.0
    moved = [c for c in ledger.memory_cases if c.moved]
    assert len(moved) >= 5 and all(c.beats_no_change for c in moved)
    cov = ledger.memory_coverage
    assert cov.coverage_pct is not None and cov.coverage_pct >= 85.0


@pytest.mark.skipif(not NORMALIZATION.is_file(), reason=f"{NORMALIZATION} is absent")
def test_the_report_draws_the_memory(tmp_path: Path) -> None:
    from test_report_page import _chromium, _dump_dom

    out = tmp_path / "rep"
    assert main(["report", str(NORMALIZATION), "--out", str(out)]) == 0
    doc = json.loads((out / "report.json").read_text())
    assert doc["memory"]["measured_peak_bytes"] == 8_154_624 and (out / "memory.png").is_file()
    html = (out / "index.html").read_text()
    assert 'id="memory-section"' in html and 'src="memory.png"' in html and "7.8 MiB" in html
    browser = _chromium()
    if browser is None or shutil.which(browser) is None:
        pytest.skip("no headless Chromium (Debian: apt-get install chromium)")
    dom = _dump_dom(browser, out / "index.html", tmp_path / "profile")
    img = re.search(r'<img src="memory.png"[^>]*>', dom)
    assert img is not None and "data-broken" not in img.group(0)
    loaded = re.search(r'data-loaded="(\d+)"', img.group(0))
    assert loaded is not None and int(loaded.group(1)) > 100 and math.isfinite(float(loaded.group(1)))
