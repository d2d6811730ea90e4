"""The example training scripts (examples/*.py) run on the CPU at tiny sizes and reject bad option combinations.

Each run is a subprocess, as a user (or the recorder, through runpy.run_path) runs them. Most of a run is importing
torch, so the runs start together (one per CPU core at a time) when the first test asks for one; each uses one
thread, so that they do not oversubscribe the cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TIMEOUT = 180
TINY = ["--steps", "2", "--device", "cpu"]


def _words(text: str) -> list[str]:
    return text.split()


# each script once at tiny sizes, each run covering some of the shared options
CASES = {
    "mlp-bf16-adam-foreach": ["mlp.py", *_words("--width 32 --depth 2 --amp bf16 --optimizer adam-foreach --log")],
    "cnn-checkpoint": ["cnn.py", *_words("--depth 14 --width 4 --image 16 --batch 2 --checkpoint")],
    "transformer-checkpoint-dataloader": [
        "transformer.py",
        *_words("--layers 1 --hidden 32 --heads 2 --seq 8 --vocab 50 --batch 4 --checkpoint"),
        *_words("--workers 2 --transform-us 50 --log"),
    ],
    "transformer-cls-adam-fused": [
        "transformer.py",
        *_words("--layers 1 --hidden 16 --heads 2 --seq 8 --vocab 50 --head cls --optimizer adam-fused"),
    ],
    "dlrm-tables-on-cpu-zipf": [
        "dlrm.py",
        *_words("--tables 3 --rows 100 --dim 4 --pooling 3 --zipf 1.05 --bottom 8 --top 8 --batch 16 --tables-on-cpu"),
    ],
}

# The recorder runs a script with runpy.run_path(path, run_name="__main__"); examples/record_bundled.py imports
# mlp.train(steps, on_step=...). Both from another directory.
RUNPY = f"""
import runpy, sys
sys.argv = ["dlrm.py", "--steps", "2", "--device", "cpu", "--rows", "50", "--tables", "2", "--batch", "8"]
runpy.run_path({str(EXAMPLES / "dlrm.py")!r}, run_name="__main__")
sys.path.insert(0, {str(EXAMPLES)!r})
from mlp import train
calls = []
train(steps=3, batch=4, width=16, on_step=lambda: calls.append(1))
assert len(calls) == 3, calls
print("ok")
"""

JOBS = {
    **{name: [str(EXAMPLES / script), *TINY, *options] for name, (script, *options) in CASES.items()},
    "cuda-graphs-on-cpu": [str(EXAMPLES / "mlp.py"), *TINY, "--cuda-graphs"],
    "help": [str(EXAMPLES / "dlrm.py"), "--help"],
    "sparse-adam": [str(EXAMPLES / "dlrm.py"), *TINY, "--sparse", "--optimizer", "adam"],
    "runpy": ["-c", RUNPY],
}


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    cwd = tmp_path_factory.mktemp("examples")  # not the repository: the scripts must not depend on the cwd
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        yield {name: pool.submit(_run, args, cwd) for name, args in JOBS.items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_script_runs(case: str, runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    result = runs[case].result()
    if "adam-fused" in CASES[case] and "has no fused Adam on cpu" in result.stderr:
        pytest.skip("this torch has no fused Adam on the CPU")  # the script says so (exit status 2), as it should
    assert result.returncode == 0, result.stderr
    if "--log" in CASES[case]:
        assert "step time over steps 1-2: mean" in result.stdout
    else:
        assert result.stdout == ""  # nothing printed without --log


def test_cuda_graphs_on_cpu_is_a_usage_error(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    result = runs["cuda-graphs-on-cpu"].result()
    assert result.returncode == 2
    assert "--cuda-graphs needs a CUDA device" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_and_bad_combinations(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    result = runs["help"].result()
    assert result.returncode == 0, result.stderr
    assert "--tables-on-cpu" in result.stdout and "--cuda-graphs" in result.stdout and "--transform-us" in result.stdout
    result = runs["sparse-adam"].result()
    assert result.returncode == 2
    assert "--sparse needs --optimizer sgd" in result.stderr and "Traceback" not in result.stderr


def test_runpy_and_record_bundled_entry_point(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    result = runs["runpy"].result()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
