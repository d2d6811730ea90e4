"""The .whatif parser and static checks: text -> AST (daydream.dsl.parse), statement spans and positions, every
parse error with its position and caret, the Checker's errors (daydream.dsl.check), and parse_expression."""

from __future__ import annotations

from typing import Any

import pytest

from daydream.dsl import ast
from daydream.dsl.check import Checker
from daydream.dsl.library import Loader, check_files
from daydream.dsl.parse import parse_expression, parse_script, quantity_value, script_error, unescape
from daydream.errors import ScriptError

# ---- helpers -----------------------------------------------------------------------------------------------


def parse(text: str) -> ast.Script:
    return parse_script(text, "t.whatif")


def one(text: str) -> Any:
    script = parse(text)
    assert len(script.statements) == 1
    return script.statements[0]


def expr(text: str) -> Any:
    return one(f"print {text}").values[0]


def sexp(node: Any) -> str:
    """An expression as a prefix string without positions: ``1 + 2 * 3`` -> ``(+ 1 (* 2 3))``; literals as repr()."""
    if isinstance(node, ast.Literal):
        return repr(node.value)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Binary):
        return f"({node.op} {sexp(node.left)} {sexp(node.right)})"
    if isinstance(node, ast.Unary):
        return f"({node.op} {sexp(node.operand)})"
    if isinstance(node, ast.Select):
        kind = f" {node.kind}" if node.kind is not None else ""
        return f"(select{kind}" + (f" where {sexp(node.where)}" if node.where is not None else "") + ")"
    if isinstance(node, ast.Project):
        return f"{sexp(node.obj)}.{node.attr}"
    if isinstance(node, ast.Index):
        return f"{sexp(node.obj)}[{sexp(node.index)}]"
    if isinstance(node, ast.Call):
        return (
            f"{node.func}(" + ", ".join([sexp(a) for a in node.args] + [f"{k}={sexp(v)}" for k, v in node.kwargs]) + ")"
        )
    if isinstance(node, ast.ListExpr):
        return "[" + ", ".join(sexp(x) for x in node.items) + "]"
    raise TypeError(node)


def located(line: int, column: int, message: str, source: str, width: int = 1, hint: str | None = None) -> str:
    """The text of a ScriptError: ``file:line:col: message``, the source line, a caret line, then the hint."""
    out = [
        f"t.whatif:{line}:{column}: {message}",
        f"{line:>4} | {source}",
        "     | " + " " * (column - 1) + "^" * width,
    ]
    return "\n".join(out + ([f"  {hint}"] if hint else []))


def parse_error(text: str) -> str:
    with pytest.raises(ScriptError) as info:
        parse(text)
    return str(info.value)


def check_error(text: str) -> str:
    with pytest.raises(ScriptError) as info:
        Checker(Loader().resolve_include).check(parse(text))
    return str(info.value)


# ---- statements --------------------------------------------------------------------------------------------


def test_docstrings() -> None:
    script = parse('# header\n\n"""Title\n    more\n"""\nlet x = 1')
    assert script.docstring == "Title\nmore"
    assert script.statements[0] == ast.Docstring("Title\nmore", ast.Pos("t.whatif", 3, 1, 10, 31))
    assert script.comments == ("header",)
    assert parse('"a \\"b\\""\nprint 1').docstring == 'a "b"'
    assert parse("let x = 1").docstring is None


def test_param_let_scale() -> None:
    p = one("param n = 2")
    assert isinstance(p, ast.Param) and (p.name, sexp(p.default)) == ("n", "2")
    assert [s.name for s in parse("param a = 1\nlet b = 2\nparam c = 3").params] == ["a", "c"]
    let = one("let x = a.b")
    assert isinstance(let, ast.Let) and (let.name, sexp(let.value)) == ("x", "a.b")
    s = one('scale select gpu where name ~ "gemm" by 2')
    assert isinstance(s, ast.Scale)
    assert (sexp(s.target), sexp(s.factor)) == ("(select gpu where (~ name 'gemm'))", "2")


