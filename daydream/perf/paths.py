"""Where the measured data for the models lives (``kernels/`` in the source tree, package data when installed)."""

from __future__ import annotations

from pathlib import Path

KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels"
DATA_DIR = KERNELS_DIR / "data"
