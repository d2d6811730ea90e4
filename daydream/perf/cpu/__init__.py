"""The CPU: the host-side overheads of Lin et al. (T1..T5, HiPC 2022), the end-to-end iteration estimate built on
them, PyTorch's intra-op threads on the host's cores and a fused optimizer step.

From the trace's own top-level ops (``top_level_ops``, ``graph_ops``), their overhead table (``overhead_table``,
``overhead_lookup``), the recording sidecar's measured thread speedup (``host``) and a for-loop optimizer step's
own ops (``optimizer_step``); ``overheads`` names which module does what.
"""
