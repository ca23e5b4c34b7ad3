"""Masking the hidden tests for one grading: random names, sealed checks, canaries.

For every test file that holds a listed test, the grader installs a copy in which

- every test function, test method and test class gets a **fresh random name** drawn from
  the file's own test-name vocabulary (references inside the file are renamed too; node
  ids are mapped back afterwards), so code that knows the listed node ids (they are public
  in task.toml) cannot pick the tests out by name;
- the assertions that compare with a literal are **sealed** (:mod:`repogym.grading.seal`):
  their expected values stay with the grader, so credit needs the right values, which
  nothing inside the sandbox holds;
- **canaries** are added after the tests of each scope (module level and inside the test
  classes): must-pass and must-fail tests that need nothing but builtins. A completed
  session therefore always ends with pytest's exit code 1, and a forgery that reports
  every test passed without reading the bodies is caught; a forgery that reads them can
  tell canaries apart (they have a fixed form), which is why credit rests on the seals.

A task can turn renaming off (``[verifier] rename_tests = false``) when its tests depend on
their own names.
"""

from __future__ import annotations

import ast
import dataclasses
import random
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from repogym.grading import seal as sl

_WORD = re.compile(r"[a-z][a-z0-9]+")
#: ``def NAME`` or ``class NAME`` (the name: what follows up to a parenthesis, colon or space).
_DEFINED = re.compile(rb"(def|class)\s+([^\s(:]+)")
#: What a canary computes: its expression, the value, and the builtins it calls (a canary
#: never uses a builtin the file binds to something else: tinydb's tests import ``set`` from
#: ``tinydb.operations``, and ``sorted(set(...))`` raised there, so a must-pass canary failed
#: and the grading trusted no report).
_OPS = (
    ("sorted({v})", sorted, ("sorted",)),
    ("len({v})", len, ("len",)),
    ("sum({v})", sum, ("sum",)),
    ("max({v})", max, ("max",)),
    ("min({v})", min, ("min",)),
    ("{v}[::-1]", lambda v: v[::-1], ()),
    ("[x * 2 for x in {v}]", lambda v: [x * 2 for x in v], ()),
    ("{v}.count({v}[0])", lambda v: v.count(v[0]), ()),
    ("sorted(set({v}))", lambda v: sorted(set(v)), ("sorted", "set")),
)
_VARS = ("values", "items", "data", "expected", "result", "numbers", "inputs", "cases")
_FILLERS = ("case", "value", "works", "again", "edge", "input", "basic", "other")


@dataclasses.dataclass(frozen=True)
class Canary:
    """A planted test whose outcome the grader knows in advance (node id as installed)."""

    node_id: str
    must_pass: bool

    @property
    def file(self) -> str:
        return self.node_id.split("::", 1)[0]


@dataclasses.dataclass
class Masked:
    """What planting did: the canaries, installed node id -> the task's node id, the seals."""

    canaries: list[Canary] = dataclasses.field(default_factory=list)
    renamed: dict[str, str] = dataclasses.field(default_factory=dict)
    seals: list[sl.Seal] = dataclasses.field(default_factory=list)
    #: Installed node id of each test function of a sealed file -> its number of seals.
    checks_by_test: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Installed test case id -> the task's parameter id, where a parametrize table's
    #: expectation columns left the file (:attr:`repogym.grading.seal.Sealed.case_ids`).
    case_ids: dict[str, str] = dataclasses.field(default_factory=dict)
    #: The task's node ids of the test functions sealed only in a run of their own
    #: (:attr:`repogym.grading.seal.Sealed.focusable`; :func:`plant` with ``focus``).
    focusable: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def original(self, node_id: str) -> str:
        """The task's node id for an installed one (canaries and unknown ids unchanged)."""
        head, sep, params = node_id.partition("[")
        if node_id in self.case_ids:
            params = self.case_ids[node_id] + "]"
        base = self.renamed.get(head)
        return (base + sep + params) if base is not None else head + sep + params

    def installed(self, node_id: str) -> str:
        """The installed node id for one of the task's."""
        head, sep, params = node_id.partition("[")
        back, cases = self._index()
        head = back.get(head, head)
        if sep:
            if (found := cases.get((head, params.removesuffix("]")))) is not None:
                return found
        return head + sep + params

    def _index(self) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
        """The task's node id -> the installed one, and (installed function, task's
        parameter id) -> installed case id: made once for the names as they are (one
        lookup per listed test was a pass over every name, 0.2 s for jinja2's)."""
        key = (len(self.renamed), len(self.case_ids))
        if getattr(self, "_indexed", None) != key:
            self._back = {v: k for k, v in self.renamed.items()}
            self._cases = {(c.partition("[")[0], p): c for c, p in self.case_ids.items()}
            self._indexed = key
        return self._back, self._cases


