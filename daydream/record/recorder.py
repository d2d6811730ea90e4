"""The recorder: profiles N steady training steps after W warm-up steps, with module ranges and a metadata sidecar.

Steps are the program's own: a step ends when the last optimizer of an iteration finishes ``step()`` (torch's
global optimizer hooks; with several optimizers the recorder learns their order in the first iteration), or at each
explicit :func:`daydream.record.step` call once the program makes one. The profiler runs torch.profiler's
schedule over those steps, so the trace holds ``ProfilerStep#k`` ranges that the graph builder takes as iterations.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.profiler import ProfilerActivity, profile, schedule

from daydream.errors import DaydreamError
from daydream.files import temporary_file, write_atomically
from daydream.record import metadata
from daydream.record.command import RecordError, RecordResult, check_counts
from daydream.record.modules import ModuleNames, ModuleRanges
from daydream.trace.recording import FORMAT, as_recording, encode_recording, recording_path

_active: Recorder | None = None


class RecordingDone(BaseException):  # noqa: N818 - not an error: unwinds the program once the steps are recorded
    """Raised out of the step that completes the recording when the recorder is to end the program there."""


@dataclass
class RecordOptions:
    out: str = "."
    warmup: int = 2
    steps: int = 3
    execution_trace: bool = False
    embedding_stats: bool = False
    profile_memory: bool = False  # the profiler's [memory] events: every allocation and free, with the running totals
    stop: bool = False  # end the program (RecordingDone) once the steps are recorded
    command: list[str] | None = None  # what ran, for the sidecar
    progress: str | None = None  # a file the steps seen so far are written to, for `daydream record`'s progress

    def check(self) -> None:
        check_counts(self.warmup, self.steps)


class Recorder:
    def __init__(self, options: RecordOptions) -> None:
        options.check()
        self.options = options
        self.names = ModuleNames()
        self.ranges: ModuleRanges | None = None
        self.embeddings: metadata.EmbeddingStats | None = None
        self.prof: Any = None
        self.steps_seen = 0
        self.counted_from = "optimizer"
        self.step_times: list[float] = []
        self.optimizers: dict[int, dict[str, Any]] = {}
        self._iteration_optimizers: list[int] = []  # optimizers stepped in the first iteration, in order
        self._last_optimizer: int | None = None  # the one whose step ends an iteration, once known
        self._hook: Any = None
        self._trace_file: str | None = None
        self._et_tmp: str | None = None
        self._complete = False
        self._finished = False
        self._model: dict[str, Any] | None = None  # modules and DDP buckets, taken while the model is alive
        self._device_memory: dict[str, Any] | None = None  # the allocator's peak over the recorded steps

    # ---- lifecycle ----------------------------------------------------------------------------------------------

    def start(self) -> Recorder:
        global _active
        if _active is not None:
            raise DaydreamError("a daydream recording is already running in this process")
        Path(self.options.out).mkdir(parents=True, exist_ok=True)
        self.ranges = ModuleRanges(self.names, on_root_forward=self._root_forward)
        if self.options.embedding_stats:
            self.embeddings = metadata.EmbeddingStats(self.names)
            self.embeddings.active = True
        self._hook = register_optimizer_step_post_hook(self._optimizer_stepped)
        warmup, steps = self.options.warmup, self.options.steps
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        kwargs: dict[str, Any] = {}
        if self.options.execution_trace:
            from torch.profiler import ExecutionTraceObserver

            # named as daydream's temporaries are: the parent removes it if the program ends without cleaning up
            fd, self._et_tmp = temporary_file(self.options.out, "et.json")
            os.close(fd)
            kwargs["execution_trace_observer"] = ExecutionTraceObserver().register_callback(self._et_tmp)
        # The profiler's own warm-up step (traced, discarded) is the last of the program's warm-up steps.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*warmup.*")  # --warmup 0 is the user's choice
            plan = schedule(wait=max(warmup - 1, 0), warmup=min(warmup, 1), active=steps, repeat=1)
        self.prof = profile(
            activities=activities,
            record_shapes=True,
            profile_memory=self.options.profile_memory,
            schedule=plan,
            on_trace_ready=self._export,
            **kwargs,
        )
        self.prof.start()
        if warmup == 0:
            metadata.reset_device_memory_peak()
        self.step_times.append(time.perf_counter())
        _active = self
        return self

    def finish(self, error: BaseException | None = None) -> RecordResult:
        """Stop recording (keeping a partial trace when the window was open), write the sidecar, remove hooks."""
        global _active
        if self._finished:
            return self._result(error)
        self._finished = True
        _active = None if _active is self else _active
        try:
            if self.prof is not None and not self._complete:
                self.prof.stop()  # inside the window this exports what was recorded
            self._save_execution_trace()
        finally:
            if self._hook is not None:
                self._hook.remove()
            if self.ranges is not None:
                self.ranges.close()
            if self.embeddings is not None:
                self.embeddings.close()
        self._write_sidecar(error)
        return self._result(error)

    # ---- steps --------------------------------------------------------------------------------------------------

    def step(self) -> None:
        """An explicit step boundary: from the first call on, optimizer steps no longer count."""
        self.counted_from = "explicit"
        self._boundary()

    def _optimizer_stepped(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        key = id(opt)
        if key not in self.optimizers:
            self.optimizers[key] = metadata.optimizer_info(opt)
        if self.counted_from == "explicit":
            return
        if self._last_optimizer is None:
            if key not in self._iteration_optimizers:
                self._iteration_optimizers.append(key)
                return
            # An optimizer steps again: the first iteration ended with the last new one.
            self._learn_iteration()
        if key == self._last_optimizer:
            self._boundary()

    def _root_forward(self, module: Any) -> None:
        if self._last_optimizer is None and self._iteration_optimizers and self.counted_from == "optimizer":
            self._learn_iteration()  # a forward pass after optimizer steps: the first iteration is over

    def _hooks_when_needed(self) -> None:
        """Module hooks on while the first iteration is learned and from the profiler's warm-up step on."""
        if self.ranges is not None:
            learning = self.counted_from == "optimizer" and self._last_optimizer is None
            self.ranges.active = learning or self.steps_seen >= self.options.warmup - 1

    def _learn_iteration(self) -> None:
        self._last_optimizer = self._iteration_optimizers[-1]
        self._boundary()  # the first iteration's end, seen late: before the profiler records anything

    def _boundary(self) -> None:
        if self._finished or self._complete:
            return
        self.steps_seen += 1
        self.step_times.append(time.perf_counter())
        if self.options.progress:
            _say_steps(self.options.progress, self.steps_seen)
        warmup, steps = self.options.warmup, self.options.steps
        if self.embeddings is not None and self.embeddings.active:
            self.embeddings.sampled_steps += 1
            # sampled in the warm-up steps, so that the recorded ones carry no extra kernels; with no warm-up, these
            self.embeddings.active = self.steps_seen < (warmup if warmup else warmup + steps)
        self.prof.step()
        self._hooks_when_needed()
        if self.steps_seen == warmup:  # the recorded steps begin: their own peak, not the warm-up's
            metadata.reset_device_memory_peak()
        if self.steps_seen >= warmup + steps:
            self._complete = True
            self._model = self._describe_model()
            self._device_memory = metadata.device_memory_peak()
            self.prof.stop()
            self._save_execution_trace()
            if self.options.stop:
                raise RecordingDone()

    # ---- output -------------------------------------------------------------------------------------------------

    def _describe_model(self) -> dict[str, Any]:
        return {
            "modules": metadata.modules(self.names),
            "ddp": metadata.ddp_buckets(self.names),
            "embeddings": self.embeddings.summary() if self.embeddings is not None else None,
        }

    def _stem(self) -> str:
        return f"rank{metadata.distributed_info()['rank']}"

    def _export(self, prof: Any) -> None:
        out = Path(self.options.out)
        target = out / f"{self._stem()}.json.gz"
        fd, tmp = temporary_file(out, "trace.json")
        os.close(fd)
        try:
            prof.export_chrome_trace(tmp)
            write_atomically(target, gzip.compress(Path(tmp).read_bytes(), compresslevel=6))
        finally:
            Path(tmp).unlink(missing_ok=True)
        self._trace_file = str(target)

    def _save_execution_trace(self) -> None:
        """The execution trace is whole once its observer is cleaned up (after the profiler stopped)."""
        if self._et_tmp is None or self.prof is None:
            return
        observer = self.prof.execution_trace_observer
        if observer is not None:
            observer.cleanup()
        et = Path(self._et_tmp)
        if self._trace_file is not None and et.is_file() and et.stat().st_size:
            target = Path(self.options.out) / f"{self._stem()}.et.json.gz"
            write_atomically(target, gzip.compress(et.read_bytes(), compresslevel=6))
        et.unlink(missing_ok=True)
        self._et_tmp = None

    def _files(self) -> list[str]:
        out = Path(self.options.out)
        stem = self._stem()
        names = [f"{stem}.json.gz", f"{stem}.et.json.gz", f"{stem}.daydream.json"]
        return [str(out / n) for n in names if (out / n).is_file()]

    def _write_sidecar(self, error: BaseException | None) -> None:
        warmup, steps = self.options.warmup, self.options.steps
        times = self.step_times
        doc = {  # a Recording (daydream.trace.recording), checked as the loader will check it
            "format": FORMAT,
            "command": self.options.command,
            "environment": metadata.environment(),
            "device": metadata.device_info(),
            "host": metadata.host_info(),
            **metadata.distributed_info(),
            "steps": {
                "counted_from": self.counted_from,
                "warmup": warmup,
                "requested": steps,
                "seen": self.steps_seen,
                "recorded": max(0, min(self.steps_seen, warmup + steps) - warmup),
                "complete": self._complete,
                "wall_ms": [round((b - a) * 1e3, 4) for a, b in zip(times, times[1:])],
            },
            "device_memory": self._device_memory,
            "error": None if error is None or isinstance(error, RecordingDone) else f"{type(error).__name__}: {error}",
            **(self._model or self._describe_model()),
            "optimizers": list(self.optimizers.values()),
        }
        if self._trace_file is not None:
            target = recording_path(self._trace_file)
        else:
            target = str(Path(self.options.out) / f"{self._stem()}.daydream.json")
        write_atomically(target, encode_recording(as_recording(doc, target)))

    def _result(self, error: BaseException | None) -> RecordResult:
        warmup, steps = self.options.warmup, self.options.steps
        need = warmup + steps
        files = self._files()
        if self._complete:
            msg = f"recorded steps {warmup}..{need - 1} ({steps} after {warmup} warm-up)"
        elif isinstance(error, SystemExit):
            msg = f"the program exited with code {error.code} after {self.steps_seen} of {need} steps"
        elif error is not None and not isinstance(error, RecordingDone):
            msg = f"the program failed after {self.steps_seen} of {need} steps ({type(error).__name__}: {error})"
        elif self.steps_seen == 0:
            msg = (
                "the program ran no training step: daydream record counts torch.optim optimizer steps, or "
                "daydream.record.step() calls where the program makes them"
            )
        else:
            msg = f"the program ended after {self.steps_seen} of {need} steps ({warmup} warm-up + {steps} to record)"
        if not self._complete:
            kept = self._trace_file
            msg += f"; partial trace kept: {kept}" if kept else "; no step was being recorded, so there is no trace"
        return RecordResult(self._complete, self.steps_seen, self._trace_file, files, msg)


