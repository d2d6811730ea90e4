"""Results in a notebook: a short repr, and rows a DataFrame takes (a list of flat dicts, the same keys in each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from daydream.demo import bundled_example
from daydream.replay import replay
from daydream.whatif import whatif

DLRM8 = Path(__file__).resolve().parents[2] / "shared" / "traces" / "param" / "dlrm8"


def _flat_rows(rows: list[dict[str, object]]) -> None:
    assert rows and all(set(r) == set(rows[0]) for r in rows)
    assert all(v is None or isinstance(v, (int, float, str)) for r in rows for v in r.values())


def test_a_whatif_and_a_replay_in_a_notebook() -> None:
    result = whatif(bundled_example(), ["batch_size"], step="all")
    text = repr(result)
    assert len(text) < 300 and "scripts=['batch_size']" in text and "speedup 0.597x" in text and "390 tasks" in text
    rows = result.rows()
    _flat_rows(rows)
    assert [r["step"] for r in rows] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert rows[0]["speedup"] == pytest.approx(rows[0]["baseline_us"] / rows[0]["predicted_us"])
    base = replay(bundled_example(), step="all")
    assert len(repr(base)) < 300 and repr(base).startswith("Replay(trace=")
    _flat_rows(base.rows())
    assert [r["name"] for r in base.rows()] == [r["step"] for r in rows]


@pytest.mark.skipif(not DLRM8.is_dir(), reason="shared traces absent")
def test_a_job_in_a_notebook() -> None:
    from daydream.job import replay_job

    job = replay_job(DLRM8)
    assert repr(job) == ("JobReplay(trace='" + str(DLRM8) + "', 8 ranks, slowest rank 1: measured 19.717 ms, predicted "
                         "19.716 ms, straggler 7)")  # fmt: skip
    _flat_rows(job.rows())
    assert [r["rank"] for r in job.rows()] == list(range(8))
    changed = whatif(DLRM8, ["straggler"])
    assert len(repr(changed)) < 300
    rows = changed.rows()
    _flat_rows(rows)
    assert rows[7]["baseline_us"] == pytest.approx(12311.0) and rows[7]["speedup"] < 1


def test_params_are_shown_in_their_units() -> None:
    # bucket_cap's default is written 25MiB: shown "25 MiB", not 2.62144e+07; a value given with a unit keeps it
    from daydream.demo import bundled_traces
    from daydream.whatif import whatif

    trace = next(t for t in bundled_traces() if t.endswith("_cpu.json.gz"))
    shown = whatif(trace, ["ddp"], {"ranks": 2}).to_dict()["params_text"]
    assert shown["bucket_cap"] == "25 MiB" and shown["first_bucket"] == "1 MiB"
    assert shown["link"] == "nvlink3" and shown["ranks"] == "2"
    given = whatif(trace, ["ddp"], {"ranks": 2, "bucket_cap": "10MB"}).to_dict()
    assert given["params_text"]["bucket_cap"] == "10 MB" and given["params"]["bucket_cap"] == 10_000_000
    assert whatif(trace, ["batch_size"], {"kernel_fixed": "1.5ms"}).to_dict()["params_text"]["kernel_fixed"] == "1.5 ms"