def test_set() -> None:
    s = one("set (select gpu).duration = duration * 2")
    assert isinstance(s, ast.SetAttr) and isinstance(s.target, ast.Project)
    assert (sexp(s.target), s.target.attr, sexp(s.value)) == ("(select gpu).duration", "duration", "(* duration 2)")


@pytest.mark.parametrize("target", ["x", "x[0]", "f(x)", "(select)"])
def test_set_needs_an_attribute(target: str) -> None:
    text = f"set {target} = 1"
    message = "set needs a selection's attribute on the left: set SELECTION.ATTRIBUTE = VALUE"
    assert parse_error(text) == located(1, 5, message, text, len(target))


def test_remove() -> None:
    assert (sexp(one("remove x").target), one("remove x").with_launches) == ("x", False)
    r = one("remove launches(x) with launches")
    assert isinstance(r, ast.Remove) and (sexp(r.target), r.with_launches) == ("launches(x)", True)


def test_insert_with_every_clause() -> None:
    s = one('insert gpu "k\\"1" after x duration 10us on s launch c with a = 1, b = "x"')
    assert isinstance(s, ast.Insert)
    assert (s.kind, s.name.value, s.side, sexp(s.anchor)) == ("gpu", 'k"1', "after", "x")
    assert (sexp(s.duration), sexp(s.on), sexp(s.launch)) == ("10.0", "s", "c")
    assert [(k, sexp(v)) for k, v in s.attrs] == [("a", "1"), ("b", "'x'")]
    assert s.kind_pos == ast.Pos("t.whatif", 1, 8, 7, 10)
    b = one('insert cpu "k" before select cpu with a = 1 launch c duration 2')
    assert (b.side, sexp(b.anchor), sexp(b.duration), sexp(b.launch), b.on) == (
        "before",
        "(select cpu)",
        "2",
        "c",
        None,
    )
    assert [k for k, _ in b.attrs] == ["a"]
    bare = one('insert cpu "k" before x')
    assert (bare.duration, bare.on, bare.launch, bare.attrs) == (None, None, None, ())


def test_schedule() -> None:
    for policy in ("earliest", "fifo"):
        s = one(f"schedule {policy}")
        assert isinstance(s, ast.Schedule) and (s.policy, s.priority) == (policy, None)
    s = one("schedule priority -bytes")
    assert (s.policy, sexp(s.priority), s.policy_pos) == ("priority", "(- bytes)", ast.Pos("t.whatif", 1, 10, 9, 17))


def test_for_loops() -> None:
    f = one("for g in select gpu {\n  scale g by 2\n}")
    assert isinstance(f, ast.For) and (f.var, sexp(f.iterable), f.by, f.by_pos) == ("g", "(select gpu)", None, None)
    assert [type(s) for s in f.body] == [ast.Scale]
    f = one("for g in x by layer {\n  let y = 2\n\n  # note\n  scale g by y\n  print g, y\n}")
    assert (f.var, sexp(f.iterable), f.by) == ("g", "x", "layer")
    assert [type(s) for s in f.body] == [ast.Let, ast.Scale, ast.Print]
    assert f.by_pos == ast.Pos("t.whatif", 1, 15, 14, 19)
    assert one("for g in x {}").body == ()


def test_include_assert_print() -> None:
    assert one('include "lib/x.whatif"') == ast.Include("lib/x.whatif", ast.Pos("t.whatif", 1, 1, 0, 22))
    a = one("assert a")
    assert isinstance(a, ast.Assert) and (sexp(a.test), a.message) == ("a", None)
    a = one('assert a > 1, "msg"')
    assert (sexp(a.test), sexp(a.message)) == ("(> a 1)", "'msg'")
    p = one("print a, b")
    assert isinstance(p, ast.Print) and [sexp(v) for v in p.values] == ["a", "b"]


