"""validation/record.py, the corpus's recording script: which settings, in which order, numbered how, and what a
deadline, a timeout or a failing setting does (the recording itself stubbed: no torch, no GPU)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "validation" / "record.py"


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, list[tuple[str, int]]]:
    spec = importlib.util.spec_from_file_location("validation_record", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls: list[tuple[str, int]] = []
    monkeypatch.setattr(module, "record", lambda name, run, out, timeout=None, smoke=False: calls.append((name, run)))
    return module, calls


def test_runs_go_round_robin_and_number_from_first_run(script, tmp_path: Path) -> None:
    module, calls = script
    assert module.main(["--only", "base", "foreach", "--runs", "2", "--first-run", "3", "--out", str(tmp_path)]) == 0
    assert calls == [("base", 3), ("foreach", 3), ("base", 4), ("foreach", 4)]


def test_cpu_settings_by_default_gpu_ones_with_gpu_memory_ones_with_memory(script, tmp_path: Path) -> None:
    module, calls = script
    groups = {}
    for flag in ([], ["--gpu"], ["--memory"]):
        calls.clear()
        module.main([*flag, "--runs", "1", "--out", str(tmp_path)])
        groups[tuple(flag)] = {name for name, _ in calls}
    cpu, gpu, memory = groups[()], groups[("--gpu",)], groups[("--memory",)]
    assert "base" in cpu and not any(n.startswith(("gpu/", "memory/")) for n in cpu)
    assert gpu and all(n.startswith("gpu/") for n in gpu)
    assert {
        "memory/base",
        "memory/batch256",
        "memory/checkpoint",
        "memory/batch64acc2",
        "memory/accumulate2",
        "memory/sgd",
        "memory/amp",
    } <= memory and all(n.startswith("memory/") for n in memory)
    assert gpu | cpu | memory == set(module.SETTINGS)


def test_memory_settings_record_with_profile_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("validation_record", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    commands: list[list[str]] = []
    monkeypatch.setattr(module.subprocess, "run", lambda cmd, **kw: commands.append(cmd))
    module.record("memory/batch64acc2", 2, tmp_path)
    module.record("base", 1, tmp_path)
    memory, plain = commands
    assert "--profile-memory" in memory and "--profile-memory" not in plain
    assert memory[memory.index("--out") + 1] == str(tmp_path / "memory" / "batch64acc2" / "run2")
    program = memory[memory.index("--") + 1 :]
    assert program[1] == "examples/mlp.py" and program[-6:-2] == ["--batch", "64", "--accumulate", "2"]


def test_gpu_memory_compile_and_smoke_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The GPU memory pairs record with --profile-memory; torch.compile settings get the warm-up steps their
    compilation takes; --smoke runs a GPU setting on the CPU at a tiny size, the setting's own arguments last."""
    spec = importlib.util.spec_from_file_location("validation_record", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    commands: list[list[str]] = []
    monkeypatch.setattr(module.subprocess, "run", lambda cmd, **kw: commands.append(cmd))
    module.record("gpu/memory/transformer/batch32", 1, tmp_path)
    module.record("gpu/mlp/compile_ro", 1, tmp_path)
    module.record("gpu/memory/resnet/batch128", 1, tmp_path, smoke=True)
    memory, compiled, smoke = commands
    assert "--profile-memory" in memory and "--profile-memory" not in compiled
    assert memory[-4:-2] == ["--batch", "32"] and "cuda" in memory  # then --steps
    assert compiled[compiled.index("--warmup") + 1] == "5" and memory[memory.index("--warmup") + 1] == "3"
    assert compiled[-5:-2] == ["--compile", "--compile-mode", "reduce-overhead"]
    program = smoke[smoke.index("--") + 1 :]
    assert "cuda" not in program and program[program.index("--device") + 1] == "cpu"
    last = lambda option: program[len(program) - program[::-1].index(option)]  # noqa: E731 (argparse: the last wins)
    assert last("--image") == "32" and last("--batch") == "128"  # the tiny size, the setting's own batch


def test_a_deadline_keeps_the_rounds_whole(script, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    module, calls = script
    clock = iter(range(0, 1000, 10))  # the clock advances 10 s at each reading
    monkeypatch.setattr(module.time, "monotonic", lambda: next(clock))
    assert module.main(["--only", "base", "foreach", "--runs", "5", "--deadline", "45", "--out", str(tmp_path)]) == 0
    assert calls == [("base", 1), ("foreach", 1), ("base", 2), ("foreach", 2)]
    assert "stopped after 2 runs of each setting" in capsys.readouterr().out


def test_a_failing_setting_stops_the_recording_or_is_dropped(
    script, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    module, calls = script

    def record(name: str, run: int, out: Path, timeout: float | None = None, smoke: bool = False) -> None:
        if name == "foreach":
            raise subprocess.CalledProcessError(2, ["python"], stderr="no CUDA device here")
        if name == "threads1":
            raise subprocess.TimeoutExpired(["python"], timeout or 0, stderr=b"stuck")
        calls.append((name, run))

    monkeypatch.setattr(module, "record", record)
    args = ["--only", "base", "foreach", "threads1", "--runs", "2", "--out", str(tmp_path)]
    assert module.main(args) == 1 and calls == [("base", 1)]  # the first failure ends it
    assert capsys.readouterr().out.count("FAILED") == 1
    calls.clear()
    assert module.main([*args, "--keep-going", "--run-timeout", "5"]) == 1  # the others recorded, the exit says so
    assert calls == [("base", 1), ("base", 2)]
    out = capsys.readouterr().out
    assert (
        "FAILED foreach run 1 (exit 2):\nno CUDA device here" in out
        and "FAILED threads1 run 1 (timed out):\nstuck" in out
    )
    assert out.count("FAILED") == 2  # a dropped setting is not tried again


@pytest.mark.parametrize("args", [["--runs", "0"], ["--first-run", "0"], ["--only", "nosuch"]])
def test_bad_options_say_so(args: list[str]) -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)
    assert out.returncode == 2 and "error:" in out.stderr and "Traceback" not in out.stderr
