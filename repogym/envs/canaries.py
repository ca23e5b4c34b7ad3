"""Masking the hidden tests for one grading: random names, and canaries among them.

For every test file that holds a listed test, the grader installs a copy in which

- every test function, test method and test class gets a **fresh random name** drawn from
  the file's own test-name vocabulary (references inside the file are renamed too; node
  ids are mapped back afterwards), so code that knows the hidden tests' names (they ship
  with the built-in tasks) cannot pick them out to forge their results;
- **canaries** are added in the same scopes (module level and inside the test classes),
  after the scope's tests (so that their side effects never reach a real test), and named
  the same way: for each test that has a literal expectation, a **twin with
  one wrong expected value** (same shape, same calls; which of the two is the real one can
  only be told by knowing the right answer, that is by fixing the bug), plus must-pass and
  must-fail ones that need nothing but builtins and clones of a test that end in a negated
  assertion (these catch forgeries that do not look at test bodies).

A forgery that turns every report into "passed", or that drops the tests it does not know,
then contradicts the canaries; :func:`repogym.envs.verifier.judge` sees it. A task can turn
renaming off (``[verifier] rename_tests = false``) when its tests depend on their own names.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import random
import re
import shutil
import threading
from collections.abc import Iterable
from pathlib import Path

_WORD = re.compile(r"[a-z][a-z0-9]+")
_OPS = (
    ("sorted({v})", sorted), ("len({v})", len), ("sum({v})", sum), ("max({v})", max),
    ("min({v})", min), ("{v}[::-1]", lambda v: v[::-1]),
    ("[x * 2 for x in {v}]", lambda v: [x * 2 for x in v]),
    ("{v}.count({v}[0])", lambda v: v.count(v[0])), ("sorted(set({v}))", lambda v: sorted(set(v))),
)
_VARS = ("values", "items", "data", "expected", "result", "numbers", "inputs", "cases")
_FILLERS = ("case", "value", "works", "again", "edge", "input", "basic", "other")
#: CPython 3.11 keeps the depth counter of its AST conversion per interpreter, not per
#: thread: gradings running in threads have raised "SystemError: AST constructor recursion
#: depth mismatch" (CPython gh-106905). Parsing is cheap; it is done one at a time.
_PARSE_LOCK = threading.Lock()
#: A listed test is cloned into a must-fail canary only if it cannot end early or skip.
_NO_CLONE = re.compile(r"\b(skip|xfail|importorskip|return|yield|exit|sys\.exit)\b")


@dataclasses.dataclass(frozen=True)
class Canary:
    """A planted test whose outcome the grader knows in advance (node id as installed)."""

    node_id: str
    must_pass: bool
    #: For a twin, the installed node id of the test it copies: the twin must fail when
    #: that test passes; when the test fails, the buggy code may well compute the twin's
    #: wrong value (an off-by-one bug meets a twin off by one), and the twin then passes.
    twin_of: str | None = None

    @property
    def file(self) -> str:
        return self.node_id.split("::", 1)[0]


@dataclasses.dataclass
class Masked:
    """What planting did: the canaries, and installed node id -> the task's node id."""

    canaries: list[Canary] = dataclasses.field(default_factory=list)
    renamed: dict[str, str] = dataclasses.field(default_factory=dict)

    def original(self, node_id: str) -> str:
        """The task's node id for an installed one (canaries and unknown ids unchanged)."""
        head, sep, params = node_id.partition("[")
        base = self.renamed.get(head)
        return (base + sep + params) if base is not None else node_id

    def installed(self, node_id: str) -> str:
        """The installed node id for one of the task's."""
        head, sep, params = node_id.partition("[")
        back = {v: k for k, v in self.renamed.items()}
        return back.get(head, head) + sep + params


class _Names:
    """Random test names in the style of a file's own (``test_`` + its words)."""

    def __init__(self, rng: random.Random, words: list[str], taken: set[str]) -> None:
        self.rng, self.words, self.taken = rng, words or list(_FILLERS), taken

    def make(self, prefix: str = "test_", style: str = "snake") -> str:
        while True:
            k = min(len(self.words), self.rng.randint(2, 4))
            parts = self.rng.sample(self.words, k=k)
            if len(self.words) < 4 or self.rng.random() < 0.3:
                parts.append(self.rng.choice(_FILLERS))
            if style == "camel":
                name = prefix + "".join(p.capitalize() for p in parts)
            else:
                name = prefix + "_".join(parts)
            if name not in self.taken:
                self.taken.add(name)
                return name