def test_comments_blank_lines_and_continuations() -> None:
    script = parse("# one\n# two\n\nlet x = 1  # trailing\n\n# mid\nprint x + \\\n    2\n\n")
    assert [type(s) for s in script.statements] == [ast.Let, ast.Print]
    assert script.comments == ("one", "two")
    assert sexp(script.statements[1].values[0]) == "(+ x 2)"
    assert script.statements[1].values[0].right.pos.line == 8
    assert [type(s) for s in parse("let x = 1\r\nprint x\r\n").statements] == [ast.Let, ast.Print]
    assert parse("").statements == parse("\n# only a comment\n\n").statements == ()


# ---- expressions -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("select", "(select)"),
        ("select gpu", "(select gpu)"),
        ("select where a", "(select where a)"),
        ("select kernel where a or b", "(select kernel where (or a b))"),
        ("(select gpu) - gemm", "(- (select gpu) gemm)"),
        ("1 + 2 * 3", "(+ 1 (* 2 3))"),
        ("(1 + 2) * 3", "(* (+ 1 2) 3)"),
        ("a - b - c", "(- (- a b) c)"),
        ("7 % 2 / 3", "(/ (% 7 2) 3)"),
        ("a or b and not c", "(or a (and b (not c)))"),
        ("not a == b", "(not (== a b))"),
        ("x | y & z", "(| x (& y z))"),
        ("x & y + 1", "(& x (+ y 1))"),
        ("-a * b", "(* (- a) b)"),
        ("-a ** 2", "(- (** a 2))"),
        ("+a", "(+ a)"),
        ("2 ** 3 ** 2", "(** 2 (** 3 2))"),
        ("2 ** -1", "(** 2 (- 1))"),
        ("a == b", "(== a b)"),
        ("a != b", "(!= a b)"),
        ("a < b", "(< a b)"),
        ("a <= b", "(<= a b)"),
        ("a > b", "(> a b)"),
        ("a >= b", "(>= a b)"),
        ('name ~ "gemm"', "(~ name 'gemm')"),
        ('name !~ "gemm"', "(!~ name 'gemm')"),
        ("a in [1, 2]", "(in a [1, 2])"),
        ("a not in b | c", "(not in a (| b c))"),
        ("x.a[0].b", "x.a[0].b"),
        ("(select gpu).duration[-1]", "(select gpu).duration[(- 1)]"),
        ("f()", "f()"),
        ("first(x, 2, n = 3)", "first(x, 2, n=3)"),
        ("[]", "[]"),
        ("[1, [true, false], none]", "[1, [True, False], None]"),
        ("select gpu where duration > 10us", "(select gpu where (> duration 10.0))"),
        ("sel.duration + x.launches + x.where", "(+ (+ sel.duration x.launches) x.where)"),
        ("launches(x)", "launches(x)"),
        ("bye + inx + notx + or_y + selected", "(+ (+ (+ (+ bye inx) notx) or_y) selected)"),
    ],
)
def test_expressions(text: str, tree: str) -> None:
    assert sexp(expr(text)) == tree


def test_keyword_clause_after_where_clause() -> None:
    s = one('insert gpu "k" after select gpu where duration > 1us duration 5us')
    assert (sexp(s.anchor), sexp(s.duration)) == ("(select gpu where (> duration 1.0))", "5.0")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("10us", 10.0),
        ("2ms", 2000.0),
        ("1.5s", 1.5e6),
        ("500ns", 0.5),
        ("1min", 6e7),
        ("1e3us", 1000.0),
        ("1MB", 1e6),
        ("1MiB", 1048576.0),
        ("2GB", 2e9),
        ("4KiB", 4096.0),
        ("3B", 3.0),
    ],
)
def test_quantities(text: str, value: float) -> None:
    lit = expr(text)
    assert (lit.value, type(lit.value), lit.text) == (value, float, text)
    assert quantity_value(text) == value


@pytest.mark.parametrize(
    ("text", "value"), [("10", 10), ("0", 0), ("1.0", 1.0), ("2.", 2.0), (".5", 0.5), ("1e3", 1000.0)]
)
def test_plain_numbers(text: str, value: float) -> None:
    lit = expr(text)
    assert (lit.value, type(lit.value)) == (value, type(value))


