"""The terminal sessions the docs show (a ```text block whose first line is `$ COMMAND`) print what the docs say:
run here, their output must match the block line for line, so that no figure in them goes stale."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


def _sessions() -> list[tuple[str, str, list[str]]]:
    out = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for block in re.findall(r"```text\n(.*?)```", doc.read_text(encoding="utf-8"), re.S):
            lines = block.rstrip("\n").split("\n")
            if lines and lines[0].startswith("$ ") and "daydream " in lines[0]:
                out.append((doc.name, lines[0][2:], lines[1:]))
    return out


SESSIONS = _sessions()


def test_the_docs_show_sessions() -> None:
    assert SESSIONS, "no `$ daydream ...` session in docs/"


@pytest.mark.parametrize(("doc", "command", "expected"), SESSIONS, ids=[f"{d}: {c[:40]}" for d, c, _ in SESSIONS])
def test_a_session_prints_what_the_docs_say(doc: str, command: str, expected: list[str]) -> None:
    if "../shared/" in command and not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent")
    shell = command.replace("daydream ", f"{sys.executable} -m daydream ")
    run = subprocess.run(
        shell, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "120"}
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.rstrip("\n").split("\n") == expected, f"{doc}: `{command}` prints\n{run.stdout}"