class _Names:
    """Random test names in the style of a file's own (``test_`` + its words)."""

    def __init__(self, rng: random.Random, words: list[str], taken: set[str]) -> None:
        self.rng, self.words, self.taken = rng, words or list(_FILLERS), taken

    def make(self, prefix: str = "test_", style: str = "snake") -> str:
        for attempt in range(10_000):
            if attempt >= 50:  # a small vocabulary is used up: add a filler and a number
                self.words = [*self.words, f"{self.rng.choice(_FILLERS)}{attempt}"]
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
        raise RuntimeError("no free test name")  # unreachable: every attempt adds a word


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
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")


def _test_classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.startswith("Test")]


def _rename(text: str, tree: ast.Module, rel: str, names: _Names) -> tuple[str, dict[str, str]]:
    """Give every test function, method and class a new name; returns (text, new -> old ids).

    The new names sort as the old ones do: ``unittest`` runs a class's tests in the order of
    their names, and tests that share state (markdown's fenced-code tests, one leaving an
    extension's setting for the next) pass only in their own order; drawn in any order,
    they failed one grading in several."""
    classes = _test_classes(tree)
    old = sorted(
        {n.name for n in tree.body if _is_test(n)}
        | {n.name for cls in classes for n in cls.body if _is_test(n)}
    )
    mapping: dict[str, str] = dict(zip(old, sorted(names.make() for _ in old), strict=True))
    ids: dict[str, str] = {}
    for node in tree.body:
        if _is_test(node):
            ids[f"{rel}::{mapping[node.name]}"] = f"{rel}::{node.name}"
    for cls in classes:
        new_cls = names.make("Test", "camel")
        mapping[cls.name] = new_cls
        for node in cls.body:
            if _is_test(node):
                ids[f"{rel}::{new_cls}::{mapping[node.name]}"] = f"{rel}::{cls.name}::{node.name}"
    edits: list[tuple[int, int, int, str]] = []  # (line, byte start, byte end, new text)
    lines = text.splitlines(keepends=True)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in mapping:
            edits.append((node.lineno, node.col_offset, node.end_col_offset, mapping[node.id]))
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in mapping
            and node.end_lineno == node.lineno
        ):
            end = node.end_col_offset
            edits.append((node.lineno, end - len(node.attr.encode()), end, mapping[node.attr]))
        elif (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name in mapping
        ):
            raw = lines[node.lineno - 1].encode()
            m = _DEFINED.search(raw, node.col_offset)
            if m and m.group(2) == node.name.encode():
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


def module_bound(tree: ast.Module) -> set[str] | None:
    """Names the file binds at module level (imports, definitions, assignments, also inside
    a module-level ``if`` or ``try``), which its functions see instead of a builtin of that
    name; None when it star-imports (any)."""
    bound: set[str] = set()
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)  # what it binds inside is its own
        elif isinstance(node, ast.Lambda):
            continue
        else:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            todo.extend(ast.iter_child_nodes(node))
    return bound


