"""daydream record: examples recorded on CPU through the CLI, module mapping in the graph, failures, the Python API."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import venv
from collections import Counter
from pathlib import Path

import pytest

from daydream import build_graph, load_trace, simulate
from daydream.errors import DaydreamError
from daydream.graph.gradients import gradients
from daydream.record.command import default_out, program_command

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
# Small sizes: each example records in a few seconds on two cores.
EXAMPLE_ARGS = {
    "mlp": ["--width", "64", "--batch", "8"],
    "cnn": ["--width", "8", "--image", "16", "--batch", "4"],
    "transformer": ["--layers", "2", "--hidden", "32", "--heads", "2", "--seq", "16", "--vocab", "100", "--batch", "2"],
    "dlrm": ["--tables", "3", "--rows", "1000", "--dim", "8", "--batch", "16"],
}
# Ops of a step that belong to no module: the seed gradient of loss.backward(), and a functional loss.
NOT_IN_A_MODULE = {"aten::ones_like"}


def daydream(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daydream", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def record_example(name: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return daydream(
        "record",
        "--out",
        str(out),
        *extra,
        "--",
        sys.executable,
        str(EXAMPLES / f"{name}.py"),
        "--steps",
        "8",
        "--device",
        "cpu",
        *EXAMPLE_ARGS[name],
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("recorded")
    out = {}
    for name in EXAMPLE_ARGS:
        extra = ["--embedding-stats", "--execution-trace"] if name == "dlrm" else []
        proc = record_example(name, base / name, *extra)
        assert proc.returncode == 0, proc.stderr
        assert "recorded steps 2..4" in proc.stdout
        out[name] = base / name
    return out


def _layers_by_phase(graph: object) -> dict[str, Counter[str]]:
    by: dict[str, Counter[str]] = {"forward": Counter(), "backward": Counter()}
    for _, a in graph.nodes(data=True):  # type: ignore[attr-defined]
        if a["phase"] in by and a["layer"] is not None:
            by[a["phase"]][a["layer"]] += 1
    return by


@pytest.mark.parametrize("name", list(EXAMPLE_ARGS))
def test_recorded_example_simulates_with_layers(recorded: dict[str, Path], name: str) -> None:
    trace = recorded[name] / "rank0.json.gz"
    meta = json.loads((recorded[name] / "rank0.daydream.json").read_text())
    assert meta["steps"]["complete"] and meta["steps"]["recorded"] == 3 and meta["device"]["type"] == "cpu"
    # the host's intra-op threads and usable cores, which the threads model reads
    assert meta["host"]["threads"] >= 1 and meta["host"]["cores"] >= 1
    # and the speedup of threaded work on 1, 2, 4, ... threads up to the cores, measured as the recording ended
    speedup = meta["host"]["thread_speedup"]
    assert speedup[0] == [1, 1.0] and speedup[-1][0] == meta["host"]["cores"] and all(s > 0 for _, s in speedup)
    graph = build_graph(load_trace(trace))
    assert graph.graph["recording"]["format"] == "daydream.recording/1"
    # the steady step of the three, after the step before it (its context)
    assert [(s.name, s.context) for s in graph.graph["steps"]] == [("ProfilerStep#2", True), ("ProfilerStep#3", False)]
    timeline = simulate(graph)
    assert timeline.step_us() == pytest.approx(graph.graph["measured_us"], rel=0.02)
    # Every forward and backward op of the step is some module's, but for the ops no module runs.
    unmapped = [
        a["name"] for _, a in graph.nodes(data=True) if a["phase"] in ("forward", "backward") and a["layer"] is None
    ]
    allowed = NOT_IN_A_MODULE | ({"aten::cross_entropy_loss", "aten::flatten"} if name == "transformer" else set())
    assert {n for n in unmapped if not n.startswith("autograd::engine::evaluate_function")} <= allowed
    if name != "transformer":  # the transformer's loss is functional (F.cross_entropy): its backward has no module
        assert [n for n in unmapped if n.startswith("autograd::")] == []
    # Each module with parameters runs forward ops and backward ops (its own and its gradients' accumulation).
    by_phase = _layers_by_phase(graph)
    with_params = [m["path"] for m in meta["modules"] if m["parameters"]]
    assert with_params
    for path in with_params:
        assert by_phase["forward"][path] > 0, path
        assert by_phase["backward"][path] > 0, path


def test_mlp_ops_map_to_their_modules(recorded: dict[str, Path]) -> None:
    graph = build_graph(load_trace(recorded["mlp"] / "rank0.json.gz"), context=False)  # one step's ops
    seen: dict[tuple[str, str], Counter[str]] = {}
    for _, a in graph.nodes(data=True):
        if a["phase"] in ("forward", "backward") and a["layer"] is not None:
            name = a["name"].removeprefix("autograd::engine::evaluate_function: ")
            seen.setdefault((a["phase"], a["layer"]), Counter())[name] += 1
    meta = json.loads((recorded["mlp"] / "rank0.daydream.json").read_text())
    linears = [m["path"] for m in meta["modules"] if m["type"] == "Linear"]
    relus = [m["path"] for m in meta["modules"] if m["type"] == "ReLU"]
    assert linears[-1] == "MLP.head" and linears[0] == "MLP.body.0" and relus[0] == "MLP.body.1"
    for path in linears:
        assert seen[("forward", path)] == Counter({"aten::linear": 1})
        # addmm's backward, the weight transpose's, and one accumulation per parameter (weight, bias)
        assert seen[("backward", path)] == Counter(
            {"AddmmBackward0": 1, "TBackward0": 1, "torch::autograd::AccumulateGrad": 2}
        )
    for path in relus:
        assert seen[("forward", path)] == Counter({"aten::relu": 1})
        assert seen[("backward", path)] == Counter({"ReluBackward0": 1})
    assert seen[("forward", "CrossEntropyLoss")] == Counter({"aten::cross_entropy_loss": 1})
    # the gradients a DDP what-if buckets: one per parameter, sized from the shapes under the recorder's range
    grads = gradients(graph)
    params = [p for m in meta["modules"] for p in m["parameters"]]
    assert len(grads) == len(params) and sum(g.nbytes for g in grads) == sum(p["bytes"] for p in params)
    # each knows its module, in the order backward reaches them: the head first, body.0 last
    assert Counter(g.layer for g in grads) == Counter({path: 2 for path in linears})
    assert grads[0].layer == "MLP.head" and grads[-1].layer == "MLP.body.0"


def test_recording_metadata(recorded: dict[str, Path]) -> None:
    meta = json.loads((recorded["dlrm"] / "rank0.daydream.json").read_text())
    assert meta["rank"] == 0 and meta["world_size"] == 1
    assert meta["steps"]["counted_from"] == "optimizer" and len(meta["steps"]["wall_ms"]) == 5
    assert meta["environment"]["torch"] == torch.__version__
    assert [o["type"] for o in meta["optimizers"]] == ["SGD"] and meta["optimizers"][0]["parameters"] > 3
    tables = meta["embeddings"]
    assert len(tables) == 3
    for t in tables:
        assert t["type"] == "EmbeddingBag" and t["rows"] == 1000 and t["dim"] == 8
        assert t["steps_sampled"] == 2 and t["lookups_per_step"] > 0 and t["pooling"] > 0
        shares = list(t["hot_share"].values())
        assert shares == sorted(shares) and 0 < shares[-1] <= 1
    # the execution trace, found by name and linked to the Kineto ops
    assert (recorded["dlrm"] / "rank0.et.json.gz").is_file()
    trace = load_trace(recorded["dlrm"] / "rank0.json.gz")
    assert trace.et_ops and trace.recording is not None


def test_crashing_program_keeps_partial_trace(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(
        "import torch\n"
        "m = torch.nn.Linear(8, 8); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for i in range(10):\n"
        "    m(torch.randn(4, 8)).sum().backward(); opt.step(); opt.zero_grad()\n"
        "    if i == 3:\n"
        "        raise RuntimeError('boom at step 3')\n"
    )
    proc = daydream("record", "--out", str(tmp_path / "out"), "--", sys.executable, str(script))
    assert proc.returncode == 1
    assert "RuntimeError: boom at step 3" in proc.stderr  # the program's own traceback, from its frames
    assert "launch.py" not in proc.stderr and "runpy" not in proc.stderr
    assert "the program failed after 4 of 5 steps" in proc.stderr and "partial trace kept" in proc.stderr
    trace = tmp_path / "out" / "rank0.json.gz"
    graph = build_graph(load_trace(trace), step="all")
    assert [s.name for s in graph.graph["steps"]][0] == "ProfilerStep#2"
    meta = json.loads((tmp_path / "out" / "rank0.daydream.json").read_text())
    assert meta["error"] == "RuntimeError: boom at step 3" and not meta["steps"]["complete"]


def test_program_that_exits_without_cleanup_leaves_no_temporaries(tmp_path: Path) -> None:
    """os._exit mid-recording skips the recorder's cleanup: the half-written execution trace (.et...tmp) it left
    is removed by the parent, which knows the program is gone."""
    script = tmp_path / "hard_exit.py"
    script.write_text(
        "import os, torch\n"
        "m = torch.nn.Linear(8, 8); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for i in range(10):\n"
        "    m(torch.randn(4, 8)).sum().backward(); opt.step(); opt.zero_grad()\n"
        "    if i == 3:\n"
        "        os._exit(5)\n"
    )
    out = tmp_path / "out"
    proc = daydream("record", "--execution-trace", "--out", str(out), "--", sys.executable, str(script))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "before the recorder could report" in proc.stderr
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


@pytest.mark.slow
def test_program_that_never_steps(tmp_path: Path) -> None:
    script = tmp_path / "nostep.py"
    script.write_text(
        "import torch\nm = torch.nn.Linear(8, 8)\nfor i in range(5):\n    m(torch.randn(4, 8)).sum().backward()\n"
    )
    proc = daydream("record", "--out", str(tmp_path / "a"), "--", sys.executable, str(script))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "ran no training step" in proc.stderr and "no step was being recorded, so there is no trace" in proc.stderr
    # recording from the first step on: what ran is kept
    proc = daydream("record", "--warmup", "0", "--out", str(tmp_path / "b"), "--", sys.executable, str(script))
    assert proc.returncode == 1 and "partial trace kept" in proc.stderr
    assert load_trace(tmp_path / "b" / "rank0.json.gz").cpu_ops


def test_program_exit_code_is_kept(tmp_path: Path) -> None:
    script = tmp_path / "exit.py"
    script.write_text("import sys\nsys.exit(7)\n")
    proc = daydream("record", "--out", str(tmp_path / "o"), "--", sys.executable, str(script))
    assert proc.returncode == 7 and "the program exited with code 7 after 0 of 5 steps" in proc.stderr


def test_no_torch_in_the_program_environment(tmp_path: Path) -> None:
    env_dir = tmp_path / "bare"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    proc = daydream("record", "--", str(python), str(EXAMPLES / "mlp.py"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"torch is not installed for {python}" in proc.stderr and "daydream-whatif[record]" in proc.stderr


def test_bad_commands(tmp_path: Path) -> None:
    for args, message in [
        ([], "give the program to run after --"),
        (["bash", "x.sh"], "runs Python programs"),
        ([sys.executable, str(tmp_path / "missing.py")], "no such script"),
        ([sys.executable, "-c", "pass"], "not -c code"),
        ([sys.executable], "no script to run"),
    ]:
        proc = daydream("record", "--", *args)
        assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
    proc = daydream("record", "--steps", "0", "--", sys.executable, str(EXAMPLES / "mlp.py"))
    assert proc.returncode == 1 and "--steps must be at least 1" in proc.stderr


def test_program_command_keeps_interpreter_options() -> None:
    cmd = program_command(["--", sys.executable, "-u", "-W", "ignore", str(EXAMPLES / "mlp.py"), "--steps", "3"])
    assert cmd[:4] == [sys.executable, "-u", "-W", "ignore"] and cmd[4] == "-c"
    assert cmd[6:] == [str(EXAMPLES / "mlp.py"), "--steps", "3"]
    assert program_command([sys.executable, "-m", "pkg.train", "-x"])[-3:] == ["-m", "pkg.train", "-x"]
    with pytest.raises(DaydreamError, match="runs Python programs"):
        program_command(["torchrun", "train.py"])
    assert default_out(["--", "python", "examples/mlp.py"]) == "mlp-trace"
    assert default_out(["python", "-m", "pkg.train"]) == "train-trace"


def test_module_program_and_keep_running(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(
        "import sys, torch\n"
        "m = torch.nn.Linear(4, 4); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for i in range(int(sys.argv[1])):\n"
        "    m(torch.randn(2, 4)).sum().backward(); opt.step()\n"
        "print('finished', i)\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "daydream",
            "record",
            "--keep-running",
            "--json",
            "--warmup",
            "1",
            "--steps",
            "2",
            "--out",
            "o",
            "--",
            sys.executable,
            "-m",
            "pkg.train",
            "6",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip().splitlines()
    assert out[0] == "finished 5"  # the program ran to its end
    report = json.loads("\n".join(out[1:]))
    assert report["complete"] and report["steps_seen"] == 3 and report["trace"].endswith("o/rank0.json.gz")


def test_python_api_steps(tmp_path: Path) -> None:
    from torch import nn

    from daydream.record import RecordError, record, step

    a, b = nn.Linear(4, 4), nn.Linear(4, 1)
    oa, ob = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.Adam(b.parameters())
    # two optimizers per iteration: one step each iteration, ended by the last of them
    with record(str(tmp_path / "two"), warmup=1, steps=2) as rec:
        for _ in range(6):
            b(a(torch.randn(8, 4))).sum().backward()
            oa.step()
            ob.step()
    assert rec.result is not None and rec.result.complete and rec.result.steps_seen == 3
    meta = json.loads((tmp_path / "two" / "rank0.daydream.json").read_text())
    assert [o["type"] for o in meta["optimizers"]] == ["SGD", "Adam"]
    graph = build_graph(load_trace(tmp_path / "two" / "rank0.json.gz"), step="all")
    assert [s.name for s in graph.graph["steps"]] == ["ProfilerStep#1", "ProfilerStep#2"]
    for s in ("ProfilerStep#1", "ProfilerStep#2"):  # each step holds both optimizers' steps
        regions = {x["region"] for _, x in graph.nodes(data=True) if x["step"] == s and x["phase"] == "optimizer"}
        assert {r.split("#")[0] for r in regions if r} >= {"Optimizer.step"}
        assert {r for r in regions if r and "step" in r} == {"Optimizer.step#SGD.step", "Optimizer.step#Adam.step"}
    # explicit steps, without torch.optim
    with record(str(tmp_path / "explicit"), warmup=0, steps=2) as rec:
        for _ in range(3):
            a(torch.randn(8, 4)).sum().backward()
            step()
    assert rec.result is not None and rec.result.complete
    assert (
        json.loads((tmp_path / "explicit" / "rank0.daydream.json").read_text())["steps"]["counted_from"] == "explicit"
    )
    step()  # outside a recording: nothing happens
    with (
        pytest.raises(RecordError, match="ended after 2 of 4 steps"),
        record(str(tmp_path / "short"), warmup=2, steps=2),
    ):
        for _ in range(2):
            a(torch.randn(8, 4)).sum().backward()
            oa.step()


def _memory_events(trace: Path) -> tuple[list[dict], list[dict]]:
    """The trace's [memory] events and its ProfilerStep ranges."""
    with gzip.open(trace) as fh:
        events = json.load(fh)["traceEvents"]
    memory = [e for e in events if e.get("name") == "[memory]"]
    steps = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    return memory, steps


