"""`daydream simulate` of one trace imports what it runs: the what-if language, scenario comparison and the
multi-GPU job's collective models are for other commands (together 0.2 s of a 0.7 s run on a small trace)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "daydream" / "examples" / "mlp_cpu.json.gz"


def _imported(*argv: str) -> set[str]:
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "daydream", *argv], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}


def test_simulate_of_one_trace_leaves_the_other_commands_unimported() -> None:
    modules = _imported("simulate", str(EXAMPLE), "--json")
    assert {
        "daydream.api.replay",
        "daydream.presentation.terminal",
        "daydream.simulation.engine",
    } <= modules  # the probe sees imports
    assert not modules & {
        "daydream.dsl",
        "daydream.api.compare",
        "daydream.api.whatif",
        "daydream.api.job",
        "daydream.perf.collectives",
        "lark",
    }
