"""`select KIND where ATTR == VALUE and start > T0 and start < T1 ...`: the tasks an index returns, tested by the
where-clause, are the selection a test of every task gives, with the same errors; the index follows the graph's
changes (sets, inserts, the priorities a schedule writes)."""

from __future__ import annotations

import math

import networkx as nx
import pytest

import daydream.dsl.evaluate as evaluate
import daydream.graph.select as select_module
from daydream import build_graph, load_trace
from daydream.api.demo import bundled_example
from daydream.dsl import Session
from daydream.dsl.limits import SELECT_COST
from daydream.errors import ScriptError
from daydream.graph.adjacency import copy_graph
from daydream.graph.select import Selection


@pytest.fixture(scope="module")
def built() -> nx.DiGraph:
    return build_graph(load_trace(bundled_example()), "all")


@pytest.fixture
def session(built: nx.DiGraph) -> Session:
    s = Session(copy_graph(built))
    # a second thread, and tasks on it, so that selecting by thread leaves tasks out
    s.execute(
        'for k in first(select cpu where name == "aten::relu", 5) {\n'
        '    insert cpu "side" after k duration 10us on "cpu:1/99"\n}'
    )
    starts = sorted(a["start"] for a in s.graph.nodes.values() if a.get("start") is not None)
    s.scope.update(th="cpu:1/99", main=next(iter(s.graph.nodes.values()))["thread"], t0=starts[60], t1=starts[200])
    return s


def selected(session: Session, where: str, kind: str = "cpu") -> Selection:
    session.execute(f"let found = select {kind} where {where}")
    return session.scope["found"]


def full_scan(
    session: Session, where: str, kind: str = "cpu", monkeypatch: pytest.MonkeyPatch | None = None
) -> Selection:
    assert monkeypatch is not None
    with monkeypatch.context() as m:
        m.setattr(evaluate, "candidates", lambda *a, **k: None)
        return selected(session, where, kind)


WHERE = [
    "main == thread and start > t0 and start < t1",
    "thread == main and start >= t0 and start <= t1",  # the bounds are starts of tasks: inclusive keeps them
    "t0 < start and t1 >= start",
    "start > t0",
    "start <= t1 and thread == main",
    'name == "aten::relu"',
    'name == "aten::relu" and start > t0 and duration > 5',
    "thread == th",
    'thread == "no such thread"',
    "layer == none and start < t1",
    # a second lower bound: the index takes the first, the clause the rest
    "thread == main and start > t0 and start > t1",
    "thread == 3",
]


