"""One graph schema: daydream/graph/schema.py and the tables of docs/graph.md say the same, and a built graph holds
nothing the schema does not name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from synth import make_trace, write_trace

from daydream import load_trace
from daydream.graph import build_graph, schema
from daydream.graph.edit import Placement, insert_task
from daydream.graph.select import KIND_SELECTORS

DOC = Path(__file__).resolve().parents[1] / "docs" / "graph.md"


def _table(heading: str) -> list[list[str]]:
    """The rows (cells) of the first table after ``heading`` in docs/graph.md, header and rule left out."""
    lines = DOC.read_text().splitlines()
    start = lines.index(heading)
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    assert len(rows) > 2, f"no table under {heading!r} in {DOC}"
    return rows[2:]


def _names(cell: str) -> set[str]:
    """The names a first cell lists: `a`, `b`."""
    return set(re.findall(r"`([^`]+)`", cell))


def _documented(heading: str) -> set[str]:
    return {name for row in _table(heading) for name in _names(row[0])}


def test_every_task_attribute_is_documented_and_every_documented_one_is_in_the_schema() -> None:
    documented = _documented("### Task attributes")
    in_schema = schema.task_attribute_names()
    assert sorted(in_schema - documented) == [], "in schema.Task, missing from docs/graph.md"
    assert sorted(documented - in_schema) == [], "in docs/graph.md, missing from schema.Task"


def test_every_edge_attribute_is_documented_and_every_documented_one_is_in_the_schema() -> None:
    assert _documented("### Edge attributes") == set(schema.Edge.__annotations__)


def test_every_graph_attribute_is_documented_and_every_documented_one_is_in_the_schema() -> None:
    assert _documented("### Graph attributes") == set(schema.GraphInfo.__annotations__)


def test_the_kinds_tables_name_the_schema_kinds() -> None:
    assert _documented("## Tasks") == set(schema.TASK_KINDS) == schema.CPU_KINDS | schema.GPU_KINDS
    assert _documented("## Dependencies") == set(schema.EDGE_KINDS)
    assert schema.ORDER_KINDS.issubset(schema.EDGE_KINDS)
    (phase_row,) = [row for row in _table("### Task attributes") if _names(row[0]) == {"phase"}]
    assert _names(phase_row[3]) == set(schema.PHASES)


def test_script_attributes_and_kind_selectors_come_from_the_schema() -> None:
    assert set(schema.TASK_ATTRIBUTES) <= schema.task_attribute_names()
    assert KIND_SELECTORS["task"] == set(schema.TASK_KINDS)
    assert KIND_SELECTORS["cpu"] == schema.CPU_KINDS and KIND_SELECTORS["gpu"] == schema.GPU_KINDS


@pytest.mark.parametrize("step", [None, "all"])
def test_a_built_graph_holds_only_what_the_schema_names(tmp_path: Path, step: str | None) -> None:
    g = build_graph(load_trace(write_trace(tmp_path / "t.json", make_trace())), step)
    kernel = next(n for n, a in g.nodes(data=True) if a["kind"] == "gpu")
    insert_task(g, "comm", "x", 5.0, Placement(after=kernel, queued=True))
    task_keys = set(schema.Task.__annotations__)
    required = schema.Task.__required_keys__
    for _, a in g.nodes(data=True):
        assert set(a) <= task_keys and required <= set(a), a
        assert a["kind"] in schema.TASK_KINDS and a["phase"] in (*schema.PHASES, None)
    for _, _, e in g.edges(data=True):
        assert e["kind"] in schema.EDGE_KINDS
        assert set(e) == ({"kind"} if e["kind"] in schema.ORDER_KINDS else {"kind", "lag"})
    assert set(g.graph) <= set(schema.GraphInfo.__annotations__)


def test_graph_metadata_are_typed(tmp_path: Path) -> None:
    """``graph.graph`` holds the types GraphInfo names: a step, the delays, the causality are structs read by their
    fields (a dict where a struct belongs fails), a job's ranks and collectives too."""
    import msgspec

    from daydream.graph.job import join_ranks

    g = build_graph(load_trace(write_trace(tmp_path / "t.json", make_trace())))
    info = msgspec.convert(dict(g.graph), schema.GraphInfo, from_attributes=True)
    assert all(isinstance(s, schema.StepInfo) for s in g.graph["steps"]) and g.graph["steps"][-1].measured_us > 0
    assert isinstance(g.graph["delays"], schema.Delays) and isinstance(g.graph["causality"], schema.Causality)
    assert info["steps"] == g.graph["steps"]
    ranks = [schema.RankInfo(rank=r, trace=f"rank{r}", measured_us=1.0, origin_us=0.0) for r in range(2)]
    job = join_ranks([g, g], ranks)
    assert [r.rank for r in job.graph["ranks"]] == [0, 1] and job.graph["ranks"][0] is not ranks[0]
    assert job.graph["steps"][-1].measured_us == 1.0 and g.graph["steps"][-1].measured_us != 1.0  # a copy, not shared
    assert isinstance(job.graph["collectives"], schema.JobCollectives) and job.graph["collectives"].pricing is None
    assert (
        msgspec.convert(dict(job.graph), schema.GraphInfo, from_attributes=True)["collectives"]
        == job.graph["collectives"]
    )