def test_literals() -> None:
    literals = one("print true, false, none").values
    assert [(lit.value, lit.text) for lit in literals] == [(True, "true"), (False, "false"), (None, "none")]
    assert expr('"a\\"b\\\\c\\nd\\te"').value == 'a"b\\c\nd\te'
    assert expr('"a\\.b"').value == "a\\.b"
    assert expr("'it\\'s'").value == "it's"
    assert expr('"""two\nlines"""').value == "two\nlines"
    assert unescape('x\\"y\\\\z\\n\\t\\d\\') == 'x"y\\z\n\t\\d\\'


# ---- spans and positions -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "let x = (1 + 2)",
        "print f(x, k = 2)",
        "print a[1]",
        "let x = [1, 2]",
        "remove x with launches",
        'remove select where name in ["a", "b"]',
        'insert gpu "k" after x duration 10us with a = 1, b = "x"',
        "schedule priority -bytes",
        'assert count(select) > 0, "none selected"',
        "let x = 1 + \\\n    2",
        "for g in x by layer {\n  let y = 2\n\n  scale g by (y)\n}",
        "for g in x { scale g by 2 }",
        "for g in x {}",
    ],
)
def test_statement_source(statement: str) -> None:
    script = parse(f"let a = 1\n{statement}\nprint a")
    assert [script.source(s) for s in script.statements] == ["let a = 1", statement, "print a"]


UNUSUAL_BLOCKS = [
    "for g in x {\n  scale g by 2\n  }",
    "for g in x {\n  scale g by 2  # c\n}",
    "for g in x {\n  scale g by 2\n\n}",
    "for g in x  { }",
]


@pytest.mark.parametrize("statement", UNUSUAL_BLOCKS)
def test_for_source_ends_at_closing_brace(statement: str) -> None:
    script = parse(f"{statement}\nprint a")
    assert script.source(script.statements[0]) == statement


def test_positions() -> None:
    script = parse("let a = 1\n\n  print a + f(b)\nfor g in x by layer {\n  scale (select gpu).duration by 2\n}")
    let, pr, loop = script.statements
    assert let.pos == ast.Pos("t.whatif", 1, 1, 0, 9)
    assert str(pr.pos) == "t.whatif:3:3"
    value = pr.values[0]
    nodes = (value, value.left, value.right, value.right.args[0])
    assert [(n.pos.line, n.pos.column) for n in nodes] == [(3, 9), (3, 9), (3, 13), (3, 15)]
    assert (loop.pos.line, loop.pos.column, loop.by_pos.column) == (4, 1, 15)
    scale = loop.body[0]
    assert (scale.pos.line, scale.pos.column) == (5, 3)
    assert (scale.target.pos.column, scale.target.obj.kind_pos.column, scale.target.attr_pos.column) == (9, 17, 22)
    assert (scale.target.pos.start, scale.target.pos.end) == (script.text.index("(select"), script.text.index(" by 2"))
    assert parse_script("print 1", "other.whatif").statements[0].pos.file == "other.whatif"


# ---- parse errors ------------------------------------------------------------------------------------------