def test_profile_memory_records_allocations(tmp_path: Path) -> None:
    proc = record_example("mlp", tmp_path / "mem", "--profile-memory", "--warmup", "1", "--steps", "2")
    assert proc.returncode == 0, proc.stderr
    trace = tmp_path / "mem" / "rank0.json.gz"
    memory, steps = _memory_events(trace)
    assert [s["name"] for s in steps] == ["ProfilerStep#1", "ProfilerStep#2"] and memory
    for e in memory:  # instant events on the CPU, with the allocator's running totals
        assert e["ph"] == "i" and e["cat"] == "cpu_instant_event"
        assert {"Addr", "Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id"} <= set(e["args"])
        assert e["args"]["Device Type"] == 0 and e["args"]["Total Allocated"] >= 0
    for s in steps:  # every step allocates (activations, gradients) and frees
        mine = [e["args"]["Bytes"] for e in memory if s["ts"] <= e["ts"] <= s["ts"] + s["dur"]]
        assert min(mine) < 0 < max(mine)
    # the width-64 MLP's gradients (4 x 64 x 64 + 64, and the head's) are alive at the end of each step
    grads = 4 * (64 * 64 + 64) * 4 + (64 * 10 + 10) * 4
    assert max(e["args"]["Total Allocated"] for e in memory) > grads
    graph = build_graph(load_trace(trace))  # the memory events leave the graph and its replay as they were
    assert simulate(graph).step_us() == pytest.approx(graph.graph["measured_us"], rel=0.02)


