"""The .whatif language: parse scripts, check them, run them on a graph (``Session``)."""

from daydream.dsl import job_functions as _job_functions  # noqa: F401 - registers the multi-rank job's functions
from daydream.dsl import model_functions as _model_functions  # noqa: F401 - registers the performance models as functions
from daydream.dsl import sharding_functions as _sharding_functions  # noqa: F401 - registers the embedding-sharding functions
from daydream.dsl.ast import Script
from daydream.dsl.functions import FUNCTIONS, register_function
from daydream.dsl.interpret import Effect, Session, copy_graph
from daydream.dsl.parse import parse_expression, parse_script

__all__ = [
    "FUNCTIONS",
    "Effect",
    "Script",
    "Session",
    "copy_graph",
    "parse_expression",
    "parse_script",
    "register_function",
]