def _say_steps(path: str, steps: int) -> None:
    """The steps seen so far, for the parent's progress line; never fails the program (progress is not the work)."""
    with contextlib.suppress(OSError):
        Path(path).write_text(str(steps))


def step() -> None:
    """Mark the end of a training step for the running recording (a no-op when nothing records): for programs that
    update their parameters without torch.optim, or whose steps are not one optimizer step each."""
    if _active is not None:
        _active.step()


class record:  # noqa: N801 - used as a context manager, like torch.profiler.profile
    """Record inside a program::

        from daydream.record import record
        with record("trace_dir", warmup=2, steps=3) as rec:
            train()
        print(rec.result.trace)

    Leaving the block before the steps were recorded raises :class:`RecordError` (the partial trace is kept)
    unless the block itself raised.
    """

    def __init__(
        self,
        out: str = ".",
        warmup: int = 2,
        steps: int = 3,
        *,
        execution_trace: bool = False,
        embedding_stats: bool = False,
        profile_memory: bool = False,
    ) -> None:
        self.recorder = Recorder(
            RecordOptions(
                out=out,
                warmup=warmup,
                steps=steps,
                execution_trace=execution_trace,
                embedding_stats=embedding_stats,
                profile_memory=profile_memory,
            )
        )
        self.result: RecordResult | None = None

    def __enter__(self) -> record:
        self.recorder.start()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.result = self.recorder.finish(exc)
        if exc is None and not self.result.complete:
            raise RecordError(self.result.message)