def _parse(text: str) -> ast.Module:
    with _PARSE_LOCK:
        return ast.parse(text)


def _facts(tree: ast.Module) -> tuple[list[str], list[str], set[str]]:
    """(vocabulary of the file's test names, module-level imported names, every name used)."""
    words: list[str] = []
    taken: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            taken.add(node.name)
            if node.name.lower().startswith("test"):
                words += _WORD.findall(re.sub(r"(?<!^)([A-Z])", r"_\1", node.name).lower())
        elif isinstance(node, ast.Name):
            taken.add(node.id)
    imported = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                name = (alias.asname or alias.name).split(".")[0]
                if name != "*" and not name.startswith("_"):
                    imported.append(name)
    return sorted({w for w in words if w != "test"}), sorted(set(imported)), taken


def _is_test(node: ast.AST) -> bool:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
        node.name.startswith("test")


def _test_classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.startswith("Test")]


def _rename(text: str, tree: ast.Module, rel: str, names: _Names) -> tuple[str, dict[str, str]]:
    """Give every test function, method and class a new name; returns (text, new -> old ids)."""
    mapping: dict[str, str] = {}
    ids: dict[str, str] = {}
    for node in tree.body:
        if _is_test(node):
            mapping[node.name] = names.make()
            ids[f"{rel}::{mapping[node.name]}"] = f"{rel}::{node.name}"
    for cls in _test_classes(tree):
        new_cls = names.make("Test", "camel")
        mapping[cls.name] = new_cls
        for node in cls.body:
            if _is_test(node):
                new = mapping.setdefault(node.name, names.make())
                ids[f"{rel}::{new_cls}::{new}"] = f"{rel}::{cls.name}::{node.name}"
    edits: list[tuple[int, int, int, str]] = []  # (line, byte start, byte end, new text)
    lines = text.splitlines(keepends=True)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in mapping:
            edits.append((node.lineno, node.col_offset, node.end_col_offset, mapping[node.id]))
        elif isinstance(node, ast.Attribute) and node.attr in mapping and \
                node.end_lineno == node.lineno:
            end = node.end_col_offset
            edits.append((node.lineno, end - len(node.attr.encode()), end, mapping[node.attr]))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and \
                node.name in mapping:
            raw = lines[node.lineno - 1].encode()
            m = re.compile(rb"(def|class)\s+(" + re.escape(node.name.encode()) + rb")\b").search(
                raw, node.col_offset)
            if m:
                edits.append((node.lineno, m.start(2), m.end(2), mapping[node.name]))
    for lineno, start, end, new in sorted(set(edits), reverse=True):
        raw = lines[lineno - 1].encode()
        lines[lineno - 1] = (raw[:start] + new.encode() + raw[end:]).decode()
    return "".join(lines), ids


def _wrong(value: object, rng: random.Random) -> object:
    if isinstance(value, int):
        return value + rng.choice((-2, -1, 1, 2))
    assert isinstance(value, list)
    if len(value) > 1 and value != value[::-1]:
        return value[::-1]
    return [*value, rng.randint(1, 9)]


def _asserts(rng: random.Random, must_pass: bool, imported: list[str]) -> list[str]:
    var = rng.choice(_VARS)
    data = [rng.randint(0, 12) for _ in range(rng.randint(3, 6))]
    expr, fn = rng.choice(_OPS)
    value = fn(list(data))
    expected = value if must_pass else _wrong(value, rng)
    lines = [f"assert {rng.choice(imported)} is not None"] if imported else []
    return [*lines, f"{var} = {data!r}", f"assert {expr.format(v=var)} == {expected!r}"]


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def _pure(expr: ast.expr) -> bool:
    """True when evaluating ``expr`` twice gives the same value (no calls, no side effects)."""
    return not any(isinstance(n, ast.Call | ast.Await | ast.Yield | ast.YieldFrom |
                              ast.NamedExpr | ast.Lambda | ast.ListComp | ast.GeneratorExp)
                   for n in ast.walk(expr))


