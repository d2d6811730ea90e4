"""Performance models: what work nobody measured would cost (kernels, collectives, CPU overheads)."""

from daydream.perf.accuracy import Accuracy, gmae

__all__ = ["Accuracy", "gmae"]