STATEMENTS = (
    "'param', 'let', 'scale', 'alloc', 'set', 'remove', 'insert', 'schedule', 'wait', 'for', 'if', 'include',"
    " 'require', 'assert' or 'print'"
)
VALUES = "'false', 'none', 'not', 'select', 'true', a name, a number, a number with a unit, a string or an operator"
EQ_HINT = "compare with '=='; '=' only binds (param, let, set, with)"
DOCSTRING = "only the first statement may be a docstring"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "scael x by 2",
            located(
                1,
                1,
                f"unknown statement 'scael': a statement starts with {STATEMENTS}",
                "scael x by 2",
                5,
                "did you mean 'scale'?",
            ),
        ),
        (
            "let x = 1\n  foo",
            located(
                2,
                3,
                f"unknown statement 'foo': a statement starts with {STATEMENTS}",
                "  foo",
                3,
                "did you mean 'for'?",
            ),
        ),
        (
            "scale x bye 2",
            located(
                1,
                9,
                "unexpected name 'bye'; expected 'and', 'by', 'in', 'not', 'or' or an operator",
                "scale x bye 2",
                3,
                "did you mean 'by'?",
            ),
        ),
        (
            'insert gpu "k" aftr x duration 1',
            located(
                1,
                16,
                "unexpected name 'aftr'; expected '.', '[' or 'before' or 'after'",
                'insert gpu "k" aftr x duration 1',
                4,
                "did you mean 'after'?",
            ),
        ),
        (
            "let a = 1\n\nlet x = 1 2",
            located(
                3,
                11,
                "unexpected number '2'; expected 'and', 'in', 'not', 'or', end of line or an operator",
                "let x = 1 2",
            ),
        ),
        ("print )", located(1, 7, f"unexpected ')'; expected {VALUES}", "print )")),
        ("let x = (1 + 2", located(1, 15, "unexpected end of input; expected ')'", "let x = (1 + 2")),
        ("print a,\nb", located(1, 9, f"unexpected end of line; expected {VALUES}", "print a,")),
        (
            'print "abc\nlet x = 1',
            located(
                1,
                7,
                'unterminated string: a string ends on the line it starts (use """ for several lines)',
                'print "abc',
            ),
        ),
        ("assert x = 1", located(1, 10, "unexpected '='; expected ',' or end of line", "assert x = 1", 1, EQ_HINT)),
        (
            "let x = select where a = 1",
            located(1, 24, "unexpected '='; expected end of line", "let x = select where a = 1", 1, EQ_HINT),
        ),
        (
            "for g in x {\n  scale g by 2",
            located(
                2,
                15,
                "unexpected end of input; expected '}', a statement, a string or end of line",
                "  scale g by 2",
                1,
                "a block opened with '{' needs its closing '}'",
            ),
        ),
        (
            "print f(k = 1, 2)",
            located(1, 7, "f(): a positional argument follows a keyword argument", "print f(k = 1, 2)", 11),
        ),
        ("print f(1, k=1, k=2)", located(1, 7, "f() has a keyword argument twice", "print f(1, k=1, k=2)", 14)),
        ('let x = 1\n"doc"', located(2, 1, f"a string on its own does nothing; {DOCSTRING}", '"doc"', 5)),
        ('"doc"\n"""more"""', located(2, 1, f"a string on its own does nothing; {DOCSTRING}", '"""more"""', 10)),
        (
            'insert gpu "k" after x duration 1 duration 2',
            located(1, 44, "insert has two 'duration' clauses", 'insert gpu "k" after x duration 1 duration 2'),
        ),
        (
            'insert gpu "k" after x on a duration 1 on bb',
            located(1, 43, "insert has two 'on' clauses", 'insert gpu "k" after x on a duration 1 on bb', 2),
        ),
    ],
)
def test_parse_errors(text: str, expected: str) -> None:
    assert parse_error(text) == expected


def test_parse_error_hint_for_stray_bang() -> None:
    lines = parse_error("let x = 1 ! 2").splitlines()
    assert lines[0] == "t.whatif:1:11: unexpected character '!'"
    assert lines[1:] == ["   1 | let x = 1 ! 2", "     |           ^", "  negate with 'not'"]


def test_string_statement_inside_block_is_an_error() -> None:
    text = 'for g in x {\n  "s"\n}'
    assert parse_error(text) == located(2, 3, f"a string on its own does nothing; {DOCSTRING}", '  "s"', 3)


def test_script_error_format() -> None:
    pos = ast.Pos("f.whatif", 2, 3, 0, 100)
    assert (
        str(script_error("bad", pos, "x\n\tab cd\n", "fix it"))
        == "f.whatif:2:3: bad\n   2 |  ab cd\n     |   ^^^^\n  fix it"
    )
    assert str(script_error("bad", None, None, "fix it")) == "bad\n  fix it"
    assert str(script_error("bad", ast.Pos("f", 9, 1))) == "f:9:1: bad"


