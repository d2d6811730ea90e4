"""Hostile traces: every malformed input loads, or fails with a one-line DaydreamError naming the file; never a
traceback, a hang, or memory without bound (the limits of daydream/trace/load.py; docs/graph.md, "Limits").

A seeded mutation fuzzer over small real traces (fields given values of the wrong type or out of range, deep
nesting, events removed, duplicated or foreign, bytes flipped, inserted or cut, sometimes gzipped), and one
regression test per cause the CLI fuzzer (bench/fuzz_cli.py) found. Files are written in ``tmp_path``; a FIFO is only
ever given to a subprocess with a timeout, so a regression cannot hang the suite.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import random
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from synth import make_trace, write_trace

from daydream import DaydreamError, TraceError, build_graph, load_trace, simulate
from daydream.api.demo import bundled_example
from daydream.graph.edit import add_dependency, add_waits
from daydream.trace import reading

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
SMALL_SHARED = [
    "hta/triton_example_triton_example.json.gz",
    "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/execution_trace_benchmark_simple_add_trace.json.gz",
]
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
CASE_SECONDS = 10.0  # one mutated trace: load, build and simulate (the slowest take well under a second)


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "daydream", *args], capture_output=True, text=True, timeout=timeout)


def assert_clean_error(out: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert out.returncode == 1, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    assert out.stderr.startswith("daydream: error: ") and out.stderr.count("\n") == 1, out.stderr
    for fragment in fragments:
        assert fragment in out.stderr, out.stderr


def pipeline(path: Path, step: str | None = None, et: Path | None = None) -> None:
    """What ``daydream simulate`` does with a trace: load it, build the graph, simulate it."""
    timeline = simulate(build_graph(load_trace(path, et=et), step))
    timeline.makespan()


def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


# ---- the mutation fuzzer -----------------------------------------------------------------------------------------

# Values a field may be given: the wrong type, out of range, or legal but unusual (a ts beyond MAX_TIME_US).
FIELD_VALUES: dict[str, list[Any]] = {
    "ts": [-1, 0, 1e308, -1e308, 1e18, 2e18, 1e-300, 2**63, 2**64, "12", None, -0.0, 1.5e15, [], {}],
    "dur": [-1, 0, 1e308, 1e18, 2e18, 1e-300, 2**63, None, "3", 1e15, 0.0001, True],
    "pid": ["x", -1, 2**63 - 1, None, 0, "", 1.5, 100, "100", 2**80],
    "tid": ["x", -1, 2**63 - 1, None, 0, "", 1, 2, 7, "stream 7", "7", [1]],
    "id": [None, -1, "x", 2**63 - 1, 1, 2, 1.5],
    "ph": ["X", "s", "f", "t", "M", "B", "E", "i", "", "XX", 1, None],
    "cat": [
        "cpu_op",
        "Operator",
        "user_annotation",
        "python_function",
        "cuda_runtime",
        "Runtime",
        "cuda_driver",
        "kernel",
        "Kernel",
        "gpu_memcpy",
        "Memcpy",
        "gpu_memset",
        "gpu_user_annotation",
        "cuda_sync",
        "ac2g",
        "async",
        None,
        "",
        "fwdbwd",
        5,
    ],
    "name": [
        "",
        "ProfilerStep#1",
        "ProfilerStep#x",
        "ProfilerStep#99999999999999999999",
        "iteration#1",
        "Optimizer.step#SGD.step",
        "Optimizer.zero_grad#X",
        "enumerate(DataLoader)#x",
        "## forward ##",
        "nn.Module: Linear",
        "daydream.module: M.a",
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
        "cudaStreamWaitEvent",
        "cudaEventRecord",
        "cudaLaunchKernel",
        "ncclKernel_AllReduce_RING_LL_Sum_float",
        "nccl:all_reduce",
        "Memcpy DtoH (Device -> Pageable)",
        "Memset (Device)",
        "aten::mm",
        "aten::add_",
        "autograd::engine::evaluate_function: AddmmBackward0",
        "\u202e",
        "[/k]",
        "x" * 5000,
        "thread_name",
        "Stream Sync",
        "Event Sync",
        None,
        3,
    ],
    "bp": ["e", None, "", "x"],
    "args": [None, 5, "x", [], {}],
}
ARG_VALUES: dict[str, list[Any]] = {
    "correlation": [-1, 0, 2**63 - 1, None, 1, 2, 3, 7, "x"],
    "External id": [-1, 0, 2**63 - 1, None, 1, 2],
    "external id": [-1, 0, None, 1],
    "Record function id": [-1, 0, None, 1, 5],
    "Sequence number": [-1, 0, None, 10, 2**62],
    "Fwd thread id": [-1, 0, None, 1, 2, 99],
    "Input Dims": [
        [],
        [[]],
        [[-1]],
        [[2**62, 2**62]],
        [[1e10]],
        [["a"]],
        [None],
        [[1, [2]]],
        [[[1, 2], [3]]],
        [{}],
        [[True]],
        "__DEEP40__",
        "__DEEP70__",
        [[0, 0]],
        5,
    ],
    "Input dims": [[], [[-1]], [[2**62, 2**62]], [None], "__DEEP70__"],
    "Input type": [[], [None], [1], ["float"], ["c10::Half", "xx"], [[]], ["Tensor"], "__DEEP70__"],
    "stream": ["s", -1, None, 0, 7, 1.5, 2**63 - 1],
    "device": ["d", -1, None, 0, 1, 2**63 - 1],
    "bytes": ["abc", -1, 1e308, None, 0, 2**63 - 1, 1.5, "12"],
    "kind": ["x", 1, None, "Memcpy DtoH"],
    "cuda_sync_kind": ["Stream Sync", "Event Sync", "Context Sync", "Stream Wait Event", "x", None],
    "wait_on_stream": [7, -1, "x", None, 99],
    "wait_on_cuda_event_record_corr_id": [-1, 0, 1, 2, None, 2**63 - 1],
    "Collective name": ["allreduce", "all_to_all", "", None, "x"],
    "In msg nelems": ["x", 1e308, -5, 0, None, 2**62, 1.5],
    "Out msg nelems": ["x", 1e308, -5, 0, None],
    "Group size": ["x", 0, -1, 1e308, None, 8],
    "dtype": ["Float", "x", None, "c10::BFloat16"],
    "name": ["python", 1, None, [], "__DEEP70__"],
    "deep": ["__DEEP40__", "__DEEP2000__"],
}
TOP_VALUES: dict[str, list[Any]] = {
    "traceEvents": [3, None, "x", {}, [1], [None], []],
    "deviceProperties": [None, [], [{}], [{"id": "x"}], [{"name": "x", "numSms": -1, "totalGlobalMem": 0}], 3, [1]],
    "distributedInfo": [
        None,
        {},
        {"rank": "x"},
        {"rank": -1, "world_size": 0},
        {"rank": 5, "world_size": 2},
        {"world_size": 10**9},
        {"rank": 2**63},
        3,
        "__DEEP70__",
    ],
    "schemaVersion": [None, "x", 1, 1e308],
}
FOREIGN_EVENTS: list[Any] = [None, 1, "x", [], {}, {"ph": "X"}, {"ph": "X", "cat": "kernel", "ts": 5, "dur": 1}]
BYTE_INSERTS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b",",
    b":",
    b"\xff",
    b"\x00",
    b"-1e999",
    b"NaN",
    b"\xed\xb3\xbf",
    b"1e400",
]


def _deep(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def mutate_doc(rng: random.Random, doc: Any) -> bytes:
    """A mutated copy of a decoded trace, as JSON text: 1 to 10 changes to its events and top-level fields."""
    doc = copy.deepcopy(doc)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    for _ in range(rng.randint(1, 10)):
        if not isinstance(events, list) or not events:
            break
        op = rng.random()
        i = rng.randrange(len(events))
        ev = events[i]
        if op < 0.08:
            del events[i]
        elif op < 0.16:
            dup = copy.deepcopy(ev)
            if isinstance(dup, dict) and isinstance(dup.get("ts"), (int, float)) and rng.random() < 0.5:
                dup["ts"] += rng.choice([-1000, -1, 0.5, 1, 7, 1000])
            events.insert(rng.randrange(len(events) + 1), dup)
        elif op < 0.5 and isinstance(ev, dict):
            key = rng.choice(list(FIELD_VALUES))
            if rng.random() < 0.1:
                ev.pop(key, None)
            else:
                ev[key] = copy.deepcopy(rng.choice(FIELD_VALUES[key]))
        elif op < 0.78 and isinstance(ev, dict):
            if not isinstance(ev.get("args"), dict):
                ev["args"] = {}
            key = rng.choice(list(ARG_VALUES))
            ev["args"][key] = copy.deepcopy(rng.choice(ARG_VALUES[key]))
        elif op < 0.84 and isinstance(ev, dict):
            other = rng.choice(events)
            if isinstance(other, dict):
                for key in rng.sample(["ts", "dur", "tid", "pid", "name", "cat"], 2):
                    if key in other:
                        ev[key] = other[key]
        elif op < 0.88 and isinstance(ev, dict) and isinstance(ev.get("dur"), (int, float)):
            ev["dur"] *= rng.choice([0, 0.5, 2, 10, 1000])
        elif op < 0.92:
            events.insert(rng.randrange(len(events) + 1), copy.deepcopy(rng.choice(FOREIGN_EVENTS)))
        elif op < 0.97 and isinstance(doc, dict):
            key = rng.choice(list(TOP_VALUES))
            doc[key] = copy.deepcopy(rng.choice(TOP_VALUES[key]))
            events = doc.get("traceEvents")
        else:
            for e in events:
                if isinstance(e, dict) and e.get("ph") == "X" and rng.random() < 0.3:
                    e["ts"] = rng.choice([0, 1, 1e18, -5])
    text = json.dumps(doc)
    for depth in (40, 70, 2000):  # json.dumps cannot write deep nesting itself
        text = text.replace(f'"__DEEP{depth}__"', _deep(depth))
    return text.encode()


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """The JSON text with 1 to 6 byte-level changes: cuts, random or JSON-significant bytes inserted, truncation."""
    text = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        i = rng.randrange(max(1, len(text)))
        if op < 0.3:
            del text[i : i + rng.randint(1, 50)]
        elif op < 0.55:
            text[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op < 0.9:
            text[i:i] = rng.choice(BYTE_INSERTS)
        else:
            del text[i:]
    return bytes(text)


def _bases() -> dict[str, Any]:
    bases: dict[str, Any] = {
        "synth": make_trace(),
        "synth-2021": make_trace("2021", legacy=True),
        "synth-nosync": make_trace(explicit_sync=False),
        "bundled": json.loads(gzip.decompress(Path(bundled_example()).read_bytes())),
    }
    for name in SMALL_SHARED:
        if (SHARED / name).is_file():
            bases[name] = json.loads(gzip.decompress((SHARED / name).read_bytes()))
    return bases


@pytest.fixture(scope="module")
def bases() -> dict[str, Any]:
    return _bases()


@pytest.mark.parametrize(
    "base", ["synth", "synth-2021", "synth-nosync", pytest.param("bundled", marks=pytest.mark.slow), *SMALL_SHARED]
)
def test_mutated_traces_load_or_fail_cleanly(tmp_path: Path, bases: dict[str, Any], base: str) -> None:
    """50 seeded mutations per base trace (350 with the shared traces): each loads, builds and simulates, or
    raises a one-line DaydreamError (a TraceError naming the file), within seconds; the file is never changed."""
    if base not in bases:
        pytest.skip(f"real traces not available: {SHARED / base} is absent")
    doc = bases[base]
    failures = []
    for seed in range(50):
        rng = random.Random(f"{base}/{seed}")
        data = mutate_doc(rng, doc)
        if rng.random() < 0.25:
            data = mutate_bytes(rng, data)
        path = tmp_path / f"case{seed}.json"
        if rng.random() < 0.3:
            path = path.with_name(path.name + ".gz")
            data = gzip.compress(data, compresslevel=1)
        path.write_bytes(data)
        before = snapshot(path)
        step = rng.choice([None, None, "all", "trace", "1"])
        start = time.perf_counter()
        try:
            pipeline(path, step)
        except TraceError as exc:
            assert str(path) in str(exc), (seed, str(exc)[:300])
            assert "\n" not in str(exc), seed
        except DaydreamError as exc:
            assert "\n" not in str(exc), seed
        except Exception as exc:  # noqa: BLE001 - what the test is for: collected, then reported together
            failures.append(f"seed {base}/{seed} step={step}: {type(exc).__name__}: {str(exc)[:200]}")
        elapsed = time.perf_counter() - start
        assert elapsed < CASE_SECONDS, f"seed {base}/{seed}: {elapsed:.1f} s"
        assert snapshot(path) == before, f"seed {base}/{seed}: the input changed"
        path.unlink()
    assert not failures, "\n".join(failures)


# ---- 1. deep nesting ------------------------------------------------------------------------------------------------


def _trace_with(tmp_path: Path, name: str, patch: Any, *, gz: bool = False) -> Path:
    """The synthetic trace with ``patch(doc)`` applied, written as JSON (``__DEEPn__`` strings become n levels)."""
    doc = make_trace()
    patch(doc)
    text = json.dumps(doc)
    for m in set(re.findall(r'"__DEEP(\d+)__"', text)):
        text = text.replace(f'"__DEEP{m}__"', _deep(int(m)))
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def _first_op(doc: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")


def test_json_nested_too_deeply_to_decode_names_the_file_and_byte(tmp_path: Path) -> None:
    for where in ("args", "foreign"):

        def patch(doc: dict[str, Any], where: str = where) -> None:
            if where == "args":
                _first_op(doc)["args"]["x"] = "__DEEP2000__"
            else:  # an event the loader does not keep: it must still be decoded
                doc["traceEvents"].append({"ph": "i", "name": "marker", "args": {"x": "__DEEP2000__"}})

        path = _trace_with(tmp_path, f"deep-{where}.json", patch)
        raw = path.read_bytes()
        with pytest.raises(TraceError, match=r"JSON nested too deeply at byte [\d,]+ \(more than 64 levels\)") as info:
            load_trace(path)
        assert str(info.value).startswith(f"{path}: ")
        offset = int(re.search(r"at byte ([\d,]+)", str(info.value)).group(1).replace(",", ""))  # type: ignore[union-attr]
        assert raw.index(b"[[[[") <= offset < raw.index(b"[[[[") + 64


def test_values_the_loader_keeps_nest_at_most_max_nesting(tmp_path: Path) -> None:
    assert reading.MAX_NESTING == 64
    ok = _trace_with(tmp_path, "ok.json", lambda doc: _first_op(doc)["args"].update({"Input Dims": "__DEEP60__"}))
    pipeline(ok)  # under the limit: loads, builds and simulates
    for key in ("Input Dims", "Input type"):
        path = _trace_with(
            tmp_path, "deep.json", lambda doc, key=key: _first_op(doc)["args"].update({key: "__DEEP70__"})
        )
        with pytest.raises(
            TraceError, match=rf"deep.json: traceEvents\[\d+\] \('aten::linear'\): args '{key}' nests more than 64"
        ):
            load_trace(path)
    path = _trace_with(tmp_path, "dist.json", lambda doc: doc.update(distributedInfo={"rank": 0, "x": "__DEEP70__"}))
    with pytest.raises(TraceError, match="dist.json: 'distributedInfo' nests more than 64 levels"):
        load_trace(path)
    # deep values in an event the loader does not keep are decoded, then dropped
    path = _trace_with(
        tmp_path, "unkept.json", lambda doc: doc["traceEvents"].append({"ph": "i", "args": {"x": "__DEEP70__"}})
    )
    pipeline(path)


def test_deep_nesting_at_the_command_line(tmp_path: Path) -> None:
    path = _trace_with(
        tmp_path, "deep.json.gz", lambda doc: _first_op(doc)["args"].update({"x": "__DEEP2000__"}), gz=True
    )
    assert_clean_error(cli("simulate", str(path)), f"{path}: JSON nested too deeply at byte")


# ---- 2. no events: empty lists, whitespace ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"traceEvents": []}', "no events (the trace's 'traceEvents' list is empty)"),
        (b"  [ ]  ", "no events (the trace's 'traceEvents' list is empty)"),
        (b"", "empty file (no events)"),
        (b" \n\t\r " * 1000, "empty file (no events)"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1}]}', "no profiler events"),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1e300, "dur": 1}]}',
            "1 complete events skipped without a valid ts/dur",
        ),
    ],
)
def test_traces_without_events_say_so(tmp_path: Path, data: bytes, message: str) -> None:
    for gz in (False, True):
        path = tmp_path / ("t.json.gz" if gz else "t.json")
        path.write_bytes(gzip.compress(data) if gz else data)
        with pytest.raises(TraceError, match=re.escape(message)) as info:
            load_trace(path)
        assert str(info.value).startswith(f"{path}: ")


def test_whitespace_only_files_are_quick_and_small(tmp_path: Path) -> None:
    plain = tmp_path / "ws.json"
    with plain.open("wb") as fh:
        block = b" " * (1 << 20)
        for _ in range(100):  # 100 MB
            fh.write(block)
    bomb = tmp_path / "ws.json.gz"  # 2 GiB of spaces in 2 MB: 2048 gzip members of 1 MiB each
    bomb.write_bytes(gzip.compress(b" " * (1 << 20), compresslevel=9) * 2048)
    for path in (plain, bomb):
        tracemalloc.start()
        start = time.perf_counter()
        with pytest.raises(TraceError, match=r"empty file \(no events\).*bytes are all whitespace"):
            load_trace(path)
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert elapsed < 10, elapsed
        assert peak < 80 << 20, peak  # a chunk or two, not the file


def test_whole_trace_of_a_trace_without_events_is_an_error() -> None:
    from daydream.trace.model import Trace
    from daydream.trace.steps import select_steps, whole_trace

    with pytest.raises(TraceError, match="x.json: no events"):
        whole_trace(Trace(path="x.json"))
    with pytest.raises(TraceError, match="x.json: no events"):
        select_steps(Trace(path="x.json"), None)


# ---- 3. invalid UTF-8 -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [b"\xff", b"\xed\xb3\xbf", b"\xc3", b"\xf8\x88\x80\x80\x80"])
def test_invalid_utf8_is_read_as_replacement_characters(tmp_path: Path, bad: bytes) -> None:
    raw = json.dumps(make_trace()).encode().replace(b'"aten::relu"', b'"aten::re' + bad + b'lu"')
    for gz in (False, True):
        path = tmp_path / ("t.json.gz" if gz else "t.json")
        path.write_bytes(gzip.compress(raw) if gz else raw)
        trace = load_trace(path)
        (name,) = {e.name for e in trace.cpu_ops if e.name.startswith("aten::re")}
        assert name.startswith("aten::re\ufffd") and name.endswith("lu")
        assert f"{path}: invalid UTF-8 (first at byte {raw.index(bad):,}) read as U+FFFD" in trace.warnings
        simulate(build_graph(trace))


def test_invalid_utf8_at_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(json.dumps(make_trace()).encode().replace(b'"aten::relu"', b'"aten::re\xfflu"'))
    out = cli("simulate", str(path))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "invalid UTF-8 (first at byte" in out.stdout + out.stderr


# ---- 4. execution traces --------------------------------------------------------------------------------------------

ET_NODE = {"id": 2, "name": "aten::addmm", "rf_id": 1, "inputs": [], "input_shapes": [], "input_types": []}


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"id": "abc"}, r"nodes\[0\]: 'id' must be an integer, not a string"),
        ({"id": 1.5}, r"nodes\[0\]: 'id' must be an integer, not a number"),
        ({"id": [1]}, r"nodes\[0\]: 'id' must be an integer, not a list"),
        ({"inputs": 5}, r"nodes\[0\] \(id 2\): 'inputs' must be a list or an object, not a number"),
        ({"inputs": {"values": 5}}, r"'inputs.values' must be a list, not a number"),
        ({"outputs": "x"}, r"'outputs' must be a list or an object, not a string"),
        ({"input_shapes": "__DEEP70__"}, r"'input_shapes' nests more than 64 levels"),
        ({"input_types": ["__DEEP70__"]}, r"'input_types' nests more than 64 levels"),
        ({"name": ["__DEEP70__"]}, r"'name' must be a string, not a list"),
        ({"rf_id": ..., "attrs": 5}, r"'attrs' must be a list, not a number"),
        ({"input_shapes": "__DEEP2000__"}, r"JSON nested too deeply at byte"),
    ],
)
def test_a_malformed_execution_trace_is_an_error_or_a_warning(
    tmp_path: Path, node: dict[str, Any], message: str
) -> None:
    trace = write_trace(tmp_path / "t.json", make_trace())
    fields = {k: v for k, v in {**ET_NODE, **node}.items() if v is not ...}  # ...: the field left out
    text = json.dumps({"schema": "1.0.1", "nodes": [fields]})
    for m in set(re.findall(r'"__DEEP(\d+)__"', text)):
        text = text.replace(f'"__DEEP{m}__"', _deep(int(m)))
    given = tmp_path / "given_et.json"
    given.write_text(text)
    with pytest.raises(TraceError, match=rf"^{re.escape(str(given))}: .*{message}"):
        load_trace(trace, et=given)
    # the same file found next to the trace by its name, not asked for: the trace loads without it
    found = tmp_path / "t.et.json"
    found.write_text(text)
    loaded = load_trace(trace)
    assert not loaded.et_ops
    assert [w for w in loaded.warnings if w.startswith(f"execution trace next to the trace not used: {found}: ")], (
        loaded.warnings
    )
    pipeline(trace)


def test_an_execution_trace_node_with_a_null_id_has_none(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.json", make_trace())
    et = tmp_path / "x_et.json"
    et.write_text(json.dumps({"nodes": [{**ET_NODE, "id": None}]}))
    loaded = load_trace(trace, et=et)  # no traceback; no op of the synthetic trace has that rf_id or name sequence
    assert all(isinstance(w, str) for w in loaded.warnings)


@pytest.mark.parametrize(
    "et_text", ['{"nodes": 5}', '{"nodes": [5]}', "[]", "", "\xff", '{"nodes": [{"id": 1, "inputs": 5}]']
)
def test_other_unusable_execution_traces(tmp_path: Path, et_text: str) -> None:
    trace = write_trace(tmp_path / "t.json", make_trace())
    et = tmp_path / "x_et.json"
    et.write_bytes(et_text.encode("latin-1"))
    with pytest.raises(TraceError, match=rf"^{re.escape(str(et))}: "):
        load_trace(trace, et=et)


@needs_fifo
def test_special_files_next_to_the_trace_are_passed_over(tmp_path: Path) -> None:
    """An execution trace or sidecar under the looked-up name that is a FIFO or a symlink loop is not read."""
    trace = write_trace(tmp_path / "t.json", make_trace())
    os.mkfifo(tmp_path / "t.et.json")
    (tmp_path / "t.daydream.json").symlink_to("t.daydream.json")
    code = f"from daydream import load_trace\nprint(len(load_trace({str(trace)!r}).cpu_ops))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == "15", out.stderr


@needs_fifo
def test_a_fifo_given_as_execution_trace_is_refused(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.json", make_trace())
    fifo = tmp_path / "et.json"
    os.mkfifo(fifo)
    assert_clean_error(
        cli("simulate", str(trace), "--et", str(fifo)), f"{fifo}: is a named pipe (FIFO), not a regular file"
    )


# ---- 5. special files, sizes --------------------------------------------------------------------------------------


@needs_fifo
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    script = tmp_path / "s.whatif"
    script.write_text("scale cpu by 2\n")
    message = f"{fifo}: is a named pipe (FIFO), not a regular file; daydream reads trace files only"
    assert_clean_error(cli("simulate", str(fifo)), message)
    assert_clean_error(cli("run", str(fifo), str(script)), message)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("dev-zero", "/dev/zero: is a character device, not a regular file"),
        ("directory", "is a directory, expected a trace file"),
        ("symlink-loop", "loop.json: too many levels of symbolic links"),
        ("missing", "absent.json: no such file"),
        ("under-a-file", "no such file (a part of the path is not a directory)"),
        ("nul", "not a valid file name"),
    ],
)
def test_paths_that_are_not_trace_files(tmp_path: Path, kind: str, message: str) -> None:
    if kind == "dev-zero" and not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero here")
    path = {
        "dev-zero": lambda: Path("/dev/zero"),
        "directory": lambda: tmp_path,
        "symlink-loop": lambda: _symlink_loop(tmp_path),
        "missing": lambda: tmp_path / "absent.json",
        "under-a-file": lambda: _file(tmp_path) / "x.json",
        "nul": lambda: Path("a\0b.json"),
    }[kind]()
    with pytest.raises(TraceError, match=re.escape(message)):
        load_trace(path)
    if kind == "directory":  # the command line reads a folder as a multi-rank job (docs/multigpu.md)
        message = "the folder holds no rank traces"
    if kind != "nul":  # a NUL byte cannot be passed on a command line
        assert_clean_error(cli("simulate", str(path)), message)


def _symlink_loop(d: Path) -> Path:
    link = d / "loop.json"
    link.symlink_to(link.name)
    return link


def _file(d: Path) -> Path:
    f = d / "plain"
    f.write_text("x")
    return f


def test_a_gzip_bomb_is_refused_quickly(tmp_path: Path) -> None:
    """A 2 GiB JSON string in 2 MB: refused by the expansion ratio, in seconds and bounded memory."""
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'["') + gzip.compress(b"a" * (1 << 20), compresslevel=9) * 2048)
    start = time.perf_counter()
    with pytest.raises(TraceError, match=r"bomb.json.gz: decompresses to more than [\d,]+ bytes, over 256 times its"):
        load_trace(bomb)
    assert time.perf_counter() - start < 20


def test_a_gzip_bomb_of_tiny_values_is_refused_quickly(tmp_path: Path) -> None:
    """2 GiB of ``0,`` in 2 MB: refused for its values (MAX_JSON_VALUES) before it fills memory."""
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"[") + gzip.compress(b"0," * (1 << 19), compresslevel=9) * 2048)
    start = time.perf_counter()
    with pytest.raises(
        TraceError, match=r"bomb.json.gz: (holds more than 134,217,728 JSON values|decompresses to more than)"
    ):
        load_trace(bomb)
    assert time.perf_counter() - start < 20


def test_size_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert reading.MAX_TRACE_BYTES == 4 << 30 and reading.MAX_JSON_VALUES == 1 << 27
    data = json.dumps(make_trace()).encode()
    plain, gz = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(data)
    gz.write_bytes(gzip.compress(data))
    monkeypatch.setattr(reading, "MAX_TRACE_BYTES", 1000)
    with pytest.raises(TraceError, match=re.escape(f"{plain}: is more than 1,000 bytes")):
        load_trace(plain)
    with pytest.raises(TraceError, match=re.escape(f"{gz}: decompresses to more than 1,000 bytes")):
        load_trace(gz)
    monkeypatch.setattr(reading, "MAX_TRACE_BYTES", 4 << 30)
    monkeypatch.setattr(reading, "MAX_JSON_VALUES", 100)
    with pytest.raises(TraceError, match=re.escape(f"{plain}: holds more than 100 JSON values")):
        load_trace(plain)
    monkeypatch.setattr(reading, "MAX_JSON_VALUES", 1 << 27)
    monkeypatch.setattr(reading, "GZIP_RATIO_FLOOR", 1000)
    monkeypatch.setattr(reading, "MAX_GZIP_RATIO", 2)
    with pytest.raises(
        TraceError, match=r"t.json.gz: decompresses to more than [\d,]+ bytes, over 2 times its [\d,]+ bytes"
    ):
        load_trace(gz)


def test_a_text_that_is_not_json_is_refused_as_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "zeros.json.gz"
    path.write_bytes(gzip.compress(b"\0" * (1 << 20), compresslevel=9) * 1024)  # 1 GiB of NUL bytes
    start = time.perf_counter()
    with pytest.raises(TraceError, match=re.escape(f"{path}: not JSON (starts with")):
        load_trace(path)
    assert time.perf_counter() - start < 5


# ---- 6. dependency cycles name tasks as the user knows them ------------------------------------------------------


def test_a_cycle_from_the_trace_names_the_file_and_the_tasks(tmp_path: Path) -> None:
    doc = make_trace()
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["ts"] == 2045)
    kernel["ts"] = 1050  # a kernel that ran before the call that launched it (at 2030)
    path = write_trace(tmp_path / "t.json", doc)
    with pytest.raises(DaydreamError) as info:
        pipeline(path, "all")
    message = str(info.value)
    assert message.startswith(
        f"{path}: the task graph has a dependency cycle: gpu 'volta_sgemm_128x64_nn' on gpu:0/7 at ts 1050.0 us -> "
    )
    assert not re.search(r"task \d", message) and "\n" not in message
    assert message.count(" us -> ") <= 5 and len(message) < 1200
    assert re.search(r"\(\d+ tasks\); \d+ tasks never became ready$", message)


def test_a_cycle_added_by_hand_closes_its_loop(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", make_trace())
    g = build_graph(load_trace(path))
    nodes = g.nodes
    main = sorted((n for n in g if nodes[n]["thread"] == "cpu:100/1"), key=lambda n: nodes[n]["start"])
    first, second = main[0], main[1]
    add_dependency(g, second, first, "sync")
    with pytest.raises(DaydreamError) as info:
        simulate(g)
    message = str(info.value)
    origin = g.graph["origin_us"]
    a, b = (f"cpu {nodes[n]['name']!r} on cpu:100/1 at ts {nodes[n]['start'] + origin:.1f} us" for n in (first, second))
    assert f"dependency cycle: {a} -> {b} -> {a}; " in message or f"dependency cycle: {b} -> {a} -> {b}; " in message
    assert not re.search(r"task \d", message)


def test_edit_messages_name_tasks_as_the_user_knows_them(tmp_path: Path) -> None:
    g = build_graph(load_trace(write_trace(tmp_path / "t.json", make_trace())))
    nodes = g.nodes
    main = sorted((n for n in g if nodes[n]["thread"] == "cpu:100/1"), key=lambda n: nodes[n]["start"])
    with pytest.raises(
        DaydreamError, match=r"that wait would close a dependency cycle: cpu '[^']+' on cpu:100/1 at ts [\d.]+ us"
    ) as info:
        add_waits(g, [main[0]], [main[-1]])
    assert not re.search(r"task \d", str(info.value))
    with pytest.raises(DaydreamError, match=r"^cpu '[^']+' on cpu:100/1 at ts [\d.]+ us cannot wait for itself$"):
        add_waits(g, [main[0]], [main[0]])


# ---- field types and values -------------------------------------------------------------------------------------


def _set(key: str, value: Any, where: str = "op") -> Any:
    def patch(doc: dict[str, Any]) -> None:
        if where == "top":
            doc[key] = value
            return
        ev = _first_op(doc) if where == "op" else next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
        if key.startswith("args."):
            ev["args"][key[5:]] = value
        elif value is ...:
            del ev[key]
        else:
            ev[key] = value

    return patch


@pytest.mark.parametrize(
    ("patch", "outcome"),
    [
        (_set("ts", "soon"), r"malformed trace: Expected `float \| null`, got `str` - at `traceEvents\[\d+\]\.ts`"),
        (_set("ts", None), "skipped 1 complete events without a valid ts/dur"),
        (_set("ts", ...), "skipped 1 complete events without a valid ts/dur"),
        (_set("ts", 1e300), "skipped 1 complete events without a valid ts/dur (missing, negative, or beyond 1e+18 us)"),
        (_set("ts", -1e300), "skipped 1 complete events"),
        (_set("dur", -5), "skipped 1 complete events"),
        (_set("dur", 1e300), "skipped 1 complete events"),
        (_set("dur", 1e300, "kernel"), "skipped 1 complete events"),
        (_set("dur", True), r"traceEvents\[\d+\]\.dur"),
        (_set("ts", 2**64), "skipped 1 complete events"),
        (_set("pid", None), None),
        (_set("pid", "x"), None),
        (_set("tid", "x"), None),
        (_set("tid", -1), None),
        (_set("tid", "7", "kernel"), None),
        (_set("pid", 1.5), r"traceEvents\[\d+\]\.pid"),
        (_set("pid", 2**80), None),
        (_set("args", 5), r"traceEvents\[\d+\]\.args"),
        (_set("args", None), None),
        (_set("args.correlation", "x", "kernel"), r"traceEvents\[\d+\]\.args\.correlation"),
        (_set("args.correlation", -1, "kernel"), None),
        (_set("args.stream", "s", "kernel"), None),
        (_set("args.bytes", "abc", "kernel"), None),
        (_set("args.In msg nelems", "x"), None),
        (_set("args.Input Dims", 5), r"traceEvents\[\d+\]\.args\.Input Dims"),
        (_set("args.Input Dims", [[2**62, 2**62], ["a"], None, {}]), None),
        (_set("name", None), r"traceEvents\[\d+\]\.name"),
        (_set("cat", 5), r"traceEvents\[\d+\]\.cat"),
        (_set("traceEvents", 3, "top"), "malformed trace: Expected `array`, got `int` - at `traceEvents`"),
        (_set("traceEvents", {}, "top"), "malformed trace: Expected `array`, got `object`"),
        (_set("traceEvents", [None], "top"), r"Expected `object`, got `null` - at `traceEvents\[0\]`"),
        (_set("traceEvents", [3, []], "top"), r"at `traceEvents\[0\]`"),
        (_set("deviceProperties", 3, "top"), "deviceProperties"),
        (_set("distributedInfo", {"rank": "x", "world_size": -1}, "top"), None),
        (_set("distributedInfo", 3, "top"), "distributedInfo"),
    ],
)
def test_fields_of_the_wrong_type_or_out_of_range(tmp_path: Path, patch: Any, outcome: str | None) -> None:
    path = _trace_with(tmp_path, "t.json", patch)
    before = snapshot(path)
    if outcome is None or outcome.startswith("skipped"):
        trace = load_trace(path)
        if outcome is not None:
            assert any(outcome in w for w in trace.warnings), trace.warnings
        for step in (None, "all", "trace"):
            try:
                simulate(build_graph(trace, step))
            except DaydreamError as exc:
                assert "\n" not in str(exc)
    else:
        with pytest.raises(TraceError, match=outcome) as info:
            load_trace(path)
        assert str(info.value).startswith(f"{path}: ")
    assert snapshot(path) == before


@pytest.mark.parametrize(
    ("data", "outcome"),
    [
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": NaN, "dur": 1}]}', "not valid JSON"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": Infinity, "dur": 1}]}', "not valid JSON"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1e400, "dur": 1}]}', "Number out of range"),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": -1e400, "dur": 1}]}',
            "Number out of range",
        ),
        (b'"traceEvents"', "not JSON (starts with"),
        (b"12", "not JSON (starts with"),
        (b"null", "not JSON (starts with"),
        (b'{"traceEvents": [1, 2', "malformed trace: Expected `object`, got `int`"),
        (b'{"traceEvents": [{}, {', "not valid JSON"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\\udcff", "ts": 1, "dur": 1}]}', "not valid JSON"),
        (b'[{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}]', None),  # the Chrome "JSON array format"
        (b'\n\n  {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}]}', None),
    ],
)
def test_json_that_is_not_a_usable_trace(tmp_path: Path, data: bytes, outcome: str | None) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(data)
    if outcome is None:
        pipeline(path)
        return
    with pytest.raises(TraceError, match=re.escape(outcome)) as info:
        load_trace(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


def test_a_malformed_sidecar_is_a_warning(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.json", make_trace())
    sidecar = tmp_path / "t.daydream.json"
    for text, message in [
        ('{"format": "daydream.recording/1", "x": ' + _deep(2000) + "}", "JSON nested too deeply at byte"),
        ('{"format": "daydream.recording/1", "x": ' + _deep(70) + "}", "recording metadata nests more than 64 levels"),
        ('{"format": "daydream.recording/1", "backend": "\xff"}', None),
        ("", "empty file, expected recording metadata"),
        ("[1]", "not JSON (starts with"),
    ]:
        sidecar.write_bytes(text.encode("latin-1"))
        loaded = load_trace(trace)
        if message is None:
            assert loaded.recording is not None and loaded.recording.backend == "\ufffd"
        else:
            assert loaded.recording is None
            assert any(
                w.startswith(f"recording metadata next to the trace not used: {sidecar}: ") and message in w
                for w in loaded.warnings
            ), loaded.warnings