def test_profile_memory_python_api(tmp_path: Path) -> None:
    from torch import nn

    from daydream.record import record

    model = nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for name, flag in (("plain", False), ("memory", True)):
        with record(str(tmp_path / name), warmup=1, steps=1, profile_memory=flag):
            for _ in range(3):
                model(torch.randn(32, 16)).sum().backward()
                opt.step()
    assert not _memory_events(tmp_path / "plain" / "rank0.json.gz")[0]  # off by default
    assert _memory_events(tmp_path / "memory" / "rank0.json.gz")[0]


def test_the_sidecar_keeps_the_allocators_peak_over_the_recorded_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU the sidecar keeps torch.cuda.max_memory_allocated()/max_memory_reserved() of the recorded steps alone
    (the peak is reset when they begin), the measured peak a memory what-if is checked against. The CPU build has no
    CUDA, so a stand-in allocator counts the steps: a warm-up step's larger peak must not show."""
    from torch import nn

    from daydream.record import metadata, record
    from daydream.trace.recording import read_recording

    seen = {"peak": 0, "now": 0}  # bytes allocated: the most since the last reset, and now

    def allocate(size: int) -> None:
        seen["now"] = size
        seen["peak"] = max(seen["peak"], size)

    def reset() -> None:
        seen["peak"] = seen["now"]

    monkeypatch.setattr(metadata, "reset_device_memory_peak", reset)
    monkeypatch.setattr(
        metadata,
        "device_memory_peak",
        lambda: {"device": "cuda:0", "max_allocated": seen["peak"], "max_reserved": 2 * seen["peak"]},
    )
    model = nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with record(str(tmp_path / "o"), warmup=2, steps=2):
        for size in (900, 800, 300, 200, 100):  # two warm-up steps, two recorded, one after the recording
            allocate(size)  # the step's activations, freed before the optimizer steps
            model(torch.randn(8, 4)).sum().backward()
            allocate(10)
            opt.step()
    peak = read_recording(tmp_path / "o" / "rank0.daydream.json").device_memory
    assert peak is not None and (peak.device, peak.max_allocated, peak.max_reserved) == ("cuda:0", 300, 600)
    cpu = ROOT / "daydream" / "examples" / "mlp_cpu.daydream.json"
    assert read_recording(cpu).device_memory is None  # recorded on the CPU: absent


