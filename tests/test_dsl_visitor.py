"""The one dispatch style of the DSL (daydream.dsl.visitor): each walker has a method for every node it meets, the
table is built once per class; the parser's Transformer names each rule's children; Session's units."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from lark.visitors import _VArgsWrapper
from whatif_graph import iteration

from daydream.dsl import Session, ast, copy_graph, parse_script
from daydream.dsl.check import Checker, _UserAttributes
from daydream.dsl.evaluate import _Compiler
from daydream.dsl.execute import Executor
from daydream.dsl.parse import _parser, _ToAst
from daydream.dsl.visitor import NODE_CLASSES, Visitor

EXPRESSIONS = typing.get_args(ast.Expr)
STATEMENTS = typing.get_args(ast.Statement)


def test_node_classes_are_every_expression_and_statement() -> None:
    assert set(NODE_CLASSES) == set(EXPRESSIONS) | set(STATEMENTS)
    assert len(NODE_CLASSES) == 25


@pytest.mark.parametrize(
    "visitor, nodes",
    [
        (Checker, NODE_CLASSES),
        (_Compiler, EXPRESSIONS),
        (Executor, STATEMENTS),
    ],
)
def test_each_walker_has_a_method_per_node(visitor: type[Visitor[Any]], nodes: tuple[type, ...]) -> None:
    missing = [n.__name__ for n in nodes if visitor._methods[n] is visitor.generic_visit]
    assert not missing, f"{visitor.__name__} has no visit_ method for {missing}"
    assert all(visitor._methods[n] is getattr(visitor, f"visit_{n.__name__}") for n in nodes)


def test_table_is_built_once_per_class_and_overrides_are_its_own() -> None:
    class Counter(Visitor[str]):
        def visit_Literal(self, node: ast.Literal) -> str:
            return f"literal {node.value}"

    class Louder(Counter):
        def visit_Literal(self, node: ast.Literal) -> str:
            return super().visit_Literal(node).upper()

        def generic_visit(self, node: Any, *args: Any) -> str:
            return "other"

    pos = ast.Pos("f", 1, 1)
    assert Counter._methods is not Louder._methods
    assert Counter().visit(ast.Literal(2, pos)) == "literal 2"
    assert Louder().visit(ast.Literal(2, pos)) == "LITERAL 2"
    assert Louder().visit(ast.Name("x", pos)) == "other"
    with pytest.raises(TypeError, match="Counter has no visit_Name"):
        Counter().visit(ast.Name("x", pos))
    with pytest.raises(TypeError, match="Counter has no visit_int"):
        Counter().visit(3)


def test_user_attributes_walker_ignores_the_rest() -> None:
    script = parse_script(
        'set (select).a = 1\nfor k in select {\n  let t = insert gpu "x" after k duration 1us with b = 2\n}\n'
        'if true {\n} else {\n  insert gpu "y" after k duration 1us with c = 3\n}\nprint 1\n'
    )
    walker = _UserAttributes(None)
    walker.walk(script.statements, script)
    assert walker.out == {"a", "b", "c"}


def test_every_rule_has_its_transformer_method_with_inline_children() -> None:
    names = set()
    for rule in _parser().rules:
        if rule.origin.name.startswith("_"):
            continue  # inlined into the rule that uses it
        if rule.options.expand1 and not rule.alias and len(rule.expansion) < 2:
            continue  # `?rule: other`: the child passes through
        names.add(str(rule.alias or rule.origin.name))
    missing = sorted(n for n in names if not isinstance(getattr(_ToAst, n, None), _VArgsWrapper))
    assert not missing, f"rules without an inline transformer method: {missing}"
    assert {"atom", "select", "insert", "call", "or_", "add"} <= names


def test_session_forwards_its_attributes_to_its_units() -> None:
    s = Session(iteration(), params={"n": "3"})
    assert s.graph is s.state.graph is s.env.graph
    assert s.scope is s.env.scope and s.attributes is s.env.attributes
    assert s.effects is s.recorder.effects and s.warnings is s.recorder.warnings and s.printed is s.recorder.printed
    assert s.params == {"n": "3"} and s.params is s.binder.given
    lines: list[str] = []
    s.on_print = lines.append
    assert s.recorder.on_print is s.on_print
    s.execute("param n = 1\nprint n\nscale (select gpu) by 0.5")
    assert lines == ["3"] and s.printed == ["3"] and s.param_values == {"n": 3} and s.unused_params() == []
    assert s.version == s.state.version == 1
    scope = s.scope
    s.scope = {}
    assert s.env.scope == {} and scope["n"] == 3
    s.attributes |= {"mine"}
    assert "mine" in s.env.attributes
    assert callable(copy_graph)