# ---- static checks -----------------------------------------------------------------------------------------

KINDS = "task, cpu, dataloader, gpu, kernel, memcpy, memset, comm"
INSERT_KINDS = "cpu, dataloader, gpu, memcpy, memset, comm"
COUNT_DOC = "count(X): tasks in a selection, items in a list"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("let count = 1\nprint cont", located(2, 7, "unknown name 'cont'", "print cont", 4, "did you mean 'count'?")),
        (
            "scale select by duraton",
            located(1, 17, "unknown name 'duraton'", "scale select by duraton", 7, "did you mean 'duration'?"),
        ),
        (
            "print coutn(select)",
            located(1, 7, "unknown function 'coutn'", "print coutn(select)", 13, "did you mean 'count'?"),
        ),
        ("print count(1, 2)", located(1, 7, "count() takes 1 argument, got 2", "print count(1, 2)", 11, COUNT_DOC)),
        (
            "print first()",
            located(
                1,
                7,
                "first() takes 1 to 2 arguments, got 0",
                "print first()",
                7,
                "first(SEL) or first(SEL, N): the task (the N tasks) of SEL that start first",
            ),
        ),
        (
            "print count(select, k=1)",
            located(1, 23, "count() has no argument 'k'", "print count(select, k=1)", 1, COUNT_DOC),
        ),
        (
            "print select kernal",
            located(
                1,
                14,
                f"unknown task kind 'kernal': select one of {KINDS}",
                "print select kernal",
                6,
                "did you mean 'kernel'?",
            ),
        ),
        (
            "print (select gpu).duraton",
            located(
                1, 20, "unknown task attribute 'duraton'", "print (select gpu).duraton", 7, "did you mean 'duration'?"
            ),
        ),
        (
            "let x = duration",
            located(
                1,
                9,
                "'duration' is a task attribute: it has a value per task, in a where-clause, a scale factor, "
                "a set value or a schedule priority; a selection's values are SEL.duration",
                "let x = duration",
                8,
            ),
        ),
        (
            "let duration = 1\nprint select where duration > 1",
            located(
                2,
                20,
                "'duration' is both a name bound by the script and a task attribute; in a per-task expression (a"
                " where-clause, a scale factor, a set value, a priority) it would mean the task's duration: rename the"
                " binding",
                "print select where duration > 1",
                8,
            ),
        ),
        ("let gpu = 1", located(1, 1, "let 'gpu': gpu is a built-in name; choose another name", "let gpu = 1", 11)),
        (
            "param a = 1\nparam a = 2",
            located(2, 1, "param 'a' is declared twice (first at t.whatif:1)", "param a = 2", 11),
        ),
        (
            "set (select gpu).thread = 1",
            located(
                1,
                18,
                "cannot set 'thread': it places the task in its thread's order; remove the task "
                "and insert a new one instead",
                "set (select gpu).thread = 1",
                6,
            ),
        ),
        (
            'insert kernal "k" after select gpu duration 1',
            located(
                1,
                8,
                f"unknown task kind 'kernal': insert one of {INSERT_KINDS}",
                'insert kernal "k" after select gpu duration 1',
                6,
            ),
        ),
        (
            'insert kernel "k" after select gpu duration 1',
            located(
                1,
                8,
                f"unknown task kind 'kernel': insert one of {INSERT_KINDS}",
                'insert kernel "k" after select gpu duration 1',
                6,
                "a compute kernel is 'gpu'",
            ),
        ),
        (
            'insert gpu "k" after select gpu',
            located(
                1,
                1,
                "insert gpu 'k' needs a duration: add 'duration 10us' (or an expression)",
                'insert gpu "k" after select gpu',
                31,
            ),
        ),
        (
            'insert gpu "k" after select duration 1 with thread = 1',
            located(
                1,
                54,
                "insert sets 'thread' itself; it cannot be given with 'with'",
                'insert gpu "k" after select duration 1 with thread = 1',
            ),
        ),
        (
            "schedule fifoo",
            located(
                1,
                10,
                "unknown schedule policy 'fifoo': use earliest, fifo or priority EXPRESSION",
                "schedule fifoo",
                5,
                "did you mean 'fifo'?",
            ),
        ),
        (
            "schedule priority",
            located(
                1,
                1,
                "schedule priority needs an expression over task attributes (smallest runs first), "
                "e.g. 'schedule priority -bytes'",
                "schedule priority",
                17,
            ),
        ),
        ("schedule fifo 1", located(1, 15, "schedule fifo takes no expression", "schedule fifo 1")),
        (
            "let g = 1\nfor g in select {\n}",
            located(2, 1, "loop variable 'g' is already bound; choose another name", "for g in select {", 17),
        ),
        ("for g in select {\n}\nprint g", located(3, 7, "unknown name 'g'", "print g")),
        (
            "for g in select {\n  param p = 1\n}",
            located(2, 3, "param belongs at the top of a script, not inside a loop", "  param p = 1", 11),
        ),
        (
            "for g in select by layr {\n}",
            located(
                1,
                20,
                "unknown task attribute 'layr' to group by",
                "for g in select by layr {",
                4,
                "did you mean 'layer'?",
            ),
        ),
    ],
)
def test_check_errors(text: str, expected: str) -> None:
    assert check_error(text) == expected