def test_trace_is_gzip_and_sidecar_is_optional(recorded: dict[str, Path], tmp_path: Path) -> None:
    src = recorded["mlp"] / "rank0.json.gz"
    with gzip.open(src) as fh:
        assert json.load(fh)["traceEvents"]
    copy = tmp_path / "alone.json.gz"
    copy.write_bytes(src.read_bytes())
    graph = build_graph(load_trace(copy))  # no sidecar: still layers (they are in the trace)
    assert graph.graph["recording"] is None
    assert any(a["layer"] == "MLP.body.0" for _, a in graph.nodes(data=True))
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(src.read_bytes())
    (tmp_path / "bad.daydream.json").write_text("{not json")
    trace = load_trace(bad)
    assert trace.recording is None and any("recording metadata" in w for w in trace.warnings)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="DDP over gloo in one process")
def test_ddp_buckets_recorded(tmp_path: Path) -> None:
    script = tmp_path / "ddp.py"
    script.write_text(
        "import os, torch, torch.distributed as dist\n"
        "from torch import nn\n"
        f"dist.init_process_group('gloo', init_method='file://{tmp_path}/store', rank=0, world_size=1)\n"
        "m = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.Linear(256, 10))\n"
        "d = nn.parallel.DistributedDataParallel(m, bucket_cap_mb=0.3)\n"
        "opt = torch.optim.SGD(d.parameters(), lr=0.1)\n"
        "for i in range(8):\n"
        "    d(torch.randn(4, 256)).sum().backward(); opt.step(); opt.zero_grad()\n"
    )
    proc = daydream("record", "--out", str(tmp_path / "o"), "--", sys.executable, str(script))
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "o" / "rank0.daydream.json").read_text())
    assert meta["backend"] == "gloo" and meta["world_size"] == 1
    (ddp,) = meta["ddp"]
    assert ddp["module"] == "Sequential"
    names = [p for b in ddp["buckets"] for p in b["parameters"]]
    assert sorted(names) == sorted(f"Sequential.{i}.{w}" for i in (0, 2, 3) for w in ("weight", "bias"))
    assert names[0].startswith("Sequential.3")  # rebuilt in the order gradients became ready: the last layer first
    assert sum(b["bytes"] for b in ddp["buckets"]) == 4 * (2 * 256 * 256 + 2 * 256 + 2560 + 10)
    graph = build_graph(load_trace(tmp_path / "o" / "rank0.json.gz"))
    assert {a["layer"] for _, a in graph.nodes(data=True) if a["phase"] == "forward"} >= {
        "Sequential.0",
        "Sequential.3",
    }


