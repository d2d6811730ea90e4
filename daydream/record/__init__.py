"""Recording traces: ``daydream record -- python train.py`` or, inside a program, :func:`record` and :func:`step`.

Importing this package does not import torch; the recorder itself needs it (``pip install 'daydream-whatif[record]'``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["RecordError", "RecordOptions", "RecordResult", "Recorder", "record", "step"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from daydream.record import recorder

        return getattr(recorder, name)
    raise AttributeError(f"module 'daydream.record' has no attribute {name!r}")