def test_check_accepts() -> None:
    checker = Checker(Loader().resolve_include)
    text = (
        "print baseline, measured, predicted, gpu\nscale select by duration\nset (select).foo = 1\nprint (select).foo\n"
    )
    checker.check(parse(text + "param n = 2\nfor g in select by foo {\n  let y = n\n}\nprint y"))
    assert list(checker.params) == ["n"]


def test_include_missing(tmp_path: Any) -> None:
    main = tmp_path / "main.whatif"
    main.write_text('let a = 1\ninclude "nope.whatif"\n')
    with pytest.raises(ScriptError) as info:
        check_files([str(main)])
    lines = str(info.value).splitlines()
    assert lines[0].startswith(
        f"{main}:2:1: include 'nope.whatif': no such script (looked for {tmp_path / 'nope.whatif'}"
    )
    assert lines[1:] == ['   2 | include "nope.whatif"', "     | " + "^" * 21]


def test_include_cycle(tmp_path: Any) -> None:
    (tmp_path / "a.whatif").write_text('include "b.whatif"\n')
    (tmp_path / "b.whatif").write_text('let y = 1\ninclude "a.whatif"\n')
    with pytest.raises(ScriptError) as info:
        check_files([str(tmp_path / "a.whatif")])
    first = f"{tmp_path / 'b.whatif'}:2:1: include cycle: a.whatif -> b.whatif -> a.whatif"
    assert str(info.value).splitlines() == [first, '   2 | include "a.whatif"', "     | " + "^" * 18]


def test_include_binds_names(tmp_path: Any) -> None:
    (tmp_path / "c.whatif").write_text("param n = 2 *  3\nlet z = n\n")
    (tmp_path / "d.whatif").write_text('include "c.whatif"\nprint z\n')
    assert check_files([str(tmp_path / "d.whatif")]) == [f"ok  {tmp_path / 'd.whatif'}: 2 statements; params n = 2 * 3"]


# ---- parse_expression --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tree"), [("1.5ms", "1500.0"), ("[1, 2]", "[1, 2]"), ('"x"', "'x'"), ("a.b + 1 # c", "(+ a.b 1)")]
)
def test_parse_expression(text: str, tree: str) -> None:
    e = parse_expression(text)
    assert sexp(e) == tree
    assert (e.pos.file, e.pos.line, e.pos.column, e.pos.start) == ("<expression>", 1, 1, 0)