def _failing_tail(fn: ast.FunctionDef, text: str, rng: random.Random,
                  imported: list[str]) -> list[str]:
    """Statements that always fail once ``fn``'s body has run.

    If the body ends with ``assert <pure expression>``, the tail asserts its negation: it
    reads the same values the test computed from the code under test, so it fails like a
    real test would. Otherwise it is a literal comparison that is false.
    """
    last = fn.body[-1]
    if isinstance(last, ast.Assert) and _pure(last.test):
        expr = ast.get_source_segment(text, last.test)
        if expr and "\n" not in expr:
            return [f"assert not ({expr})"]
    return _asserts(rng, False, imported)[-2:]


def _clone(lines: list[str], fn: ast.FunctionDef, name: str, rng: random.Random,
           imported: list[str]) -> list[str] | None:
    """A copy of ``fn`` named ``name`` that always fails at its end, or None."""
    src = lines[fn.lineno - 1:fn.end_lineno]
    if fn.decorator_list or _NO_CLONE.search("".join(src)) or not fn.body or \
            fn.body[0].lineno <= fn.lineno:
        return None
    first = src[0]
    head = re.sub(r"(def\s+)" + re.escape(fn.name) + r"\b", r"\g<1>" + name, first, count=1)
    body_indent = _indent(lines[fn.body[0].lineno - 1])
    if head == first or not body_indent:
        return None
    text = "\n".join(lines)
    tail = [body_indent + line for line in _failing_tail(fn, text, rng, imported)]
    return [head, *src[1:], *tail]


def _mutated(value: object, rng: random.Random, strings: list[str]) -> object | None:
    """A value of the same kind that is not equal to ``value`` (None if there is none).

    A string becomes another string of the same file where there is one (so it reads as
    naturally as the original), else the original with two characters swapped.
    """
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice((-2, -1, 1, 2))
    if isinstance(value, float):
        return value + rng.choice((-1.5, 1.5, 0.5))
    if isinstance(value, str):
        others = [t for t in strings if t != value and t.isprintable() and len(t) < 60]
        if others:
            return rng.choice(others)
        if len(set(value)) > 1:
            i = next(i for i in range(len(value) - 1) if value[i] != value[i + 1])
            return value[:i] + value[i + 1] + value[i] + value[i + 2:]
        return value + value[:1] if value else "a"
    if isinstance(value, list | tuple) and value:
        i = rng.randrange(len(value))
        inner = _mutated(value[i], rng, strings)
        if inner is None:
            return None
        out = [*value[:i], inner, *value[i + 1:]]
        return out if isinstance(value, list) else tuple(out)
    return None


def _render(value: object, like: str) -> str:
    """Source text for ``value`` in the style of ``like`` (the literal it replaces): strings
    take the quotes the original used."""
    double = next((c for c in like if c in "'\""), "'") == '"'

    def text(v: object) -> str:
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False) if double else repr(v)
        if isinstance(v, list):
            return "[" + ", ".join(map(text, v)) + "]"
        if isinstance(v, tuple):
            return "(" + ", ".join(map(text, v)) + ("," if len(v) == 1 else "") + ")"
        return repr(v)

    return text(value)


def _literal(node: ast.expr) -> tuple[bool, object]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _twin(lines: list[str], fn: ast.FunctionDef, name: str, rng: random.Random,
          strings: list[str]) -> list[str] | None:
    """A copy of ``fn`` named ``name`` in which one expected value is wrong, or None.

    The changed value is the literal side of one top-level ``assert <expr> == <literal>``:
    whenever the original test passes, that assertion in the twin fails; whenever the
    original fails earlier, so does the twin. The twin has the same shape, calls and names
    as the test; telling the two apart needs the right answer, which only a fix gives.
    """
    src = lines[fn.lineno - 1:fn.end_lineno]
    if fn.decorator_list or _NO_CLONE.search("\n".join(src)) or \
            fn.body[0].lineno <= fn.lineno:
        return None
    spots = []
    for stmt in fn.body:  # top level only: a nested assert may not run
        t = stmt.test if isinstance(stmt, ast.Assert) else None
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq):
            for side in (t.comparators[0], t.left):
                ok, value = _literal(side)
                if ok and side.lineno == side.end_lineno and not isinstance(side, ast.Name):
                    spots.append((side, value))
                    break
    rng.shuffle(spots)
    for side, value in spots:
        wrong = _mutated(value, rng, strings)
        if wrong is None or wrong == value or repr(wrong) == repr(value):
            continue
        out = list(src)
        i = side.lineno - fn.lineno
        raw = out[i].encode()
        original = raw[side.col_offset:side.end_col_offset].decode()
        out[i] = (raw[:side.col_offset] + _render(wrong, original).encode()
                  + raw[side.end_col_offset:]).decode()
        head = re.sub(r"(def\s+)" + re.escape(fn.name) + r"\b", r"\g<1>" + name, out[0],
                      count=1)
        if head == out[0]:
            return None
        return [head, *out[1:]]
    return None


