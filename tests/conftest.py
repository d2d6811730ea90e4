from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# pytest imports readline, which exports COLUMNS=80 (and LINES) to every process a test starts, though not into
# os.environ: each command's lines would wrap at 80 where its test asked for no width. A test that wants one passes
# COLUMNS itself (tests/test_columns.py).
os.unsetenv("COLUMNS")
os.unsetenv("LINES")

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not available: {SHARED_TRACES} is absent")
    return SHARED_TRACES
