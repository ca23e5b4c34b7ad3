"""Bug reports written from the failing behaviour: the call that misbehaves, its inputs,
what it gives and what it should give, and a reproduction script.

A synthesised task's statement is a bug report, not a list of hidden tests. It is made
from what the failing tests do (runs nothing itself; :mod:`repogym.scenarios.synth` runs
the tests and checks the scripts in the sandbox):

- the calls each failing test makes into the package are recorded with the bug and
  without it (``rg_probe``'s call recorder: arguments as source text, objects an earlier
  call returned as references, outcomes as values or exceptions);
- :func:`replay_checks` finds the first call whose outcome differs with the same inputs
  and writes it as a :class:`Check`: the calls that built its inputs (a slice of the
  test's calls), the call itself, and an assertion of the right outcome;
- :func:`inline_check` is the fallback for a test whose calls cannot be replayed (a
  lambda argument, a test-made object): the test's own body, with what it uses from its
  module, as a script (only for a test without fixtures or parameters);
- :func:`title` writes the report's first line from what the bug does (a crash and its
  exception's class, a wrong exception, a value off by one, items missing or out of order,
  ...), naming the function but nothing a check expects;
- :func:`script` turns checks into a self-contained ``reproduction.py`` (run from the
  workspace root as ``python reproduction.py``: exits 0 once the bug is fixed, otherwise an
  uncaught AssertionError that says expected vs actual); :func:`statement` writes the
  report, with the script verbatim in a fenced ``python`` block under a line
  ``Reproduction:`` (the format the ``apr`` agent reads, see :func:`reproduction_of`);
- :func:`leaks` refuses a report that holds a line the gold patch adds or removes, a
  token only the fix has, or a hidden test's id or name.

A report is at most :data:`MAX_CHARS` characters. When no check can be written, or none
survives the sandbox and the leak check, the task is dropped rather than given a template.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import io
import keyword
import re
import textwrap
import tokenize
from collections.abc import Callable, Iterable, Sequence

#: Longest statement (report and reproduction together).
MAX_CHARS = 2000
#: The line above the reproduction's fenced block in a statement.
HEADING = "Reproduction:"
#: Longest outcome shown in the report's text (the script holds the whole value).
_SHOWN = 160
#: Longest call a failure message repeats in full.
_LABEL = 60
#: Most statements in a replayed check (setup calls and the call itself).
_MAX_STEPS = 25
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+|\b0x[0-9a-fA-F]{8,}\b")
#: Types whose ``==`` is their value's (a repr comparison adds nothing).
_PLAIN = {
    "int",
    "float",
    "str",
    "bytes",
    "bool",
    "NoneType",
    "list",
    "tuple",
    "dict",
    "set",
    "frozenset",
    "complex",
}
_FENCE = re.compile(
    r"^Reproduction:[ \t]*\n\s*```python[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL
)


@dataclasses.dataclass(frozen=True)
class Check:
    """One misbehaving call, as code.

    Attributes:
        body: Statements that end in an assertion failing while the bug is there.
        imports: ``(module, name)`` pairs (name ``""``: ``import module``).
        call: The misbehaving call as source text.
        actual: What it does with the bug (``returns X`` / ``raises E: msg``).
        expected: What it should do (``return X`` / ``raise E``).
        function: The public name of what is called (``Version.bump``).
        source: ``replay`` (from the recorded calls) or ``test`` (the test's body).
    """

    body: tuple[str, ...]
    imports: tuple[tuple[str, str], ...]
    call: str
    actual: str
    expected: str
    function: str
    source: str = "replay"


# -- replaying recorded calls -------------------------------------------------------------
def _key(record: dict) -> tuple:
    return (record.get("text"), record.get("kind"))


def _outcome_key(record: dict) -> tuple:
    out = record.get("outcome") or {}
    if "raised" in out:
        return ("raised", out.get("raised"), without_addresses(str(out.get("message"))))
    return ("returned", out.get("returned") or without_addresses(str(out.get("repr"))))


def without_addresses(text: str) -> str:
    """``text`` without CPython's memory addresses (`` at 0x7f...``), which differ per run."""
    return _ADDRESS.sub("", text)


def first_difference(buggy: Sequence[dict], gold: Sequence[dict]) -> int | None:
    """Index of the first recorded call made with the same inputs in both runs whose
    outcome differs (None: the runs part before any such call, or never differ)."""
    for i, (b, g) in enumerate(zip(buggy, gold, strict=False)):
        if _key(b) != _key(g) or "outcome" not in b or "outcome" not in g:
            return None
        if _outcome_key(b) != _outcome_key(g):
            return i
    return None


def _slice(calls: Sequence[dict], k: int) -> list[int] | None:
    """Indices of the calls before ``k`` that built (or changed) the objects call ``k``
    uses, with the call itself; None when one of them cannot be written."""
    needed = set(calls[k].get("refs", []))
    keep = {k}
    changed = True
    while changed:
        changed = False
        for i in range(k):
            if i in keep:
                continue
            c = calls[i]
            made = (c.get("outcome") or {}).get("ref")
            if made in needed or set(c.get("refs", [])) & needed:
                keep.add(i)
                needed |= set(c.get("refs", []))
                if made is not None:
                    needed.add(made)
                changed = True
    order = sorted(keep)
    if len(order) > _MAX_STEPS or any(
        calls[i].get("opaque") or "text" not in calls[i] or "outcome" not in calls[i] for i in order
    ):
        return None
    return order


def _snake(name: str) -> str:
    s = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().strip("_")
    s = re.sub(r"\W", "_", s) or "value"
    return s + "_" if keyword.iskeyword(s) or hasattr(builtins, s) or s == "result" else s


def _names(calls: Sequence[dict], order: list[int]) -> dict[int, str]:
    """Reference number -> a variable name after the object's type (``version``,
    ``version_2``)."""
    out: dict[int, str] = {}
    used: dict[str, int] = {}
    for i in order:
        out_ = calls[i].get("outcome") or {}
        if "ref" in out_:
            base = _snake(str(out_.get("type", "value")))
            used[base] = used.get(base, 0) + 1
            out[out_["ref"]] = base if used[base] == 1 else f"{base}_{used[base]}"
    return out


def _subst(text: str, names: dict[int, str]) -> str | None:
    bad = False

    def sub(m: re.Match) -> str:
        nonlocal bad
        n = int(m.group(1))
        if n not in names:
            bad = True
            return m.group(0)
        return names[n]

    out = re.sub(r"\b_v(\d+)\b", sub, text)
    return None if bad else out


def _fstring(text: str) -> str:
    """``text`` as the literal part of an f-string in double quotes."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("{", "{{").replace("}", "}}")


def _shown(text: str) -> str:
    """``text`` for a sentence of the report: one line, no memory address (``<X object at
    0x7f...>`` differs from run to run and says nothing of the bug), at most _SHOWN long."""
    text = without_addresses(" ".join(str(text).split()))
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _imports(records: Iterable[dict]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for r in records:
        out += [tuple(x) for x in r.get("imports", [])]
        out += [tuple(x) for x in (r.get("outcome") or {}).get("imports", [])]
    return out


def function_of(record: dict) -> str:
    """The public name of a recorded call's function (``Version.bump``)."""
    qual = str(record.get("qualname") or record.get("function") or "")
    return qual.replace(".__init__", "")


def _label(call: str, function: str) -> str:
    """How a failure message names the call (a long one by its function)."""
    return call if len(call) <= _LABEL or not function else f"{function}(...)"


def _assertion(
    call: str, gold: dict, buggy: dict, by_repr: bool, function: str = ""
) -> tuple[list[str], list[tuple[str, str]], str, str] | None:
    """(statements ending in the assertion, their imports, expected, actual); ``by_repr``
    compares a returned value's repr (for a type without ``==``)."""
    lit = _fstring(_label(call, function))
    imports: list[tuple[str, str]] = []
    if "raised" in buggy:
        actual = f"raises {buggy['raised']}" + (
            f": {buggy['message']}" if buggy.get("message") else ""
        )
    else:
        actual = f"returns {buggy.get('returned') or buggy.get('repr')}"
    if "raised" in gold:
        exc = gold.get("import")
        if not exc:
            return None
        if exc[0] != "builtins":
            imports.append(tuple(exc))
        name, message = exc[1], gold.get("message", "")
        lines = ["try:", f"    result = {call}"]
        if buggy.get("raised") == gold["raised"]:  # the same exception, another message
            lines += [
                f"except {name} as error:",
                f"    expected = {message!r}",
                (
                    f'    assert str(error) == expected, f"{lit} raised {name}: {{error}}, '
                    f'expected the message {{expected!r}}"'
                ),
            ]
            expected = f"raise {name}: {message}"
        else:
            lines += [f"except {name}:", "    pass"]
            expected = f"raise {name}"
            if "raised" in buggy:
                lines += [
                    "except Exception as error:",
                    (
                        f'    raise AssertionError(f"{lit} raised {{type(error).__name__}}: '
                        f'{{error}}, expected {name}") from None'
                    ),
                ]
        lines += [
            "else:",
            (f'    raise AssertionError(f"{lit} returned {{result!r}}, expected {name}")'),
        ]
        return lines, imports, expected, actual
    value = gold.get("returned")
    if value is not None and not by_repr:
        imports += [tuple(x) for x in gold.get("imports", [])]
        expect = [f"expected = {value}"]
        test = "result == expected"
        shown_expected = value
    else:
        expect = [f"expected = {gold.get('repr', '')!r}"]
        test = "repr(result) == expected"
        shown_expected = gold.get("repr", "")
    if "raised" in buggy:
        lines = [
            *expect,
            "try:",
            f"    result = {call}",
            "except Exception as error:",
            (
                f'    raise AssertionError(f"{lit} raised {{type(error).__name__}}: {{error}}'
                f', expected {{expected!r}}") from None'
            ),
        ]
    else:
        lines = [f"result = {call}", *expect]
    if test.startswith("result"):
        lines += [f'assert {test}, f"{lit} returned {{result!r}}, expected {{expected!r}}"']
    else:
        lines += [f'assert {test}, f"{lit} returned {{result!r}}, expected {{expected}}"']
    return lines, imports, f"return {shown_expected}", actual


def replay_checks(buggy: Sequence[dict], gold: Sequence[dict]) -> list[Check]:
    """Checks of the first call that differs between the two recordings of one test
    (empty when there is none, or its inputs cannot be written): comparing the value
    with ``==``, then, for a value that is not a primitive, its repr (which of them holds
    is for the sandbox to tell)."""
    out = [c for by_repr in (False, True) if (c := _replay(buggy, gold, by_repr))]
    return list(dict.fromkeys(out))


def _replay(buggy: Sequence[dict], gold: Sequence[dict], by_repr: bool) -> Check | None:
    k = first_difference(buggy, gold)
    if k is None:
        return None
    if by_repr and (gold[k]["outcome"].get("type") in _PLAIN or "raised" in gold[k]["outcome"]):
        return None
    order = _slice(gold, k)
    if order is None or _slice(buggy, k) != order:
        return None
    names = _names(gold, order)
    body: list[str] = []
    for i in order[:-1]:
        text = _subst(gold[i]["text"], names)
        if text is None:
            return None
        made = (gold[i].get("outcome") or {}).get("ref")
        if "raised" in (gold[i].get("outcome") or {}):
            return None
        if made is not None and made in names:
            body.append(f"{names[made]} = {text}")
        elif gold[i].get("kind") == "get":
            body.append(f"_ = {text}")
        else:
            body.append(text)
    call = _subst(gold[k]["text"], names)
    if call is None or gold[k].get("kind") == "set" and "raised" not in gold[k]["outcome"]:
        return None
    made = _assertion(
        call, gold[k]["outcome"], buggy[k]["outcome"], by_repr, function_of(gold[k]).split(".")[-1]
    )
    if made is None:
        return None
    lines, extra, expected, actual = made
    imports = _imports(gold[i] for i in order) + extra
    return Check(
        tuple(body + lines),
        tuple(dict.fromkeys(imports)),
        call,
        actual,
        expected,
        function_of(gold[k]),
    )


# -- the test's own body --------------------------------------------------------------
def _used_names(nodes: Iterable[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


def _bound(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if import_fallback(stmt):
        return {name for sub in _fallback_imports(stmt) for name in _bound(sub)}
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {stmt.name}
    if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _fallback_imports(stmt: ast.Try) -> list[ast.stmt]:
    return [*stmt.body, *(x for h in stmt.handlers for x in h.body)]


def import_fallback(stmt: ast.stmt) -> bool:
    """``try: from unittest.mock import Mock`` / ``except ImportError: from mock import
    Mock``: a module-level ``try`` of imports alone (colorama's tests bind ``Mock`` so),
    written into a script whole, like an import."""
    return (
        isinstance(stmt, ast.Try)
        and not stmt.orelse
        and not stmt.finalbody
        and all(
            isinstance(x, ast.Import | ast.ImportFrom | ast.Pass) for x in _fallback_imports(stmt)
        )
        and any(isinstance(x, ast.Import | ast.ImportFrom) for x in _fallback_imports(stmt))
    )


def _reach(start: Iterable[str], step: Callable[[str], set[str] | None]) -> bool:
    """Visits every name reachable from ``start`` (``step(name)`` gives the names it
    needs); False as soon as a step gives None (a name that cannot be written)."""
    todo, seen = sorted(start), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        more = step(name)
        if more is None:
            return False
        todo += sorted(more - seen)
    return True


def _context(
    tree: ast.Module, needed: set[str], skip: ast.AST | None = None
) -> list[ast.stmt] | None:
    """The module-level statements that bind ``needed`` (and what they need), in order;
    None when a name is bound by something else (a loop, a test function)."""
    by_name: dict[str, list[ast.stmt]] = {}
    for stmt in tree.body:
        for name in _bound(stmt):
            by_name.setdefault(name, []).append(stmt)
    keep: list[ast.stmt] = []

    def step(name: str) -> set[str] | None:
        more: set[str] = set()
        for stmt in by_name.get(name, []):
            if (
                stmt is skip
                or isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
                and stmt.name.startswith("test")
            ):
                return None
            if stmt not in keep:
                keep.append(stmt)
                if not isinstance(stmt, ast.Import | ast.ImportFrom) and not import_fallback(stmt):
                    more |= _used_names([stmt])
        return more

    if not _reach(needed, step):
        return None
    return sorted(keep, key=lambda s: s.lineno)


def _fixture_free(fn: ast.FunctionDef, method: bool) -> bool:
    """A test function without parameters, or a test method taking only ``self``."""
    args = fn.args
    params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    if args.vararg or args.kwarg or fn.decorator_list:
        return False
    return params == ["self"] if method else not params


def _rewrite_asserts(body: list[ast.stmt], source: str) -> list[str]:
    """The body's source, its top-level ``assert a == b`` written so that the failure
    says what ``a`` was and what was expected."""
    out = []
    for stmt in body:
        text = ast.get_source_segment(source, stmt, padded=False) or ""
        t = stmt.test if isinstance(stmt, ast.Assert) else None
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq):
            left = ast.get_source_segment(source, t.left)
            right = ast.get_source_segment(source, t.comparators[0])
            if left and right and "\n" not in left + right:
                lit = _fstring(left if len(left) <= _LABEL else left[: _LABEL - 3] + "...")
                out += [
                    f"result = {left}",
                    f"expected = {right}",
                    (
                        f'assert result == expected, f"{lit} gave {{result!r}}, expected '
                        f'{{expected!r}}"'
                    ),
                ]
                continue
        out += textwrap.dedent(" " * stmt.col_offset + text).splitlines()
    return out


@dataclasses.dataclass
class _Module:
    """A test module read for an inline check."""

    path: str
    source: str
    tree: ast.Module


#: Reads a test file (path relative to the package root) or gives None for another file.
Reader = Callable[[str], str | None]


def _module(path: str, read: Reader) -> _Module | None:
    text = read(path)
    if text is None:
        return None
    try:
        return _Module(path, text, ast.parse(text))
    except SyntaxError:
        return None


def _target(mod: _Module, stmt: ast.ImportFrom, read: Reader) -> _Module | None:
    """The test module a ``from X import ...`` in ``mod`` reads (None: not a test file)."""
    folder = mod.path.rsplit("/", 1)[0] if "/" in mod.path else ""
    parts = folder.split("/") if folder and stmt.level else []
    base = "/".join(parts[: len(parts) - stmt.level + 1])  # level 1: the module's folder
    dotted = (stmt.module or "").replace(".", "/")
    stem = "/".join(x for x in (base, dotted) if x)
    for candidate in (f"{stem}.py", f"{stem}/__init__.py" if stem else "__init__.py"):
        if (found := _module(candidate, read)) is not None:
            return found
    return None


def _class_chain(
    mod: _Module, name: str, read: Reader, depth: int = 0
) -> list[tuple[_Module, ast.ClassDef]]:
    """Class ``name`` of ``mod`` and the bases of it that test modules define (a mixin in
    the tests' ``__init__.py``), most derived first; bases found nowhere (``TestCase``,
    ``Protocol``) are left out."""
    found = [n for n in mod.tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    if found:
        chain = [(mod, found[-1])]
        if depth < 4:
            for base in found[-1].bases:
                if isinstance(base, ast.Name):
                    chain += [
                        c for c in _class_chain(mod, base.id, read, depth + 1) if c not in chain
                    ]
        return chain
    for stmt in mod.tree.body:
        if (
            isinstance(stmt, ast.ImportFrom)
            and depth < 4
            and any((a.asname or a.name) == name for a in stmt.names)
        ):
            real = next(a.name for a in stmt.names if (a.asname or a.name) == name)
            other = _target(mod, stmt, read)
            return _class_chain(other, real, read, depth + 1) if other else []
    return []


def _self_attrs(nodes: Iterable[ast.AST]) -> set[str]:
    return {
        n.attr
        for node in nodes
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    }


def _member_names(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {stmt.name}
    return _bound(stmt)


def _member_needs(stmt: ast.stmt) -> set[str]:
    """The module-level names a class-body statement reads: an assignment's loaded names
    (``clamp = staticmethod(clamp)`` reads the module's ``clamp``), a definition's names
    but its own."""
    if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
        return {
            n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
    return _used_names([stmt]) - _member_names(stmt)


def _members(
    chain: list[tuple[_Module, ast.ClassDef]], wanted: set[str]
) -> list[tuple[_Module, ast.stmt]] | None:
    """The class-body statements of ``chain`` that ``wanted`` names need (with what they
    use of ``self``), the most derived definition of each; None when ``self`` is used for
    something no class of the chain defines (and no ``setUp`` may set)."""
    import unittest

    by_name: dict[str, tuple[_Module, ast.stmt]] = {}
    for mod, cls in reversed(chain):  # bases first: the derived class overrides
        for stmt in cls.body:
            for name in _member_names(stmt):
                if name.startswith("test") or (
                    hasattr(unittest.TestCase, name) and name not in ("setUp", "tearDown")
                ):
                    continue
                by_name[name] = (mod, stmt)
    keep: list[tuple[_Module, ast.stmt]] = []

    def step(name: str) -> set[str] | None:
        if name not in by_name:  # a TestCase method, or what setUp may set
            return set() if hasattr(unittest.TestCase, name) or "setUp" in by_name else None
        if (item := by_name[name]) in keep:
            return set()
        keep.append(item)
        return _self_attrs([item[1]])

    if not _reach(set(wanted) | ({"setUp"} & set(by_name)), step):
        return None
    return sorted(keep, key=lambda m: (m[0].path != chain[0][0].path, m[1].lineno))


def _needed_imports(
    mod: _Module, names: set[str], skip: ast.AST | None, read: Reader, depth: int = 0
) -> list[str] | None:
    """Module-level statements of ``mod`` (their source, one string each) binding
    ``names``, an import from another test module replaced by that module's own statements
    for the names (the script cannot import the hidden tests); None when a name cannot be
    written."""
    context = _context(mod.tree, names, skip)
    if context is None:
        return None
    names = names | _used_names(s for s in context if not isinstance(s, ast.ImportFrom))
    segments: list[str] = []
    for stmt in context:
        if isinstance(stmt, ast.ImportFrom) and (other := _target(mod, stmt, read)) is not None:
            if depth >= 3:
                return None
            wanted = {a.name for a in stmt.names if (a.asname or a.name) in names}
            if any(
                a.asname and a.asname != a.name for a in stmt.names if (a.asname or a.name) in names
            ):
                return None
            sub = _needed_imports(other, wanted, None, read, depth + 1)
            if sub is None:
                return None
            segments += [g for g in sub if g not in segments]
            continue
        if isinstance(stmt, ast.ImportFrom) and stmt.level:
            # ``from ..core import later`` in ``pkg/tests/test_x.py``: the script runs from
            # the repository's root, where the package is ``pkg.core``
            if (absolute := _absolute(mod.path, stmt)) is None:
                return None
            segments.append(absolute)
            continue
        seg = ast.get_source_segment(mod.source, stmt, padded=False)
        if seg is None:
            return None
        segments.append(seg)
    return segments


def _absolute(path: str, stmt: ast.ImportFrom) -> str | None:
    """A relative import of the test file at ``path`` (repository-relative) written from the
    repository's root (a leading ``src`` folder is the import root), or None when it climbs
    above it."""
    parts = path.split("/")[:-1]
    if parts[:1] == ["src"]:
        parts = parts[1:]
    if stmt.level > len(parts):
        return None
    dotted = ".".join([*parts[: len(parts) - stmt.level + 1], *filter(None, [stmt.module])])
    if not dotted:
        return None
    names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in stmt.names)
    return f"from {dotted} import {names}"


def inline_check(test_source: str, node_id: str, read: Reader | None = None) -> Check | None:
    """The failing test's body as a check (None for a parametrized test, one with
    fixtures, or one whose module cannot be parsed).

    A test method of a ``unittest``-style class becomes a script with a class holding what
    the method uses of ``self`` (class attributes such as ``Cache = LRUCache``, helper
    methods, ``setUp``), gathered from the class and from its bases that test modules
    define (a mixin in the tests' ``__init__.py``; ``read`` gives those files' text), and
    ``self`` an instance of it.
    """
    if "[" in node_id:
        return None
    path, *parts = node_id.split("::")
    files = {path: test_source}

    def reader(p: str) -> str | None:
        return files.get(p) if p in files else (read(p) if read else None)

    mod = _module(path, reader)
    if mod is None or not parts or len(parts) > 2:
        return None
    method = len(parts) == 2
    found = _test_function(mod, parts, reader)
    if found is None:
        return None
    fn_mod, fn, chain = found
    if not _fixture_free(fn, method):
        return None
    body = (
        fn.body[1:]
        if fn.body
        and isinstance(fn.body[0], ast.Expr)
        and isinstance(fn.body[0].value, ast.Constant)
        else fn.body
    )
    if not body:
        return None
    members = _members(chain, _self_attrs(body)) if method else []
    if members is None:
        return None
    needs: dict[str, set[str]] = {fn_mod.path: _used_names(body) - {"self"}}
    modules = {fn_mod.path: fn_mod}
    for m, stmt in members:
        modules[m.path] = m
        needs.setdefault(m.path, set()).update(_member_needs(stmt) - {"self"})
    segments: list[str] = []  # a statement two modules need is written once
    for p, names in needs.items():
        got = _needed_imports(modules[p], names, fn if p == fn_mod.path else None, reader)
        if got is None:
            return None
        segments += [g for g in got if g not in segments]
    lines = [ln for seg in segments for ln in seg.splitlines()]
    if method:
        case = _case_lines(members)
        if case is None:
            return None
        lines += case
    lines += ["", *_rewrite_asserts(body, fn_mod.source)]
    call = (ast.get_source_segment(fn_mod.source, body[-1]) or "").splitlines()[0]
    return Check(tuple(lines), (), call, "", "", "", source="test")


def _test_function(
    mod: _Module, parts: list[str], read: Reader
) -> tuple[_Module, ast.FunctionDef, list[tuple[_Module, ast.ClassDef]]] | None:
    """Test ``parts`` (``[function]`` or ``[class, method]``) of ``mod``: the module that
    defines its function, the function and (for a method) the class chain; None if absent."""
    if len(parts) == 1:
        fn = next(
            (n for n in mod.tree.body if isinstance(n, ast.FunctionDef) and n.name == parts[0]),
            None,
        )
        return None if fn is None else (mod, fn, [])
    chain = _class_chain(mod, parts[0], read)
    owner = next(
        (
            (m, n)
            for m, c in chain
            for n in c.body
            if isinstance(n, ast.FunctionDef) and n.name == parts[1]
        ),
        None,
    )
    return None if owner is None else (*owner, chain)


def _case_lines(members: list[tuple[_Module, ast.stmt]]) -> list[str] | None:
    """A ``unittest.TestCase`` class holding ``members`` and ``self`` an instance of it
    (set up when it has ``setUp``); None if a member's source cannot be found."""
    lines = ["import unittest", "", "", "class Case(unittest.TestCase):"]
    for m, stmt in members:
        seg = ast.get_source_segment(m.source, stmt, padded=False)
        if seg is None:
            return None
        lines += textwrap.indent(textwrap.dedent(" " * stmt.col_offset + seg), "    ").splitlines()
    if not members:
        lines.append("    pass")
    lines += ["", "", "self = Case()"]
    if any(_member_names(s) == {"setUp"} for _, s in members):
        lines.append("self.setUp()")
    return lines


def shortened(check: Check, max_chars: int, paths: Sequence[str] = ()) -> Check | None:
    """A test's inlined body (``source == "test"``) cut after the last of its checks that
    still fits a script of ``max_chars``, or None when no check does. Real tests run many
    checks in a row (cssselect's ``test_translation`` holds dozens): the one that fails with
    the bug may come early, and what follows it is not needed. Whether the cut script still
    fails with the bug, by its own assertion, is for the sandbox to tell, as for any check.
    """
    if check.source != "test":
        return None
    text = "\n".join(check.body)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    lines = text.splitlines()
    for stmt in reversed(tree.body):
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return None  # only definitions and imports are left: no check of the test's
        if not _checks(stmt):
            continue
        body = tuple(lines[: stmt.end_lineno])
        cut = dataclasses.replace(check, body=body, call=lines[stmt.lineno - 1].strip())
        if len(script([cut], paths)) <= max_chars:
            return cut
    return None


#: A frame of the reproduction script in a traceback (the first one is its top level).
_SCRIPT_FRAME = re.compile(r'File "[^"\n]*reproduction\.py", line (\d+)')


def cut_at_failure(
    check: Check, output: str, max_chars: int, paths: Sequence[str] = ()
) -> Check | None:
    """A test's inlined body (``source == "test"``) cut after the statement it failed at,
    by the traceback in ``output`` of its whole script (:func:`script`) run with the bug;
    None when the output names no such statement or no cut fits ``max_chars``.

    :func:`shortened` keeps the checks that fit, which may stop before the one that fails
    (cssselect's failing check is often the fortieth of a test). Here the failing check is
    kept, and while the script is too long the checks before it that bind nothing are left
    out, earliest first, each with the assignments only it reads (:func:`_spare_checks`):
    they held with the bug (the script got past them), so the cut script still fails where
    the whole one did; whether it passes without the bug is for the sandbox to tell, as
    for any check.
    """
    if check.source != "test" or not (frames := _SCRIPT_FRAME.findall(output)):
        return None
    offset = len(script([dataclasses.replace(check, body=())], paths).splitlines())
    text = "\n".join(check.body)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    line = int(frames[0]) - offset  # the first frame: the statement at the top level
    at = next((i for i, s in enumerate(tree.body) if s.lineno <= line <= s.end_lineno), None)
    if at is None or not _checks(tree.body[at]):
        return None
    lines, end = text.splitlines(), tree.body[at].end_lineno
    droppable = _spare_checks(tree.body, at)
    # the function to name: what computed the failing check's value, not the test's last call
    culprit = _culprit(tree.body, at)
    function = (
        check.function if not culprit or check.function.split(".")[-1] == culprit else culprit
    )
    gone: set[int] = set()
    while True:
        kept = tuple(x for i, x in enumerate(lines[:end]) if i not in gone)
        cut = dataclasses.replace(
            check, body=kept, call=lines[tree.body[at].lineno - 1].strip(), function=function
        )
        if len(script([cut], paths)) <= max_chars:
            return cut
        if not droppable:
            return None
        for stmt in droppable.pop(0):
            gone |= set(range(stmt.lineno - 1, stmt.end_lineno))


def _culprit(body: list[ast.stmt], at: int) -> str | None:
    """The name of the function whose result ``body[at]`` checks: the outermost call in it
    (an ``assert*`` method and builtins aside), else in the assignment of a name it reads,
    nearest first (an inlined ``assert (p.x, p.y) == ...`` reads ``result``, bound to
    ``(p.x, p.y)``, which reads ``p``, bound to ``shift(...)``: ``shift``)."""
    if name := _called(body[at]):
        return name
    wanted = _names_in(body[at], ast.Load)
    for stmt in reversed(body[:at]):
        if isinstance(stmt, ast.Assign) and (bound := _assigned(stmt)) & wanted:
            if name := _called(stmt.value):
                return name
            wanted = (wanted - bound) | _names_in(stmt.value, ast.Load)
    return None


def _called(node: ast.AST) -> str | None:
    """The outermost call's function name in ``node`` (breadth first), leaving out builtins
    and ``assert*``/``fail*`` methods."""
    queue = [node]
    while queue:
        n = queue.pop(0)
        if isinstance(n, ast.Call):
            f = n.func
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
            if name and not name.startswith(("assert", "fail")) and not hasattr(builtins, name):
                return name
        queue.extend(ast.iter_child_nodes(n))
    return None


def _spare_checks(body: list[ast.stmt], at: int) -> list[list[ast.stmt]]:
    """The checks before ``body[at]`` that can be left out, each with the assignments just
    before it that only it reads (an inlined ``assert a == b`` is ``result = a``,
    ``expected = b``, then the assert): a check that binds nothing, whose assignments'
    names no later statement up to ``body[at]`` reads before binding them again."""
    out = []
    for i, stmt in enumerate(body[:at]):
        if not _bare_check(stmt):
            continue
        group, used = [stmt], _names_in(stmt, ast.Load)
        j = i - 1
        while j >= 0 and isinstance(body[j], ast.Assign) and _assigned(body[j]) <= used:
            group.insert(0, body[j])
            j -= 1
        bound = set().union(*(_assigned(g) for g in group[:-1]))
        if all(_dead(name, body[i + 1 : at + 1]) for name in bound):
            out.append(group)
    return out


def _names_in(node: ast.AST, ctx: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _assigned(stmt: ast.Assign) -> set[str]:
    """The plain names an assignment binds (nothing for ``a.b = ...`` or ``a[i] = ...``,
    which change an object: never left out)."""
    if all(isinstance(t, ast.Name) for t in stmt.targets):
        return {t.id for t in stmt.targets}
    return {"\0"}  # never a name a check reads: the assignment stays


def _dead(name: str, later: list[ast.stmt]) -> bool:
    """Whether ``later`` binds ``name`` again before any of them reads it."""
    for stmt in later:
        if name in _names_in(stmt, ast.Load):
            return False
        if isinstance(stmt, ast.Assign) and name in _assigned(stmt):
            return True
        if name in _names_in(stmt, ast.Store):
            return False  # bound some other way (a loop, a with): keep it simple, keep it
    return True


def _bare_check(stmt: ast.stmt) -> bool:
    """An ``assert`` or a ``self.assert*(...)`` call standing alone: a check that binds
    nothing, so leaving it out changes no later statement."""
    if isinstance(stmt, ast.Assert):
        return True
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and stmt.value.func.attr.startswith("assert")
    )


def _checks(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` asserts something: an ``assert`` or a ``self.assert*`` call."""
    return any(
        isinstance(n, ast.Assert)
        or (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr.startswith(("assert", "fail"))
        )
        for n in ast.walk(stmt)
    )


# -- the script and the statement -------------------------------------------------------
def _import_lines(imports: Iterable[tuple[str, str]]) -> list[str]:
    imports = list(imports)
    plain = sorted({m for m, n in imports if not n and m != "builtins"})
    named: dict[str, list[str]] = {}
    for m, n in imports:
        if n and m != "builtins" and n not in named.setdefault(m, []):
            named[m].append(n)
    return [f"import {m}" for m in plain] + [
        f"from {m} import {', '.join(sorted(ns))}" for m, ns in sorted(named.items()) if ns
    ]


def script(checks: Sequence[Check], paths: Sequence[str] = ()) -> str:
    """``reproduction.py`` for ``checks`` (several: each runs, the failures are collected
    and reported together). ``paths``: workspace folders the package is imported from
    (``src``), put on ``sys.path`` relative to the script."""
    head = [
        (
            '"""Reproduces the bug: fails with an AssertionError while it is there, exits 0 '
            'once it is fixed."""'
        )
    ]
    if paths:
        head += [
            "import os",
            "import sys",
            "",
            *[
                f"sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath("
                f"__file__)), {p!r}))"
                for p in reversed(paths)
            ],
        ]
    imports = _import_lines(i for c in checks if c.source == "replay" for i in c.imports)
    lines = [*head, *([""] if imports or paths else []), *imports]
    if len(checks) == 1:
        return "\n".join([*lines, "", *checks[0].body]) + "\n"
    for n, c in enumerate(checks, 1):
        lines += [
            "",
            "",
            f"def check_{n}():",
            *textwrap.indent("\n".join(c.body), "    ").splitlines(),
        ]
    names = ", ".join(f"check_{n}" for n in range(1, len(checks) + 1))
    lines += [
        "",
        "",
        "problems = []",
        f"for check in ({names}):",
        "    try:",
        "        check()",
        "    except Exception as error:  # every problem, not the first",
        '        problems.append(f"{type(error).__name__}: {error}")',
        'assert not problems, "\\n".join(problems)',
    ]
    return "\n".join(lines) + "\n"


def _sentence(c: Check, observed: str) -> str:
    if c.source == "test":
        return f"This code fails: {_shown(observed)}" if observed else "This code fails."
    expected = c.expected.split(" ", 1)
    what = f"{expected[0]} `{_shown(expected[1])}`" if len(expected) == 2 else c.expected
    actual = c.actual.split(" ", 1)
    got = f"{actual[0]} `{_shown(actual[1])}`" if len(actual) == 2 else c.actual
    return f"`{_shown(c.call)}` {got}; it should {what}."


# -- the first line: a title from what the bug does ---------------------------------------
#: What a crash's exception class says of the bug (exception name -> verb phrase; ``{e}``
#: is the class). A subclass of ``LookupError``/``ArithmeticError`` not named here falls to
#: its base's phrase; any other class to :data:`_CRASH_OTHER`.
_CRASH = {
    "TypeError": "fails with a {e}",
    "AttributeError": "looks up an attribute that does not exist ({e})",
    "KeyError": "looks up a key that is not there ({e})",
    "IndexError": "indexes past the end of a sequence ({e})",
    "ValueError": "rejects a valid value ({e})",
    "ZeroDivisionError": "divides by zero ({e})",
    "RecursionError": "recurses without end ({e})",
    "UnboundLocalError": "reads a variable before setting it ({e})",
    "NameError": "uses a name that is not defined ({e})",
    "OverflowError": "overflows ({e})",
    "NotImplementedError": "says a supported case is not implemented ({e})",
    "StopIteration": "runs out of items too early ({e})",
    "AssertionError": "trips an internal assertion ({e})",
}
_CRASH_OTHER = "fails with {e} on valid input"
#: A crash by a class named in lower case (``re.error``).
_CRASH_LOWER = "fails with an exception ({e})"
#: A TypeError's message pattern -> what it says of the bug.
_TYPE_ERRORS = (
    (r"'NoneType' object is not callable", "calls a missing function ({e})"),
    (r"'NoneType' object", "crashes on a missing value ({e})"),
    (r"unsupported operand|can only concatenate|must be str, not", "mixes up types ({e})"),
    (
        r"expected string or bytes-like|must be a type|must be (an? )?\w+, not",
        "passes a wrong argument type ({e})",
    ),
    (
        r"positional argument|keyword argument|takes no arguments|required argument",
        "calls a function with the wrong arguments ({e})",
    ),
    (r"not callable", "calls something that is not callable ({e})"),
    (r"not iterable|not subscriptable|unhashable", "uses a value the wrong way ({e})"),
)
#: Verb phrases of the other kinds (``{t}``: the type or container of the result).
_PHRASES = {
    "wrong-exception": "raises the wrong exception ({e})",
    "wrong-message": "raises its error with the wrong message",
    "no-message": "raises its error without a message",
    "no-exception": "returns a result instead of raising an error",
    "no-exception-none": "returns nothing instead of raising an error",
    "none": "returns nothing instead of a result",
    "not-none": "returns a result where there should be none",
    "flipped": "gives the opposite yes/no answer",
    "off-by-one": "is off by one",
    "too-big": "returns too large a number",
    "too-small": "returns too small a number",
    "sign": "gets the sign of a number wrong",
    "too-many": "returns too many items",
    "too-few": "returns too few items",
    "case": "gets the letter case wrong",
    "whitespace": "gets the whitespace wrong",
    "missing-chars": "drops characters from the text",
    "extra-chars": "adds stray characters to the text",
    "reordered-chars": "puts characters in the wrong order",
    "wrong-chars": "gets some characters of the text wrong",
    "empty-text": "returns an empty string",
    "text": "returns the wrong text",
    "empty": "returns an empty {t}",
    "missing-items": "leaves items out of the {t}",
    "extra-items": "puts extra items in the {t}",
    "order": "returns the items in the wrong order",
    "wrong-items": "returns a {t} with the wrong items",
    "missing-keys": "leaves keys out of the dict",
    "extra-keys": "returns a dict with extra keys",
    "wrong-values": "returns a dict with wrong values",
    "wrong-keys": "returns a dict with the wrong keys",
    "wrong-type": "returns the wrong type of object (`{t}`)",
    "missing-fields": "leaves part of the `{t}` out",
    "fields": "returns {a} `{t}` with wrong fields",
    "value": "returns a wrong {t}",
    "unknown": "gives a wrong result",
}
#: The same kinds as noun phrases, for a report of several problems.
_NOUNS = {
    "crash": "{a} {e}",
    "wrong-exception": "the wrong exception",
    "wrong-message": "a wrong error message",
    "no-message": "an error without its message",
    "no-exception": "a missing error",
    "no-exception-none": "a missing error",
    "none": "a missing result",
    "not-none": "an unexpected result",
    "flipped": "a flipped yes/no answer",
    "off-by-one": "an off-by-one number",
    "too-big": "a number too large",
    "too-small": "a number too small",
    "sign": "a wrong sign",
    "too-many": "too many items",
    "too-few": "too few items",
    "case": "wrong letter case",
    "whitespace": "wrong whitespace",
    "missing-chars": "missing characters",
    "extra-chars": "stray characters",
    "reordered-chars": "scrambled characters",
    "wrong-chars": "wrong characters",
    "empty-text": "an empty string",
    "text": "wrong text",
    "empty": "an empty result",
    "missing-items": "missing items",
    "extra-items": "extra items",
    "order": "items out of order",
    "wrong-items": "wrong items",
    "missing-keys": "missing keys",
    "extra-keys": "extra keys",
    "wrong-values": "wrong values",
    "wrong-keys": "wrong keys",
    "wrong-type": "an object of the wrong type",
    "missing-fields": "an incomplete result",
    "fields": "a result with wrong fields",
    "value": "a wrong value",
    "unknown": "a wrong result",
}
#: Special methods -> how a user names their use (``{c}``: the class, ``{a}``: its article).
_DUNDERS = {
    "__repr__": "`repr()` of {a} `{c}`",
    "__str__": "`str()` of {a} `{c}`",
    "__format__": "Formatting {a} `{c}`",
    "__eq__": "`==` between `{c}` objects",
    "__ne__": "`!=` between `{c}` objects",
    "__lt__": "`<` between `{c}` objects",
    "__le__": "`<=` between `{c}` objects",
    "__gt__": "`>` between `{c}` objects",
    "__ge__": "`>=` between `{c}` objects",
    "__hash__": "Hashing {a} `{c}`",
    "__bool__": "`bool()` of {a} `{c}`",
    "__len__": "`len()` of {a} `{c}`",
    "__iter__": "Iterating over {a} `{c}`",
    "__next__": "Iterating over {a} `{c}`",
    "__contains__": "`in` on {a} `{c}`",
    "__getitem__": "Indexing {a} `{c}`",
    "__setitem__": "Setting an item of {a} `{c}`",
    "__delitem__": "Deleting an item of {a} `{c}`",
    "__getattr__": "Reading an attribute of {a} `{c}`",
    "__call__": "Calling {a} `{c}`",
    "__neg__": "Negating {a} `{c}`",
    "__abs__": "`abs()` of {a} `{c}`",
    "__add__": "Adding to {a} `{c}`",
    "__radd__": "Adding {a} `{c}` to something",
    "__sub__": "Subtracting from {a} `{c}`",
    "__rsub__": "Subtracting {a} `{c}` from something",
    "__mul__": "Multiplying {a} `{c}`",
    "__rmul__": "Multiplying by {a} `{c}`",
    "__truediv__": "Dividing {a} `{c}`",
    "__copy__": "Copying {a} `{c}`",
    "__deepcopy__": "Deep-copying {a} `{c}`",
    "__reduce__": "Pickling {a} `{c}`",
    "__reduce_ex__": "Pickling {a} `{c}`",
    "__getstate__": "Pickling {a} `{c}`",
    "__setstate__": "Unpickling {a} `{c}`",
    "__enter__": "Using {a} `{c}` in a `with` block",
    "__exit__": "Leaving a `with` block of {a} `{c}`",
    "__new__": "Creating {a} `{c}`",
}
_NUMBER_WORDS = ("", "One", "Two", "Three", "Four", "Five", "Six")
#: Modules whose functions a check calls around the package's (``list(islice(f(x)))``).
_AROUND = {"itertools", "functools", "operator", "collections", "copy", "pickle", "json", "re"}
#: A result whose value is unknown beyond its type -> its kind.
_SAME_TYPE = {"str": "text", "list": "wrong-items", "tuple": "wrong-items", "dict": "wrong-values"}
_EXC_NAME = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt|Iteration)")


@dataclasses.dataclass(frozen=True)
class Kind:
    """What a bug does, as a title says it.

    Attributes:
        name: A key of :data:`_PHRASES`, or ``crash``.
        exc: The exception class the bug raises (a crash, a wrong exception).
        what: The result's type or container word (``list``, ``Duration``).
        message: A crash's message (what a TypeError is about).
    """

    name: str
    exc: str = ""
    what: str = ""
    message: str = ""

    def phrase(self) -> str:
        """The verb phrase after the subject (``crashes on a missing value (TypeError)``)."""
        if self.name == "crash":
            return _crash_phrase(self.exc, self.message)
        what = self.what or "result"
        if self.name == "value" and self.what:
            what = f"`{self.what}`"
        return _PHRASES[self.name].format(e=self.exc, t=what, a=_article(what))

    def noun(self) -> str:
        """The kind as a noun phrase (``missing items``)."""
        exc = self.exc.rsplit(".", 1)[-1]
        return _NOUNS[self.name].format(e=exc, a=_article(exc))


def _crash_phrase(exc: str, message: str) -> str:
    short = exc.rsplit(".", 1)[-1]
    if short == "TypeError":
        for pattern, phrase in _TYPE_ERRORS:
            if re.search(pattern, message):
                return phrase.format(e=short)
    base = getattr(builtins, short, None)
    if short not in _CRASH and isinstance(base, type) and issubclass(base, BaseException):
        short = next((b.__name__ for b in base.__mro__ if b.__name__ in _CRASH), short)
    if not short[:1].isupper():
        return _CRASH_LOWER.format(e=exc)
    return _CRASH.get(short, _CRASH_OTHER).format(e=exc.rsplit(".", 1)[-1])


@dataclasses.dataclass(frozen=True)
class _Value:
    """A shown value, read back: ``kind`` is ``lit`` (a scalar literal: ``value`` holds
    it), ``items`` (a list, tuple or set display: ``value`` lists its items' source),
    ``map`` (a dict display: ``value`` maps key source to value source), ``obj`` (a repr
    ``Name(...)`` or ``<Name ...>``), ``cut`` (shortened with ``...``) or ``?``; ``type``
    names its type."""

    kind: str
    type: str
    value: object = None
    text: str = ""


_DISPLAYS = {ast.List: "list", ast.Tuple: "tuple", ast.Set: "set"}


def _read_value(text: str) -> _Value:
    text = text.strip()
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        node = None
    if type(node) in _DISPLAYS:
        return _Value("items", _DISPLAYS[type(node)], [ast.unparse(e) for e in node.elts], text)
    if isinstance(node, ast.Dict):
        pairs = {
            ast.unparse(k): ast.unparse(v) for k, v in zip(node.keys, node.values, strict=True) if k
        }
        return _Value("map", "dict", pairs, text)
    if node is not None and not isinstance(node, ast.Call):
        try:
            value = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        else:
            return _Value("lit", type(value).__name__, value, text)
    if m := re.match(r"<([A-Za-z_][\w.]*)", text) or re.match(r"([A-Za-z_][\w.]*)\(", text):
        name = m.group(1).rsplit(".", 1)[-1] if "(" in m.group(0) else m.group(1)
        return _Value("obj", name, text=text)
    kinds = {"'": "str", '"': "str", "[": "list", "(": "tuple", "{": "dict"}
    return _Value("cut" if text[:1] in kinds else "?", kinds.get(text[:1], ""), text=text)


def _subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(ch in it for ch in short)


def _text_kind(a: str, e: str) -> str:
    if not a:
        return "empty-text"
    if a.lower() == e.lower():
        return "case"
    if a.split() == e.split() or "".join(a.split()) == "".join(e.split()):
        return "whitespace"
    if len(a) < len(e) and _subsequence(a, e):
        return "missing-chars"
    if len(a) > len(e) and _subsequence(e, a):
        return "extra-chars"
    if sorted(a) == sorted(e):
        return "reordered-chars"
    if len(a) == len(e) and sum(x != y for x, y in zip(a, e, strict=True)) <= max(2, len(a) // 4):
        return "wrong-chars"
    return "text"


def _number_kind(a: float, e: float) -> str:
    if a == -e:
        return "sign"
    if isinstance(a, int) and isinstance(e, int) and abs(a - e) == 1:
        return "off-by-one"
    return "too-big" if a > e else "too-small"


def _items_kind(a: list[str], e: list[str], ordered: bool) -> str:
    """How a sequence or set of items (their source) differs from the one expected."""
    if not a:
        return "empty"
    if sorted(a) == sorted(e):
        return "order" if ordered else "wrong-items"
    missing = [x for x in e if x not in a]
    extra = [x for x in a if x not in e]
    if missing and not extra and len(a) < len(e):
        return "missing-items"
    if extra and not missing and len(a) > len(e):
        return "extra-items"
    return "wrong-items"


def _lit_kind(a: object, e: object) -> Kind:
    """The kind of two scalar literals that differ."""
    if isinstance(a, bool) or isinstance(e, bool):
        flipped = isinstance(a, bool) and isinstance(e, bool)
        return Kind("flipped" if flipped else "wrong-type", what=type(a).__name__)
    if isinstance(a, int | float) and isinstance(e, int | float):
        return Kind(_number_kind(a, e))
    if isinstance(a, str | bytes) and type(a) is type(e):
        return Kind(_text_kind(str(a), str(e)))
    return Kind("wrong-type", what=type(a).__name__)


def _dict_kind(a: dict[str, str], e: dict[str, str]) -> Kind:
    if not a:
        return Kind("empty", what="dict")
    if set(a) == set(e):
        differ = [k for k in a if a[k] != e[k]]
        if len(differ) == 1:  # one entry differs: what is wrong with it
            inner = _compare(_read_value(a[differ[0]]), _read_value(e[differ[0]]))
            if inner.name not in ("wrong-type", "value", "unknown"):
                return inner
        return Kind("wrong-values")
    if set(a) < set(e):
        return Kind("missing-keys")
    return Kind("extra-keys" if set(a) > set(e) else "wrong-keys")


def _call_parts(text: str) -> tuple[str, list[str], dict[str, str]] | None:
    """(callee, positional, keyword arguments as source) of a repr ``Name(...)``."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call):
        return None
    return (
        ast.unparse(node.func),
        [ast.unparse(a) for a in node.args],
        {k.arg or "**": ast.unparse(k.value) for k in node.keywords},
    )


def _objects_kind(a: _Value, e: _Value) -> Kind | None:
    """The kind of two reprs ``Name(...)`` of one class (None: not such reprs)."""
    pa, pe = _call_parts(a.text), _call_parts(e.text)
    if not (pa and pe and pa[0] == pe[0]):
        return None
    if len(pa[1]) + len(pa[2]) < len(pe[1]) + len(pe[2]) and set(pa[2]) <= set(pe[2]):
        return Kind("missing-fields", what=a.type)
    return Kind("fields", what=a.type)


def _compare(a: _Value, e: _Value) -> Kind:
    """The kind of a returned value ``a`` where ``e`` was expected."""
    if a.kind == "lit" and a.value is None and not (e.kind == "lit" and e.value is None):
        return Kind("none")
    if e.kind == "lit" and e.value is None:
        return Kind("not-none")
    if a.kind in ("items", "map") and not a.value and e.type in ("", a.type):
        return Kind("empty", what=a.type)
    numeric = {"int", "float"}
    if a.type and e.type and a.type != e.type and not {a.type, e.type} <= numeric:
        return Kind("wrong-type", what=a.type)
    if a.kind == e.kind == "lit":
        return _lit_kind(a.value, e.value)
    if a.kind == e.kind == "items":
        return Kind(_items_kind(a.value, e.value, a.type != "set"), what=a.type)
    if a.kind == e.kind == "map":
        return _dict_kind(a.value, e.value)
    if a.kind == e.kind == "obj" and (kind := _objects_kind(a, e)):
        return kind
    if a.type in _SAME_TYPE and a.type == e.type:
        return Kind(_SAME_TYPE[a.type], what=a.type)
    return Kind("value", what=a.type if a.kind == "obj" else "")


def _shortened(a: _Value, e: _Value) -> Kind:
    """The kind of values shortened with ``...`` (by pytest or the report): no more than
    their types are sure."""
    if a.kind == "lit" and a.value is None:
        return Kind("none")
    if e.kind == "lit" and e.value is None:
        return Kind("not-none")
    if a.type and e.type and a.type != e.type:
        return Kind("wrong-type", what=a.type)
    return Kind(_SAME_TYPE.get(a.type, "value"), what=a.type)


def kind_of(actual: str, expected: str) -> Kind:
    """What a bug does, from a check's ``actual`` (``returns X`` / ``raises E: msg``) and
    ``expected`` (``return X`` / ``raise E`` / ``raise E: msg``; empty: not known)."""
    verb, _, got = actual.partition(" ")
    want_verb, _, want = expected.partition(" ")
    if verb == "raises":
        exc, _, message = got.partition(": ")
        if want_verb != "raise":
            return Kind("crash", exc, message=message)
        if want.partition(": ")[0] != exc:
            return Kind("wrong-exception", exc.rsplit(".", 1)[-1])
        return Kind("wrong-message" if message else "no-message", exc.rsplit(".", 1)[-1])
    if verb != "returns":
        return Kind("unknown")
    if want_verb == "raise":
        return Kind("no-exception-none" if got.strip() == "None" else "no-exception")
    a = _read_value(got)
    if want_verb != "return":
        return Kind("none" if a.kind == "lit" and a.value is None else "unknown")
    e = _read_value(want)
    if "..." in got + want and "obj" not in (a.kind, e.kind):
        return _shortened(a, e)
    return _compare(a, e)


def _expression(text: str, start: int) -> tuple[str, int] | None:
    """The shortest Python expression (or ``<repr>``) in ``text`` from ``start`` that ends
    at a space or at the end, and where it ends."""
    ends = [m.start() for m in re.finditer(" ", text[start:])] + [len(text) - start]
    for end in ends:
        piece = text[start : start + end]
        if piece.strip() and _is_value(piece):
            return piece, start + end
    return None


def _is_value(text: str) -> bool:
    if re.fullmatch(r"<[\w.]+[^<>]*>", text):
        return True
    try:
        ast.parse(text, mode="eval")
    except SyntaxError:
        return False
    return True


def _repr_text(text: str) -> str:
    """What a ``repr(x)`` check compares: the repr a shown string literal holds."""
    value = _read_value(text)
    return value.value if value.kind == "lit" and isinstance(value.value, str) else text


def _pytest_kind(msg: str) -> Kind:
    """The kind of pytest's ``assert A == B ...`` (``where A = len(...)``: a count)."""
    for m in re.finditer(" == ", msg):
        left = msg[len("assert ") : m.start()]
        right = _expression(msg, m.end()) if _is_value(left) else None
        if right is None:
            continue
        if re.match(rf"\s*\+\s*where {re.escape(left)} = len\(", msg[right[1] :]):
            a, e = _read_value(left).value, _read_value(right[0]).value
            if isinstance(a, int) and isinstance(e, int) and a != e:
                return Kind("too-many" if a > e else "too-few")
        return kind_of(f"returns {left}", f"return {right[0]}")
    return Kind("unknown")


def observed_kind(message: str) -> tuple[str, Kind]:
    """(the expression it names, the kind of bug) of a failure message: a script's ``X
    gave A, expected B`` / ``X raised E: m, expected B``, unittest's ``A != B``, pytest's
    ``assert A == B`` or ``DID NOT RAISE E``, an uncaught ``E: m``."""
    msg = message.strip().removeprefix("AssertionError: ")
    if re.match(r"(?:Failed: )?DID NOT RAISE \S+", msg):
        return "", Kind("no-exception")
    if m := re.match(r"(.+?) (gave|returned|raised) (.*)", msg):
        expr, verb, rest = m.groups()
        got, sep, want = rest.rpartition(", expected ")
        got, want = (got, want) if sep else (rest, "")
        want_verb = "raise" if _EXC_NAME.fullmatch(want) else "return"
        if expr.startswith("repr(") and verb != "raised":
            got, want = _repr_text(got), _repr_text(want)
        actual = f"{'raises' if verb == 'raised' else 'returns'} {got}"
        return expr, kind_of(actual, f"{want_verb} {want}" if want else "")
    if msg.startswith("assert "):
        return "", _pytest_kind(msg)
    if m := re.fullmatch(r"(.+) != (.+)", msg):
        return "", kind_of(f"returns {m.group(1)}", f"return {m.group(2)}")
    m = re.match(rf"({_EXC_NAME.pattern})(?:: (.*))?$", msg)
    if m and not m.group(1).endswith("AssertionError"):
        return "", Kind("crash", m.group(1), message=m.group(2) or "")
    return "", Kind("unknown")


def _callee(expr: str) -> str:
    """The package function an expression calls (``max_ver`` of
    ``list(max_ver("1", "2"))``): the first call of a name that is neither a builtin nor
    of a module a check wraps the package's calls in; "" when there is none."""
    for m in re.finditer(r"([A-Za-z_][\w.]*)\(", expr):
        name = m.group(1)
        if hasattr(builtins, name) or name.split(".")[0] in _AROUND:
            continue
        return name.rsplit(".", 1)[-1]
    return ""


def _article(word: str) -> str:
    """``a`` or ``an`` before ``word`` (by its spelling: ``an Optional``, ``a Use``)."""
    word = word.strip("`").lower()
    if word.startswith(("uni", "use", "usa", "usu", "uti", "eu", "one")):
        return "a"
    return "an" if word[:1] in "aeiou" else "a"


def subject(function: str, call: str, package: str) -> str:
    """How a title names what misbehaves: the function in backticks (a method as
    ``Class.method``), a special method by its use (``repr()`` of a ``Node``), a class
    called by ``Creating a ...``; the function the call makes where ``function`` is empty
    or local (``deprecated.<locals>.wrapper``), else the package."""
    if not function or "<" in function:
        function = _callee(call)
        if not function:
            return f"`{package}`"
    *owner, last = function.split(".")
    if last in _DUNDERS and owner:
        return _DUNDERS[last].format(a=_article(owner[-1]), c=owner[-1])
    if last[:1].isupper() and re.match(rf"(?:[\w.]+\.)?{re.escape(last)}\(", call):
        return f"Creating {_article(last)} `{last}`"
    return f"`{function}`"


def _check_kind(c: Check, observed: str) -> tuple[str, Kind]:
    """(the call or expression, the kind) of one check, from what its report shows."""
    if c.source == "test":
        expr, kind = observed_kind(_shown(observed))
        return expr, kind

    def shown(text: str) -> str:
        verb, _, rest = text.partition(" ")
        return f"{verb} {_shown(rest)}" if rest else text

    return _shown(c.call), kind_of(shown(c.actual), shown(c.expected))


def _number(n: int) -> str:
    return _NUMBER_WORDS[n] if n < len(_NUMBER_WORDS) else str(n)


def _joined(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def title(checks: Sequence[Check], package: str, observed: Sequence[str] = ()) -> str:
    """A statement's first line, written from what the bug does as a user would title an
    issue: the function in backticks and what goes wrong (``find_by_attr`` crashes on a
    missing value (TypeError), ``Parser.parse`` returns the items in the wrong order);
    several checks: how many problems, where, and of which kinds. Nothing the checks
    expect is in it (the body says what was returned and expected), and the wording comes
    from the bug alone: the same checks always get the same title."""
    observed = [*observed, *[""] * len(checks)]
    kinds = [_check_kind(c, o) for c, o in zip(checks, observed, strict=False)]
    if len(checks) == 1:
        [(expr, kind)] = kinds
        head = subject(checks[0].function, expr, package)
        return head[:1].upper() + head[1:] + " " + kind.phrase()
    functions = sorted({c.function for c in checks if c.function})
    where = f" ({', '.join(f'`{f}`' for f in functions)})" if functions else ""
    nouns = list(dict.fromkeys(k.noun() for _, k in kinds))
    return f"{_number(len(checks))} bugs in `{package}`{where}: {_joined(nouns)}"


def failures_title(package: str, messages: Sequence[str]) -> str:
    """The first line of a report made of failure messages (no function named: a history
    task names none): the package and what the first informative message says the bug
    does."""
    kinds = [observed_kind(m)[1] for m in messages]
    kind = next((k for k in kinds if k.name != "unknown"), Kind("unknown"))
    return f"`{package}` {kind.phrase()}"


def statement(
    package: str,
    checks: Sequence[Check],
    reproduction: str,
    observed: Sequence[str] = (),
    note: str = "",
) -> str:
    """The bug report: a title from what the bug does (:func:`title`), what misbehaves
    (one paragraph per check), the reproduction under
    :data:`HEADING` in a fenced block, how to use it. ``observed``: the script's failure
    message per check with the bug (shown for a check made from a test's body)."""
    head = title(checks, package, observed)
    paras = [
        f"- {_sentence(c, o)}" if len(checks) > 1 else _sentence(c, o)
        for c, o in zip(checks, [*observed, *[""] * len(checks)], strict=False)
    ]
    body = "\n".join(paras) if len(checks) > 1 else paras[0]
    return (
        f"{head}\n\n{body}\n\n{HEADING}\n\n```python\n{reproduction.rstrip()}\n```\n\n"
        "`python reproduction.py`, run from the repository root, fails while the bug is "
        "there and exits 0 once it is fixed. Fix the library code, not the tests: the "
        f"package's own test suite must keep passing.\n{note}"
    )


def fails_itself(output: str) -> bool:
    """True when a reproduction's output ends in an AssertionError raised by the script
    itself (the last frame of the traceback is ``reproduction.py``, or ``unittest``'s
    called from it), not by an ``assert`` of the library that the bug trips."""
    lines = output.splitlines()
    at = [i for i, ln in enumerate(lines) if ln.lstrip().startswith('File "')]
    frames = [lines[i] for i in at]
    while frames and re.search(r'/unittest/[a-z_]+\.py"', frames[-1]):
        frames.pop()  # ``self.assertEqual`` of the script: unittest raises for it
    # the exception: the first unindented line after the last frame (its message may run
    # over several lines: ``assertEqual`` of two lists prints their diff)
    raised = (
        next((ln for ln in lines[at[-1] + 1 :] if ln.strip() and not ln[0].isspace()), "")
        if at
        else ""
    )
    return bool(frames) and "reproduction.py" in frames[-1] and raised.startswith("AssertionError")


def reproduction_of(text: str) -> str | None:
    """The reproduction script a statement holds (its fenced block under
    :data:`HEADING`), or None."""
    m = _FENCE.search(text)
    return m.group(1) if m else None


# -- leaks ------------------------------------------------------------------------------
def _patch_lines(gold: str, sign: str) -> list[str]:
    return [
        ln[1:] for ln in gold.splitlines() if ln.startswith(sign) and not ln.startswith(sign * 3)
    ]


def _tokens(text: str) -> set[str]:
    out: set[str] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NAME, tokenize.STRING, tokenize.NUMBER):
                out.add(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        out |= set(re.findall(r"\w+", text))
    return out


def distinctive_tokens(gold: str, buggy_sources: Iterable[str]) -> set[str]:
    """Tokens of the lines the gold patch adds that the buggy files do not hold anywhere
    (names of 4 or more characters that are not builtins, strings of 4 or more with their
    quotes, numbers of 3 or more digits): what only someone who knows the fix would
    write."""
    have: set[str] = set()
    for text in buggy_sources:
        have |= _tokens(text)
    out = set()
    for tok in _tokens("\n".join(line.strip() for line in _patch_lines(gold, "+"))) - have:
        if tok[:1].isalpha() or tok[:1] == "_":
            if len(tok) >= 4 and not hasattr(builtins, tok) and not keyword.iskeyword(tok):
                out.add(tok)
        elif tok[:1].isdigit():
            if len(tok) >= 3:
                out.add(tok)
        elif len(tok) >= 4:
            out.add(tok)
    return out


def leaks(
    text: str, gold: str, buggy_sources: Iterable[str], test_ids: Iterable[str] = ()
) -> list[str]:
    """What of the fix or the hidden tests ``text`` gives away (empty: nothing): a line
    the gold patch adds or removes (10 characters or more, stripped), a distinctive token
    (:func:`distinctive_tokens`), a hidden test's id, file or function name."""
    out = []
    for sign, what in (("+", "a line the fix adds"), ("-", "a line the fix removes")):
        for line in sorted({ln.strip() for ln in _patch_lines(gold, sign)}):
            if len(line) >= 10 and line in text:
                out.append(f"{what}: {line!r}")
    for tok in sorted(distinctive_tokens(gold, buggy_sources)):
        pattern = (
            re.escape(tok)
            if tok[:1] in "'\"" or tok[:1].isalpha() is False and not tok[:1].isdigit()
            else rf"(?<![\w.]){re.escape(tok)}(?![\w])"
        )
        if re.search(pattern, text):
            out.append(f"a token only the fix has: {tok!r}")
    for t in test_ids:
        file, *names = t.split("::")
        for n in {t, file, *(p.split("[")[0] for p in names)}:
            if len(n) > 4 and re.search(rf"(?<![\w/]){re.escape(n)}(?![\w])", text):
                out.append(f"a hidden test's name: {n!r}")
    return out