def add_canaries(text: str, rel: str, rng: random.Random, *,
                 rename: bool = True) -> tuple[str, Masked]:
    """``text`` masked: tests renamed (unless ``rename`` is False) and canaries added.

    Canaries, all after the last test of their scope (module, test class) in a random
    order: a twin with one wrong expected value of each test that has a literal
    expectation; must-pass and must-fail builtins canaries; one clone of a test that ends
    in a negated assertion. Node ids use ``rel``, the file's workspace path. A file that does
    not parse is left as it is (it fails collection, which the grader sees).
    """
    masked = Masked()
    try:
        tree = _parse(text)
    except SyntaxError:
        return text, masked
    words, imported, taken = _facts(tree)
    names = _Names(rng, words, taken)
    if rename:
        text, masked.renamed = _rename(text, tree, rel, names)
        tree = _parse(text)
    lines = text.splitlines()
    inserts: list[tuple[int, list[str]]] = []  # (line index to insert before, lines)
    in_fstrings = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)
                   for v in n.values}
    in_fstrings |= {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}  # docstrings
    strings = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                      and isinstance(n.value, str) and id(n) not in in_fstrings
                      and "\n" not in n.value})

    def scope(body: list[ast.stmt], prefix: str, indent: str, end: int, self_arg: str) -> None:
        tests = [n for n in body if _is_test(n)]
        gap = [""] if self_arg else ["", ""]  # blank lines between definitions, as in PEP 8
        # Every canary goes after the scope's last test, in a random order: a twin or a
        # clone runs the test's own code, and code run before a real test can change what
        # it sees (module state, caches, the defaults a test compares against).
        pieces: list[tuple[list[str], Canary]] = []
        for fn in tests:
            name = names.make()
            if twin := _twin(lines, fn, name, rng, strings):
                pieces.append((twin, Canary(f"{prefix}{name}", False, f"{prefix}{fn.name}")))
        kinds = [True] * rng.randint(1, 2) + [False] * rng.randint(1, 2)
        for must_pass in kinds:
            name = names.make()
            pieces.append(([f"{indent}def {name}({self_arg}):",
                            *[indent + "    " + a for a in _asserts(rng, must_pass, imported)]],
                           Canary(f"{prefix}{name}", must_pass)))
        if tests and (clone := _clone(lines, rng.choice(tests), name := names.make(), rng,
                                      imported)):
            pieces.append((clone, Canary(f"{prefix}{name}", False)))
        rng.shuffle(pieces)
        block: list[str] = []
        for piece, canary in pieces:
            block += [*gap, *piece]
            masked.canaries.append(canary)
        inserts.append((end, block))

    for cls in _test_classes(tree):
        indent = _indent(lines[cls.body[0].lineno - 1]) or "    "
        scope(cls.body, f"{rel}::{cls.name}::", indent, cls.end_lineno, "self")
    scope(tree.body, f"{rel}::", "", len(lines), "")
    # A test class that ends the file ends where the module's block goes: its block must
    # come first there (the module's after it would swallow the class's indented canaries).
    merged: dict[int, list[str]] = {}
    for at, block in inserts:  # classes first, the module last
        merged.setdefault(at, []).extend(block)
    for at, block in sorted(merged.items(), reverse=True):
        lines[at:at] = block
    return "\n".join(lines) + "\n", masked


def plant(files: dict[str, Path], dest: Path, node_ids: Iterable[str], rng: random.Random, *,
          rename: bool = True) -> Masked:
    """Write each ``workspace path -> source file`` under ``dest``; the files holding a listed
    test (``node_ids``) are masked with :func:`add_canaries`, the others copied as they are."""
    holding = {n.split("::", 1)[0] for n in node_ids}
    out = Masked()
    for rel, src in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel not in holding or src.suffix != ".py":
            shutil.copyfile(src, target)
            continue
        text, masked = add_canaries(src.read_text(encoding="utf-8", errors="surrogateescape"),
                                    rel, rng, rename=rename)
        target.write_text(text, encoding="utf-8", errors="surrogateescape")
        out.canaries += masked.canaries
        out.renamed.update(masked.renamed)
    return out