def _asserts(
    rng: random.Random, must_pass: bool, imported: list[str], bound: set[str] | None = None
) -> list[str]:
    var = rng.choice(_VARS)
    data = [rng.randint(0, 12) for _ in range(rng.randint(3, 6))]
    ops = [op for op in _OPS if bound is not None and not set(op[2]) & bound] or [
        op for op in _OPS if not op[2]
    ]
    expr, fn, _ = rng.choice(ops)
    value = fn(list(data))
    expected = value if must_pass else _wrong(value, rng)
    lines = [f"assert {rng.choice(imported)} is not None"] if imported else []
    return [*lines, f"{var} = {data!r}", f"assert {expr.format(v=var)} == {expected!r}"]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def mask_test_file(
    text: str,
    rel: str,
    rng: random.Random,
    *,
    rename: bool = True,
    seal: bool = False,
    helpers: dict[str, set[str]] | None = None,
    focus: Iterable[str] = (),
    listed: Iterable[str] = (),
    canaries: bool = True,
    also: Iterable[tuple[str, str]] = (),
    external: sl.Imported | None = None,
    exports: Iterable[str] = (),
    links: sl.Links | None = None,
) -> tuple[str, Masked]:
    """``text`` masked: tests renamed (unless ``rename`` is False), assertions sealed (with
    ``seal``; :mod:`repogym.grading.seal`) and canaries added.

    Canaries are must-pass and must-fail tests that need nothing but builtins, after the
    last test of their scope (module, test class), in a random order. Node ids use ``rel``,
    the file's workspace path. A file that does not parse is left as it is (it fails
    collection, which the grader sees). Line numbers of the file's own code are kept.
    ``helpers`` maps a test module's name to its equality helpers (calls to one imported
    from there are sealed like the assertion it makes). ``focus`` (the task's node ids of
    test functions of :attr:`Masked.focusable` whose tables share no constant) plants the
    file for a run of those tests alone.
    ``listed`` are the task's node ids of the file's tests (how parametrize tables whose
    cells the grader cannot compute are read). ``also`` names mixin tests (``(class,
    method)``) the file defines for test classes elsewhere, sealed too; ``canaries`` False
    plants none (a file of mixins: a canary there would run in every class that inherits
    it, under ids the grader never planted). ``external`` are the expectation helpers the
    file imports from other installed files (:func:`repogym.grading.seal.imported_helpers`),
    ``exports`` the names of this file's helpers that other files' sealed calls use,
    ``links`` what the other installed files mean for this one
    (:func:`repogym.grading.seal.file_links`).
    """
    masked = Masked()
    try:
        tree = sl.parse(text)
    except SyntaxError:
        return text, masked
    words, imported, taken = _facts(tree)
    bound = module_bound(tree)
    names = _Names(rng, words, taken)
    if rename:
        text, masked.renamed = _rename(text, tree, rel, names)
        tree = sl.parse(text)
    footer = ""
    if seal:
        back = {old: new for new, old in masked.renamed.items()}
        cases: dict[str, list[str]] = {}
        for node_id in listed:
            head, sep, params = node_id.partition("[")
            if sep:
                cases.setdefault(back.get(head, head), []).append(params.removesuffix("]"))
        text, sealed = sl.seal_file(
            text,
            tree,
            rel,
            rng,
            taken,
            helpers=_imported_helpers(tree, helpers or {}),
            gold=True,
            focus=[back.get(f, f) for f in focus],
            listed=cases,
            also=also,
            imported=external,
            exports=tuple(exports),
            links=links,
        )
        masked.seals, masked.checks_by_test, footer = (
            sealed.seals,
            sealed.checks_by_test,
            sealed.footer,
        )
        masked.case_ids = sealed.case_ids
        masked.focusable = {masked.renamed.get(i, i): c for i, c in sealed.focusable.items()}
    lines = text.splitlines()
    inserts: list[tuple[int, list[str]]] = []  # (line index to insert before, lines)

    def scope(prefix: str, indent: str, end: int, self_arg: str) -> None:
        gap = [""] if self_arg else ["", ""]  # blank lines between definitions, as in PEP 8
        block: list[str] = []
        kinds = [True] * rng.randint(1, 2) + [False] * rng.randint(1, 2)
        rng.shuffle(kinds)
        for must_pass in kinds:
            name = names.make()
            block += [
                *gap,
                f"{indent}def {name}({self_arg}):",
                *[indent + "    " + a for a in _asserts(rng, must_pass, imported, bound)],
            ]
            masked.canaries.append(Canary(f"{prefix}{name}", must_pass))
        inserts.append((end, block))

    if not canaries:
        return "\n".join(lines) + "\n" + footer, masked
    for cls in _test_classes(tree):
        indent = _indent(lines[cls.body[0].lineno - 1]) or "    "
        scope(f"{rel}::{cls.name}::", indent, cls.end_lineno, "self")
    scope(f"{rel}::", "", len(lines), "")
    # A test class that ends the file ends where the module's block goes: its block must
    # come first there (the module's after it would swallow the class's indented canaries).
    merged: dict[int, list[str]] = {}
    for at, block in inserts:  # classes first, the module last
        merged.setdefault(at, []).extend(block)
    for at, block in sorted(merged.items(), reverse=True):
        lines[at:at] = block
    return "\n".join(lines) + "\n" + footer, masked