@pytest.mark.slow
def test_multi_process_job_records_every_rank(tmp_path: Path) -> None:
    """torchrun with two gloo ranks, recording from inside the program: one trace and sidecar per rank."""
    script = tmp_path / "ddp2.py"
    script.write_text(
        "import sys, torch, torch.distributed as dist\n"
        "from torch import nn\n"
        "from daydream.record import record\n"
        "dist.init_process_group('gloo')\n"
        "d = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)))\n"
        "opt = torch.optim.SGD(d.parameters(), lr=0.1)\n"
        "with record(sys.argv[1], warmup=2, steps=2):\n"
        "    for i in range(6):\n"
        "        d(torch.randn(8, 64)).sum().backward(); opt.step(); opt.zero_grad()\n"
        "dist.destroy_process_group()\n"
    )
    out = tmp_path / "job"
    with socket.socket() as sock:  # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(port),
            str(script),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for rank in (0, 1):
        meta = json.loads((out / f"rank{rank}.daydream.json").read_text())
        assert (meta["rank"], meta["world_size"], meta["backend"]) == (rank, 2, "gloo")
        assert meta["ddp"][0]["module"] == "Sequential"
        graph = build_graph(load_trace(out / f"rank{rank}.json.gz"))
        assert (graph.graph["rank"], graph.graph["world_size"]) == (rank, 2)
        assert any(a["layer"] == "Sequential.0" and a["phase"] == "backward" for _, a in graph.nodes(data=True))
