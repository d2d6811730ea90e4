"""The Python API a notebook uses: a run and what is built from runs.

A :class:`~daydream.api.workload.Workload` (a trace or a job folder, with its step, execution trace, link and
workers) is loaded once and run with :class:`~daydream.api.workload.RunOptions`; ``whatif`` runs .whatif scripts on it
and returns a ``WhatIf`` (the prediction with its interval), ``replay`` the baseline alone (a ``Replay``, a
``JobReplay`` for a job); ``job`` loads a job folder's ranks into one graph. Above those: ``compare`` (scenarios and
saved results side by side), ``validate`` (the ledger of measured before/after pairs), ``demo``, ``analyses`` (XSP's
tables over a timeline) and ``embeddings`` (hot embedding rows from real inputs). Results are msgspec structs of
plain data; :mod:`daydream.presentation` renders them and :mod:`daydream.commands` is the command line over them.
"""