def _imported_helpers(tree: ast.Module, helpers: dict[str, set[str]]) -> set[str]:
    """Local names of the equality helpers a file imports from other test modules."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            found = helpers.get(node.module.rsplit(".", 1)[-1], set())
            names |= {a.asname or a.name for a in node.names if a.name in found}
            names |= {  # membership helpers keep their mark under the local name
                sl.MEMBERSHIP + (a.asname or a.name)
                for a in node.names
                if sl.MEMBERSHIP + a.name in found
            }
    return names


def helpers_by_module(files: dict[str, Path]) -> dict[str, set[str]]:
    """Module name -> the equality helpers (:func:`repogym.grading.seal.equality_helpers`)
    and membership helpers (``in:NAME``: :func:`repogym.grading.seal.membership_helpers`) of
    each Python file among the files grading installs."""
    found: dict[str, set[str]] = {}
    for rel, src in files.items():
        if src.suffix == ".py":
            try:
                tree = sl.parse(src.read_text(encoding="utf-8", errors="surrogateescape"))
            except (SyntaxError, ValueError):
                continue
            names = sl.own_helpers(tree)
            if names:
                found.setdefault(Path(rel).stem, set()).update(names)
    return found


def plant(
    files: dict[str, Path],
    dest: Path,
    node_ids: Iterable[str],
    rng: random.Random,
    *,
    rename: bool = True,
    focus: Iterable[str] = (),
) -> Masked:
    """Write each ``workspace path -> source file`` under ``dest``; the files holding a listed
    test (``node_ids``) are masked with :func:`mask_test_file` (renamed, sealed, canaries
    added), the others copied as they are. Sources must be regular files (the caller
    leaves symbolic links out).

    ``focus`` (test functions of :attr:`Masked.focusable` whose tables share no constant)
    plants for a run of those tests alone: their files are planted for them, and only those files'
    canaries are kept (the run collects no other file).
    """
    node_ids = list(node_ids)
    holding = {n.split("::", 1)[0] for n in node_ids}
    focus_in: dict[str, list[str]] = {}
    for f in focus:
        focus_in.setdefault(f.split("::", 1)[0], []).append(f)
    helpers = helpers_by_module(files)
    sources = _sources(files)
    inherited = _inherited(sources, node_ids)
    imports = {rel: sl.imported_helpers(sources, rel) for rel in holding}
    exports: dict[str, set[str]] = {}
    for found in imports.values():
        for drel, names in found.definers.items():
            exports.setdefault(drel, set()).update(names)
    mixins: dict[str, set[tuple[str, str]]] = {}
    for definer in inherited.values():
        drel, cls, method = definer.split("::")
        mixins.setdefault(drel, set()).add((cls, method))
    links = sl.file_links(sources, holding | set(mixins), mixins)
    out = Masked()
    mixin_seals: list[sl.Seal] = []
    for rel, src in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if (rel not in holding and rel not in mixins) or src.suffix != ".py":
            if rel in exports and src.suffix == ".py":
                text = src.read_text(encoding="utf-8", errors="surrogateescape")
                target.write_text(
                    _export(text, exports[rel], rng), encoding="utf-8", errors="surrogateescape"
                )
            else:
                shutil.copyfile(src, target, follow_symlinks=False)
            continue
        text, masked = mask_test_file(
            src.read_text(encoding="utf-8", errors="surrogateescape"),
            rel,
            rng,
            rename=rename and rel in holding,
            seal=True,
            helpers=helpers,
            focus=focus_in.get(rel, ()),
            listed=[n for n in node_ids if n.split("::", 1)[0] == rel],
            canaries=rel in holding,
            also=mixins.get(rel, ()),
            external=imports.get(rel),
            exports=exports.get(rel, ()),
            links=links.get(rel),
        )
        target.write_text(text, encoding="utf-8", errors="surrogateescape")
        mixin_seals += [s for s in masked.seals if s.test in set(inherited.values())]
        out.focusable.update(masked.focusable)
        if focus_in and rel not in focus_in:
            continue  # not collected in this run
        out.canaries += masked.canaries
        out.renamed.update(masked.renamed)
        out.seals += masked.seals
        out.checks_by_test.update(masked.checks_by_test)
        out.case_ids.update(masked.case_ids)
    for test, definer in inherited.items():  # a mixin's checks run in each class using it
        if (focus_in and test.split("::", 1)[0] not in focus_in) or test in out.checks_by_test:
            continue
        own = [
            dataclasses.replace(s, test=test, file=s.path) for s in mixin_seals if s.test == definer
        ]
        out.seals += own
        out.checks_by_test[test] = len(own)
    return out


def _sources(files: dict[str, Path]) -> dict[str, str]:
    """Workspace path -> text of the Python files grading installs."""
    sources = {}
    for rel, src in files.items():
        if src.suffix == ".py":
            try:
                sources[rel] = src.read_text(encoding="utf-8", errors="surrogateescape")
            except OSError:
                continue
    return sources


def _export(text: str, names: Iterable[str], rng: random.Random) -> str:
    """A file that only defines expectation helpers other files' sealed calls use
    (:func:`repogym.grading.seal.export_helpers`), made to report for their handles."""
    try:
        tree = sl.parse(text)
    except SyntaxError:
        return text
    out, footer = sl.export_helpers(text, tree, set(names), rng, _facts(tree)[2])
    return out if not footer else out + ("" if out.endswith("\n") else "\n") + footer


def _inherited(sources: dict[str, str], node_ids: list[str]) -> dict[str, str]:
    """:func:`repogym.grading.seal.inherited_tests` over the Python files grading installs
    (a listed method a class inherits from a mixin -> the mixin's method), for the classes
    grading does not rename (a renamed class's inherited tests keep pytest's verdict)."""
    return {
        test: definer
        for test, definer in sl.inherited_tests(sources, node_ids).items()
        if not test.split("::")[1].startswith("Test")
    }
