"""daydream.api.workload: a trace or a job folder read one way for every command (Workload), the run's options
(RunOptions), and the functions that take them."""

from __future__ import annotations

from pathlib import Path

import pytest

from daydream.api.demo import bundled_example
from daydream.api.whatif import whatif
from daydream.api.workload import RunOptions, Workload


def test_a_gpu_trace_loads_with_its_gpu_activity(shared_traces: Path) -> None:
    path = shared_traces / "hta" / "nccl_parser_config_nccl_data.json.gz"
    graph, has_gpu = Workload(str(path)).load()
    assert has_gpu and any(a["kind"] == "gpu" for _, a in graph.nodes(data=True))
    assert not [w for w in whatif(path, ["batch_size"]).warnings if "no GPU activity" in w]


def test_a_cpu_trace_says_it_has_no_gpu_activity() -> None:
    graph, has_gpu = Workload(str(bundled_example())).load()
    assert not has_gpu and graph.number_of_nodes() > 0
    assert any("no GPU activity" in w for w in whatif(bundled_example(), ["batch_size"]).warnings)


def test_a_job_folder_is_a_job(shared_traces: Path) -> None:
    job = Workload(str(shared_traces / "param" / "dlrm8"), link="nvlink2")
    assert job.is_job and len(job.trace_files()) == 8
    graph, has_gpu = job.load()
    assert has_gpu and graph.graph["collectives"].pricing
    assert len(job.sha256()) == 64 and job.sha256() == Workload(job.path).sha256()  # the files, not how they are read


def test_options_reach_the_scripts() -> None:
    trace = bundled_example()
    with pytest.raises(Exception, match="budget"):
        whatif(trace, ["batch_size"], options=RunOptions(budget=1))
    assert Workload.of(trace) == Workload(str(trace)) and Workload.of(Workload("x", step=3)).step == 3
