"""How far to trust the models: a model's error as the papers state it (``accuracy``: GMAE) and a predicted step
time's 90% interval (``uncertainty``).

From held-out data (each model's own check), the trace's step-to-step noise and the validation ledger's errors
(kernels/data/ledger_errors.json). Every room states its error here, so this room imports none of them.
"""
