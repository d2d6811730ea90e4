"""Where work fans out: a Ray cluster (optional dependency) for ``--ray ADDRESS``. Local worker processes are
``concurrent.futures`` with the ``spawn`` context, used directly where they are needed."""

from __future__ import annotations

from types import ModuleType

from daydream.errors import DaydreamError


def connect_ray(address: str, cpus: int) -> ModuleType:
    """The ``ray`` module, connected to the cluster at ``address`` (``ray://host:10001``, ``auto``) or to a Ray
    started on this machine with ``cpus`` CPUs (``local``). The workers read inputs at the same paths as this
    process: they must be on storage the cluster shares."""
    try:
        import ray
    except ImportError:
        raise DaydreamError("--ray needs Ray: pip install 'ray[default]' (local worker processes: --jobs N)") from None
    if not ray.is_initialized():
        try:
            ray.init(address=None if address == "local" else address, ignore_reinit_error=True, log_to_driver=False,
                     include_dashboard=False, num_cpus=cpus if address == "local" else None)  # fmt: skip
        except Exception as exc:  # Ray raises ConnectionError, ValueError, RuntimeError... by what went wrong
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DaydreamError(f"--ray {address}: no Ray cluster reached ({why})") from None
    return ray