@pytest.mark.parametrize("where", WHERE)
def test_the_index_selects_what_a_test_of_every_task_selects(
    session: Session, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = select_module.candidates

    def counted(*args: object) -> list[object] | None:
        found = real(*args)  # type: ignore[arg-type]
        calls.append(-1 if found is None else len(found))
        return found

    monkeypatch.setattr(evaluate, "candidates", counted)
    indexed = selected(session, where)
    assert calls and 0 <= calls[0] < len(session.graph)  # answered from the index, leaving tasks out
    assert indexed == full_scan(session, where, monkeypatch=monkeypatch)


def test_the_bounds_on_starts_of_tasks_are_exact(session: Session) -> None:
    strict = selected(session, "start > t0 and start < t1")
    inclusive = selected(session, "start >= t0 and start <= t1")
    nodes = session.graph.nodes
    t0, t1 = session.scope["t0"], session.scope["t1"]
    assert {n for n in inclusive if nodes[n]["start"] in (t0, t1)} and inclusive.nodes - strict.nodes
    assert all(t0 < nodes[n]["start"] < t1 for n in strict)
    assert len(strict) == sum(1 for a in nodes.values() if a["kind"] in ("cpu", "dataloader") and t0 < a["start"] < t1)


def test_an_error_in_the_clause_is_the_one_a_test_of_every_task_raises(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = []
    for scan in (False, True):
        with pytest.raises(ScriptError) as err:
            if scan:
                full_scan(session, "thread == main and start > t0 and name > 5", monkeypatch=monkeypatch)
            else:
                selected(session, "thread == main and start > t0 and name > 5")
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "cannot compare" in messages[0]


def test_the_index_follows_sets_inserts_and_removals(session: Session) -> None:
    relu = selected(session, 'name == "aten::relu"')
    session.execute('set (select cpu where name == "aten::relu") .name = "relu2"')
    assert selected(session, 'name == "relu2"') == relu
    assert not selected(session, 'name == "aten::relu"')
    session.execute('insert cpu "late" after first(select cpu where name == "relu2", 1) duration 5us on "cpu:1/99"')
    assert len(selected(session, "thread == th")) == 6
    session.execute('remove (select cpu where name == "late")')
    assert len(selected(session, "thread == th")) == 5


def test_the_index_follows_the_priorities_a_schedule_writes(session: Session) -> None:
    # a session writes them into the tasks' dicts at each prediction, not through the edit functions
    session.execute("schedule priority duration")
    session.predict()
    longest = max(a["duration"] for a in session.graph.nodes.values())
    assert len(select_module.candidates(session.graph, ("schedule_priority", longest)) or []) == 1
    session.execute("schedule priority 7")
    session.predict()
    assert len(select_module.candidates(session.graph, ("schedule_priority", 7)) or []) == len(session.graph)


@pytest.mark.parametrize("start", [None, math.nan, "soon", [1.0]])
def test_a_start_that_is_not_a_number_is_tested_by_the_clause(
    built: nx.DiGraph, start: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = copy_graph(built)
    odd = list(graph)[150]
    graph.nodes[odd]["start"] = start  # before the session: as a graph from elsewhere may hold it
    session = Session(graph)
    session.scope.update(t0=0.0, t1=1e12)
    outcomes = []
    for scan in (False, True):
        try:
            found = (
                full_scan(session, "start > t0 and start < t1", monkeypatch=monkeypatch)
                if scan
                else selected(session, "start > t0 and start < t1")
            )
            outcomes.append(("selected", found))
        except ScriptError as exc:
            outcomes.append(("error", str(exc)))
    assert outcomes[0] == outcomes[1]
    assert (odd in outcomes[0][1]) is False if outcomes[0][0] == "selected" else "cannot compare" in outcomes[0][1]


def test_the_index_grows_with_inserts_and_outlives_other_attributes(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from daydream.graph import derived

    def index(attribute: str) -> object:
        return derived.indexes(session.graph).values[f"select_by:{attribute}"][1]

    where = "thread == th and start > t0"
    assert selected(session, where) == full_scan(session, where, monkeypatch=monkeypatch)
    kept = index("thread")
    for k in range(3):  # inserts on the selected thread and elsewhere: the index grows, the selection follows
        session.execute(
            f'insert cpu "more{k}" after last(select cpu where name == "side", 1) duration 5us on "cpu:1/99"'
        )
        session.execute(f'insert cpu "main{k}" after last(select cpu where thread == main, 1) duration 5us')
        session.execute('set (select cpu where name == "side") .tag = "x"')  # another attribute: the thread index stays
        found = selected(session, where)
        assert index("thread") is kept
        assert found == full_scan(session, where, monkeypatch=monkeypatch)
        assert {f"more{j}" for j in range(k + 1)} <= {session.graph.nodes[n]["name"] for n in found}
    session.execute('set (select cpu where name == "side") .name = "renamed"')
    assert selected(session, 'name == "renamed"') == full_scan(session, 'name == "renamed"', monkeypatch=monkeypatch)
    session.execute('remove (select cpu where name == "more1")')  # a removal: the index is made again
    assert selected(session, where) == full_scan(session, where, monkeypatch=monkeypatch)
    assert index("thread") is not kept
    kept = index("thread")
    # a removal, then more inserts than tasks removed: the graph grew, but not only by inserts
    session.execute('remove (select cpu where name == "more2")')
    session.execute('insert cpu "late0" after last(select cpu where name == "renamed", 1) duration 5us on "cpu:1/99"')
    session.execute('insert cpu "late1" after last(select cpu where name == "renamed", 1) duration 5us on "cpu:1/99"')
    assert selected(session, where) == full_scan(session, where, monkeypatch=monkeypatch)
    assert index("thread") is not kept


COMBINED = [
    "parents(x) & gpu",
    "gpu & children(x)",
    "(parents(x) | children(x)) - cpu",
    "kept & kernel",
    "kept - comm",
    "memcpy & kept",
    "task & kept",
    "kept - gpu - cpu",
    "gpu - kept",
    'cpu - (select where name ~ "Launch")',
    '(select where name ~ "Launch") & cpu',
    '(select where name ~ "Launch") & dataloader',
]


def _combined(session: Session, expr: str) -> tuple[Selection, int]:
    session.budget.reset()
    session.execute(f"let found = {expr}")
    return session.scope["found"], session.budget.used


@pytest.fixture
def kinds_session() -> Session:
    """The hand-built iteration (CPU calls, kernels, an all-reduce), with a selection that holds tasks removed since."""
    from whatif_graph import iteration

    s = Session(iteration())
    s.execute(
        'let x = select where name == "relu_kernel"\n'
        'let kept = parents(x) | children(x) | x | (select where name == "ncclAllReduce")\n'
        'remove (select where name == "ncclAllReduce")\n'
        'remove (select where name == "relu_kernel") with launches'
    )
    s.execute('let x = select where name == "sm80_gemm_bwd"')
    assert [n for n in s.scope["kept"] if n not in s.graph]
    return s


@pytest.mark.parametrize("expr", COMBINED)
def test_a_selection_combined_with_a_kind_word_is_what_the_two_selections_give(
    kinds_session: Session, expr: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SEL & KIND``, ``KIND & SEL`` and ``SEL - KIND`` test SEL's kinds instead of selecting every task of the kind:
    the same tasks (a task SEL holds that was removed since: in SEL - KIND, not in SEL & KIND), charged for the work
    done: SEL's tasks tested, not every task of the graph (the budget tracks time)."""
    fast = _combined(kinds_session, expr)
    with monkeypatch.context() as m:
        m.setattr(evaluate._Compiler, "_kind_filter", lambda self, node: None)
        slow = _combined(kinds_session, expr)
    assert fast[0] == slow[0]
    assert 0 < fast[1] <= slow[1] + 2 * SELECT_COST  # on this 14-task graph the selects' fixed cost is most of it


def test_the_kind_words_select_what_they_name(kinds_session: Session) -> None:
    assert (
        len(_combined(kinds_session, "kept - gpu")[0]) == 3
    )  # the tasks removed since (a kernel, its launch call, the all-reduce)
    assert len(_combined(kinds_session, "kept & gpu")[0]) == 2  # the kernels before and after the removed one


@pytest.mark.parametrize(
    "expr", ["1 & gpu", "gpu & true", "none - gpu", '"a" - cpu', "gpu - 1", "cpu & []", "x & gpu & 2"]
)
def test_a_kind_word_combined_with_what_is_not_a_selection_fails_as_two_selections_do(
    kinds_session: Session, expr: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def outcome() -> tuple[str, object]:
        try:
            session.execute(f"let found = {expr}")
        except ScriptError as exc:
            return "error", str(exc)
        return "value", session.scope["found"]

    session = kinds_session
    fast = outcome()
    with monkeypatch.context() as m:
        m.setattr(evaluate._Compiler, "_kind_filter", lambda self, node: None)
        slow = outcome()
    assert fast == slow


@pytest.mark.parametrize("expr", ["gpu & (1 / 0)", "(1 / 0) & gpu", "x - (1 / 0) - gpu", "gpu & x"])
def test_a_kind_word_runs_out_of_budget_as_the_work_does(kinds_session: Session, expr: str) -> None:
    """A budget that runs out inside the combination: a budget error at the statement (or the other side's error,
    where that comes first), never a wrong value."""
    kinds_session.execute("let found = 1")
    kinds_session.budget.limit = kinds_session.budget.used + 5
    try:
        kinds_session.execute(f"let found = {expr}")
    except ScriptError as exc:
        assert "work budget exceeded" in str(exc) or "division by zero" in str(exc), str(exc)
    else:
        raise AssertionError("no error")
    finally:
        kinds_session.budget.limit = 10**9


NARROWED = [
    'kept & (select where name == "sm80_gemm_bwd")',
    '(select where phase == "backward") & kept',
    'kept - (select where phase == "backward")',
    'kept - (select where name == "no such kernel")',  # the select matches nothing: its warning
    'kept & (select where name == "no such kernel")',
    "kept & (select where bytes == 4000000)",
    'kept & (select where phase == "backward" and layer == none)',  # not one test: made as before
    'kept & (select gpu where phase == "backward")',  # a kind: made as before
    "kept & (select where shapes == none)",  # shapes are lists: no index, made as before
    '1 & (select where name == "sm80_gemm_bwd")',
    'none - (select where name == "sm80_gemm_bwd")',
    '(select where name == "sm80_gemm_bwd") - kept',
    'kept - (select where phase == "backward" and layer == none)',
    '2 - (select gpu where phase == "backward")',
]


@pytest.mark.parametrize("expr", NARROWED)
def test_a_selection_narrowed_by_an_indexed_select_is_what_making_the_select_gives(
    kinds_session: Session, expr: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SEL & (select where ATTR == VALUE)`` (either way round) and ``SEL - (select ...)`` test SEL's tasks where the
    index answers the select: the same tasks (SEL's removed tasks included), errors and warnings, charged no more
    than making the select."""
    kinds_session.graph.nodes[next(iter(kinds_session.graph.nodes))]["shapes"] = [[2, 3]]

    def outcome() -> tuple[object, ...]:
        kinds_session.budget.reset()
        kinds_session.recorder.warnings.clear()
        try:
            kinds_session.execute(f"let found = {expr}")
        except ScriptError as exc:
            return "error", str(exc), kinds_session.budget.used
        return kinds_session.scope["found"], list(kinds_session.recorder.warnings), kinds_session.budget.used

    fast = outcome()
    with monkeypatch.context() as m:
        m.setattr(evaluate._Compiler, "_index_filter", lambda self, node: None)
        slow = outcome()
    assert fast[:2] == slow[:2]
    assert fast[2] <= slow[2] + SELECT_COST