@pytest.mark.parametrize("text", ["1 +", "1, 2", "1\nprint 2", "", "let x = 1"])
def test_parse_expression_rejects(text: str) -> None:
    with pytest.raises(ScriptError):
        parse_expression(text)


def test_parse_expression_inner_positions() -> None:
    e = parse_expression("a + f(b).x")
    assert (e.left.pos.column, e.right.pos.column, e.right.attr_pos.column, e.right.obj.args[0].pos.column) == (
        1,
        5,
        10,
        7,
    )


def test_parse_expression_error_position() -> None:
    with pytest.raises(ScriptError) as info:
        parse_expression("1 +", "-p x")
    first = (
        "-p x:1:4: unexpected end of input; expected 'false', 'none', 'true', a name, a number, a number with a unit, a"
        " string or an operator"
    )
    assert str(info.value).splitlines()[:3] == [first, "   1 | 1 +", "     |    ^"]


def test_wait_statement() -> None:
    (stmt,) = parse('wait (select kernel where phase == "optimizer") for last(select comm)').statements
    assert isinstance(stmt, ast.Wait) and isinstance(stmt.waiters, ast.Select) and isinstance(stmt.sources, ast.Call)
    assert parse_error("wait x") == located(1, 7, "unexpected end of line; expected 'for'", "wait x")
    assert "unknown name 'y'" in check_error("let x = select gpu\nwait x for y")
    # `wait` is a keyword only where a statement starts: elsewhere it is a name
    assert isinstance(parse("let wait = select gpu\nwait wait for wait").statements[1], ast.Wait)


def test_if_statement() -> None:
    (stmt,) = parse("if x > 1 {\n  scale gpu by 2\n} else {\n  print 1\n}").statements
    assert isinstance(stmt, ast.If) and len(stmt.body) == 1 and isinstance(stmt.orelse[0], ast.Print)
    assert (stmt.pos.line, stmt.pos.column) == (1, 1)
    (bare,) = parse("if true { print 1 }").statements
    assert isinstance(bare, ast.If) and bare.orelse == ()
    assert "param belongs at the top of a script, not inside an if" in check_error("if true {\n  param x = 1\n}")
    assert parse_error("if true print 1").startswith(
        "t.whatif:1:9: unexpected 'print'; expected 'and', 'in', 'not', 'or', '{' or an operator"
    )


def test_a_list_or_a_call_may_span_lines() -> None:
    """Line ends inside ( ) and [ ] join, as in Python (the REPL's continuation prompt shows while one is open);
    a block's line ends still separate its statements, and a bracket left open is an error at the next line."""
    script = parse_script("let x = [1, 2,\n   3]\nfor k in [1, 2\n, 3] {\n  print k\n  print max(k,\n 2)\n}\n")
    assert len(script.statements) == 2 and len(script.statements[1].body) == 2  # type: ignore[attr-defined]
    with pytest.raises(ScriptError) as err:
        parse_script("let x = [1, 2\nprint x\n")
    assert "<script>:2:1: unexpected 'print'" in str(err.value)


def test_script_errors_carry_their_parts_as_fields() -> None:
    """file, line, column, the excerpt with its caret, the note (what it came from) are fields, formatted in str()."""
    import pickle

    with pytest.raises(ScriptError) as err:
        parse_script("let x = 1 2", "t.whatif")
    e = err.value
    assert (e.file, e.line, e.column) == ("t.whatif", 1, 11) and e.message.startswith("unexpected ")
    assert e.excerpt is not None and e.excerpt.splitlines()[1].endswith("^") and e.note is None
    assert str(e).splitlines()[0] == f"t.whatif:1:11: {e.message}"
    noted = e.noted("from -p x=1")
    assert noted.note == "from -p x=1" and str(noted).splitlines()[0].endswith(f"{e.message} (from -p x=1)")
    again = pickle.loads(pickle.dumps(noted))  # compare --jobs sends it across processes
    assert (again.file, again.line, again.column, again.note, str(again)) == (noted.file, 1, 11, noted.note, str(noted))
