"""Tasks from a package's release history: real fixes between consecutive sdists, reverted.

For two consecutive releases N and N+1 of a package, a function that N+1 changed, and
whose change some of N+1's own tests need, is a real bug fix (or a real feature): N+1's
code with that one function put back as it was in N is the task's repository, the tests
that then fail are its fail_to_pass, and N+1's function is the gold fix. This module holds
the parts that run nothing:

- :func:`release_versions` lists a project's final releases (``pip index versions``) and
  :func:`consecutive_pairs` pairs them;
- :func:`changed_functions` finds the functions (module functions and methods, outermost
  definitions) whose code differs between two trees, docstrings and layout ignored;
- :func:`revert` puts one function back as it was;
- :func:`changelog_entries` finds the release's section in the sdist's changelog
  (``CHANGES``/``CHANGELOG``/``HISTORY``/``NEWS``) and its entries with their
  sub-headings, :func:`quotable` leaves out those of housekeeping (tests, docs, CI) and
  :func:`pick_entry` picks the entry that describes the change, by the words it shares
  with the changed function and its failing tests; :func:`statement_leaks` refuses a
  statement that holds the fix or a test id;
- :func:`write_task` writes the task folder (``[history]`` in task.toml records the
  releases, the file and the function, so the task can be rebuilt from the two sdists).

Running the tests (which ones fail with the revert) is done in the sandbox by
:mod:`repogym.quality.synth_history`.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path

from packaging.version import InvalidVersion, Version

from repogym.scenarios import bug_reports, pypi
from repogym.scenarios.dependencies import DependencySpec
from repogym.scenarios.mutation import file_diff
from repogym.scenarios.patches import is_test_file
from repogym.scenarios.swebench import hidden_tests_dest

#: Most fail_to_pass tests a history task may have (more is a crash, not a bug report).
MAX_F2P = 19
#: Changelog file names (lower case, without suffix), at the root or in docs/.
CHANGELOG_NAMES = (
    "changes",
    "changelog",
    "history",
    "news",
    "release-notes",
    "releases",
    "release_notes",
    "whatsnew",
)
_VERSION_TOKEN = r"(?<![\w.])v?{}(?![\w]|\.\d)"
_ANY_VERSION = re.compile(r"(?<![\w.])v?\d+\.\d+(?:\.\d+)*(?:\.?(?:post|dev|rc|a|b)\d*)?(?![\w])")
_UNDERLINE = re.compile(r"^\s*([=\-~^*+#`'\"])\1{2,}\s*$")
_BULLET = re.compile(r"^(\s*)(?:[-*+•]|\d+[.)])\s+")
_STOP = {
    "fix",
    "fixed",
    "fixes",
    "fixing",
    "the",
    "a",
    "an",
    "of",
    "to",
    "in",
    "on",
    "for",
    "and",
    "or",
    "when",
    "with",
    "without",
    "is",
    "be",
    "by",
    "from",
    "that",
    "this",
    "it",
    "its",
    "as",
    "at",
    "not",
    "no",
    "now",
    "issue",
    "bug",
    "error",
    "test",
    "tests",
    "should",
    "will",
    "was",
    "were",
    "are",
    "has",
    "have",
    "which",
    "if",
    "into",
    "add",
    "added",
    "support",
    "use",
    "using",
    "used",
    "make",
    "made",
    "also",
    "can",
    "get",
    "set",
    "pr",
    "gh",
    "https",
    "http",
    "github",
    "com",
    "issues",
    "pull",
    "self",
    "cls",
    "def",
    "return",
    "none",
    "true",
    "false",
}


class HistoryError(ValueError):
    """A project's release history cannot be used; the message says why and the fix."""


# -- releases ------------------------------------------------------------------------------
def release_versions(name: str) -> list[str]:
    """The project's final releases on the package index, oldest first (``pip index``).

    Raises:
        HistoryError: pip cannot list them (the message has pip's error and the fix).
    """
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "index",
            "versions",
            name,
            "--disable-pip-version-check",
            "--no-input",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONNOUSERSITE": "1"},
    )
    m = re.search(r"Available versions:\s*(.+)", res.stdout)
    if res.returncode != 0 or not m:
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        raise HistoryError(
            f"{name}: pip cannot list its releases ({tail[0][:300]}). Fix: "
            "check the name and the network, or give the versions with "
            "--versions A,B,C"
        )
    return sort_versions(v.strip() for v in m.group(1).split(","))


def sort_versions(versions: Iterable[str]) -> list[str]:
    """Final releases (no pre-, dev- or post-releases), oldest first, invalid ones dropped."""
    out = []
    for v in versions:
        try:
            parsed = Version(v)
        except InvalidVersion:
            continue
        if not (parsed.is_prerelease or parsed.is_devrelease or parsed.is_postrelease):
            out.append((parsed, v))
    return [v for _, v in sorted(set(out))]


def consecutive_pairs(versions: list[str], last: int | None = None) -> list[tuple[str, str]]:
    """(N, N+1) for each release and the next; with ``last``, the newest ``last`` pairs."""
    pairs = list(itertools.pairwise(versions))
    return pairs[-last:] if last else pairs


# -- release dates (a time split) -------------------------------------------------------------


def index_release_dates(document: dict) -> dict[str, str]:
    """Each release's date (``YYYY-MM-DD``, UTC) in a PEP 691 project page: the earliest
    ``upload-time`` of its sdists and wheels (files the names of which give no version, or
    without a time, are skipped)."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    dates: dict[str, str] = {}
    for f in document.get("files", []):
        name, when = f.get("filename", ""), f.get("upload-time")
        if not isinstance(when, str) or len(when) < 10:
            continue
        try:
            if name.endswith(".whl"):
                version = parse_wheel_filename(name)[1]
            else:
                version = parse_sdist_filename(name)[1]
        except (InvalidSdistFilename, InvalidWheelFilename, InvalidVersion):
            continue
        key = str(version)
        dates[key] = min(dates.get(key, when[:10]), when[:10])
    return dates


def _dates_file(name: str) -> Path:
    from packaging.utils import canonicalize_name

    from repogym.sandbox.runtime import cache_dir

    return cache_dir() / "release-dates" / f"{canonicalize_name(name)}.json"


def release_date(name: str, version: str, fetch: Callable[[str], dict] | None = None) -> str:
    """The day (``YYYY-MM-DD``, UTC) ``name``'s release ``version`` reached the package
    index: the first upload of its files. Kept in repogym's cache; a release the cache does
    not know is looked up again.

    Raises:
        HistoryError: the index cannot be read, or lists no file of that release.
    """
    path = _dates_file(name)
    try:
        dates = json.loads(path.read_text())
    except (OSError, ValueError):
        dates = {}
    try:
        key = str(Version(version))
    except InvalidVersion:
        key = version
    if key not in dates:
        dates = index_release_dates((fetch or _project_page)(name))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dates, indent=1, sort_keys=True))
    if key not in dates:
        raise HistoryError(
            f"{name} {version}: the package index lists no dated file of this release. "
            "Fix: check the name and version (`pip index versions NAME`)"
        )
    return dates[key]


def _project_page(name: str) -> dict:
    """The project's page of the simple index, as PEP 691 JSON."""
    try:
        return pypi.project_page(name)
    except pypi.PypiError as e:
        raise HistoryError(str(e)) from e


def parse_day(text: str) -> str:
    """``YYYY-MM-DD`` checked (``--since``'s value).

    Raises:
        ValueError: not a date, with the fix.
    """
    import datetime

    try:
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        raise ValueError(
            f"--since {text!r} is not a date. Fix: YYYY-MM-DD, e.g. 2025-06-01"
        ) from None


# -- functions that changed -----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Definition:
    """An outermost function definition in a module (a module function or a method).

    Attributes:
        qualname: ``function`` or ``Class.method`` (classes nest: ``Outer.Inner.method``).
        start: Its first line (its first decorator's), 1-based.
        end: Its last line.
        key: Its code without docstrings and layout (``ast.dump``), to compare versions.
    """

    qualname: str
    start: int
    end: int
    key: str


def definitions(source: str) -> dict[str, Definition]:
    """Qualified name -> :class:`Definition` of each outermost function of ``source``."""
    out: dict[str, Definition] = {}

    def walk(body: list[ast.stmt], prefix: list[str]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                walk(node.body, [*prefix, node.name])
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                qual = ".".join([*prefix, node.name])
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                out.setdefault(
                    qual, Definition(qual, start, node.end_lineno or node.lineno, _code_key(node))
                )

    walk(ast.parse(source).body, [])
    return out


def _code_key(node: ast.AST) -> str:
    """``node`` without docstrings or type annotations, as text."""
    node = _StripDocs().visit(ast.parse(ast.unparse(node)))
    return ast.dump(node, annotate_fields=False, include_attributes=False)


class _StripDocs(ast.NodeTransformer):
    def _strip(self, node: ast.AST) -> ast.AST:
        self.generic_visit(node)
        body = getattr(node, "body", None)
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.returns = None
            for a in [
                *node.args.posonlyargs,
                *node.args.args,
                *node.args.kwonlyargs,
                node.args.vararg,
                node.args.kwarg,
            ]:
                if a is not None:
                    a.annotation = None
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Module = _strip

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if node.value is None:
            return node
        return ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno)


@dataclasses.dataclass(frozen=True)
class ChangedFunction:
    """A function whose code differs between release N (``old``) and N+1 (``new``).

    Attributes:
        file: Its module, relative to the repository root.
        qualname: Its qualified name (the same in both releases).
        old: Its source in N (decorators included), as lines of text.
        new: Its source in N+1.
    """

    file: str
    qualname: str
    old: str
    new: str


def source_lines(source: str) -> list[str]:
    """The lines of a Python source as the parser counts them (ends kept): only ``\\n``
    ends a line (``str.splitlines`` also splits at form feeds and other separators)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", source)


def _segment(lines: list[str], d: Definition) -> str:
    return "".join(lines[d.start - 1 : d.end])


def changed_functions(
    old_root: Path, new_root: Path, files: Iterable[str]
) -> list[ChangedFunction]:
    """The functions of ``files`` (paths in ``new_root``) that exist in both trees with
    different code (docstrings, annotations and layout do not count), in file order."""
    out = []
    for rel in files:
        a, b = old_root / rel, new_root / rel
        if not (a.is_file() and b.is_file()):
            continue
        try:
            old_text, new_text = a.read_text(encoding="utf-8"), b.read_text(encoding="utf-8")
            old_defs, new_defs = definitions(old_text), definitions(new_text)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        old_lines, new_lines = source_lines(old_text), source_lines(new_text)
        for qual, d in new_defs.items():
            o = old_defs.get(qual)
            if o is not None and o.key != d.key:
                out.append(
                    ChangedFunction(rel, qual, _segment(old_lines, o), _segment(new_lines, d))
                )
    return out


def module_files(root: Path, code_paths: Iterable[str]) -> list[str]:
    """The ``*.py`` files under ``code_paths`` (files or folders relative to ``root``)."""
    out: set[str] = set()
    for p in code_paths:
        path = root / p
        if path.is_file() and path.suffix == ".py":
            out.add(p)
        elif path.is_dir():
            out |= {
                str(f.relative_to(root)) for f in path.rglob("*.py") if "__pycache__" not in f.parts
            }
    return sorted(out)


def _indent(text: str) -> str:
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    return first[: len(first) - len(first.lstrip())]


def revert(new_source: str, fn: ChangedFunction) -> str:
    """``new_source`` (N+1's module) with ``fn`` as it was in N.

    Raises:
        HistoryError: the function is not in ``new_source``, or the result does not parse.
    """
    d = definitions(new_source).get(fn.qualname)
    if d is None:
        raise HistoryError(f"{fn.file}: no function {fn.qualname}")
    old = fn.old
    have, want = _indent(old), _indent(_segment(source_lines(new_source), d))
    if have != want:  # the class moved: re-indent N's text to N+1's level
        old = "".join(
            want + ln[len(have) :] if ln.startswith(have) else ln for ln in source_lines(old)
        )
    lines = source_lines(new_source)
    if not old.endswith("\n"):
        old += "\n"
    out = "".join(lines[: d.start - 1]) + old + "".join(lines[d.end :])
    try:
        ast.parse(out)
    except SyntaxError as e:
        raise HistoryError(f"{fn.file}: {fn.qualname} reverted does not parse ({e})") from e
    return out


def revert_all(
    sources: dict[str, str],
    fns: Iterable[ChangedFunction],
    old_sources: dict[str, str] | None = None,
) -> dict[str, str]:
    """Each module of ``sources`` (path -> N+1's text) with every one of ``fns`` in it put
    back as it was in N (:func:`revert`, one after another: each finds its function by
    name); the modules no function is in are left out. With ``old_sources`` (path -> N's
    text of the module), what N's functions use from their module and N+1 dropped comes
    back with them (:func:`with_needed_names`).

    Raises:
        HistoryError: a function is not in its module, or a result does not parse.
    """
    fns = list(fns)
    out: dict[str, str] = {}
    for fn in fns:
        out[fn.file] = revert(out.get(fn.file, sources[fn.file]), fn)
    for rel in out if old_sources else ():
        if rel in old_sources:
            out[rel] = with_needed_names(
                out[rel], old_sources[rel], [f for f in fns if f.file == rel]
            )
    return out


def _find_def(tree: ast.Module, qualname: str) -> ast.AST | None:
    """The outermost function ``qualname`` (``Class.method``) of a parsed module."""
    body: list[ast.stmt] = tree.body
    *outer, last = qualname.split(".")
    for part in outer:
        cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if cls is None:
            return None
        body = cls.body
    return next(
        (
            n
            for n in body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == last
        ),
        None,
    )


def _free_names(tree: ast.AST) -> set[str]:
    """The names a definition's code reads that it does not bind itself (its parameters,
    assignments, imports, nested definitions and comprehension variables)."""
    loads, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        bound.discard(tree.name)  # its own name is the module's
    return loads - bound


def _top_names(stmt: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(stmt, (ast.If, ast.Try)):  # ``try: import x`` / ``if TYPE_CHECKING:``
        return {
            n for s in ast.iter_child_nodes(stmt) if isinstance(s, ast.stmt) for n in _top_names(s)
        }
    return set()


def with_needed_names(reverted: str, old_module: str, fns: Iterable[ChangedFunction]) -> str:
    """``reverted`` (N+1's module with ``fns`` put back as N had them) with what those
    functions read from their module that N had and N+1 dropped: an import (only the names
    needed: ``from itertools import zip_longest``), a helper function or class, a constant.
    Reverting a function alone would otherwise leave it reading a name no longer there, a
    ``NameError`` no release raised. Imports go after the module's last top-level import,
    the rest before the first top-level statement that holds one of ``fns``."""
    import builtins

    tree = ast.parse(reverted)
    have = set().union(*(_top_names(s) for s in tree.body)) | set(dir(builtins))
    have |= {"__name__", "__file__", "__doc__", "__spec__", "__package__", "__class__"}
    old_tree = ast.parse(old_module)
    nodes = [node for f in fns if (node := _find_def(old_tree, f.qualname)) is not None]
    wanted = set().union(*(_free_names(node) for node in nodes)) - have
    if not wanted:
        return reverted
    # what the functions need, then what that needs (a dropped helper's own imports)
    picked: dict[int, set[str]] = {}
    found: set[str] = set()
    while wanted:
        more: set[str] = set()
        for i, stmt in enumerate(old_tree.body):
            names = _top_names(stmt) & wanted
            if not names:
                continue
            if i not in picked and not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                more |= _free_names(stmt)
            picked.setdefault(i, set()).update(names)
        found |= wanted
        wanted = more - have - found
    imports, others = [], []
    for i, names in sorted(picked.items()):
        stmt = old_tree.body[i]
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            keep = [a for a in stmt.names if (a.asname or a.name).split(".")[0] in names]
            part = (
                ast.ImportFrom(module=stmt.module, names=keep, level=stmt.level)
                if isinstance(stmt, ast.ImportFrom)
                else ast.Import(names=keep)
            )
            imports.append(ast.unparse(part))
        else:
            others.append(ast.get_source_segment(old_module, stmt) or ast.unparse(stmt))
    if not imports and not others:
        return reverted
    lines = source_lines(reverted)
    last_import = max(
        (
            s.end_lineno or s.lineno
            for s in tree.body
            if isinstance(s, (ast.Import, ast.ImportFrom))
        ),
        default=0,
    )
    if not last_import and tree.body and isinstance(tree.body[0], ast.Expr):
        last_import = tree.body[0].end_lineno or 0  # after the module's docstring
    holders = {f.qualname.split(".")[0] for f in fns}
    first_use = next(
        (
            min([s.lineno, *(d.lineno for d in getattr(s, "decorator_list", []))])
            for s in tree.body
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and s.name in holders
        ),
        len(lines) + 1,
    )
    cut = max(first_use - 1, last_import)
    head = "".join(lines[:last_import]) + "".join(f"{i}\n" for i in imports)
    middle = "".join(lines[last_import:cut])
    block = "".join(f"{o.rstrip()}\n\n\n" for o in others)
    out = head + middle + block + "".join(lines[cut:])
    try:
        ast.parse(out)
    except SyntaxError:
        return reverted
    return out


def hidden_test_files(root: Path) -> tuple[list[str], str]:
    """(the files hidden from the agent, the folder they go to at grading): with the tests
    in a folder of their own (``tests_dest``), every file under it, data files included;
    with tests beside the code (``.``), the test modules and ``conftest.py`` files."""
    files = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")
    )
    tests = [
        f for f in files if f.endswith(".py") and (is_test_file(f) or Path(f).name == "conftest.py")
    ]
    if not tests:
        return [], "."
    dest = hidden_tests_dest(tests)
    if dest == ".":
        return tests, dest
    return [f for f in files if f.startswith(dest + "/")], dest


# -- the changelog --------------------------------------------------------------------------
#: Functions of ``time`` that read a clock: a test that asserts on what they measure
#: passes or fails with the machine's load. ``sleep`` too: a test that sleeps waits for
#: a timer of the code under test to run out, or not (pydash's ``debounce`` tests: call,
#: sleep 10 ms, call again within the 15 ms window), which a loaded machine decides.
_CLOCKS = {
    "sleep",
    "time",
    "time_ns",
    "monotonic",
    "monotonic_ns",
    "perf_counter",
    "perf_counter_ns",
    "process_time",
    "process_time_ns",
    "thread_time",
    "thread_time_ns",
}


def _reads_clock(node: ast.AST, clocks: set[str], modules: set[str]) -> bool:
    """Whether code reads a clock: ``time.perf_counter()`` (``modules``: the names ``time``
    is bound to), or uses one of ``clocks`` (names bound to a clock, to ``timeit`` or to a
    function that reads one)."""
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id in modules
            and n.attr in _CLOCKS
        ):
            return True
        if isinstance(n, ast.Name) and n.id in clocks:
            return True
    return False


_ClockFacts = tuple[ast.Module, set[str], set[str]]


def _clock_facts(
    path: Path, cache: dict[Path, _ClockFacts | None], depth: int = 0
) -> _ClockFacts | None:
    """(tree, the names that read a clock, the names ``time`` is bound to) of a file; the
    names it imports from a module beside it count when they read one there."""
    if path in cache:
        return cache[path]
    cache[path] = None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    modules: set[str] = set()
    clocks: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            modules |= {a.asname or a.name for a in stmt.names if a.name == "time"}
            clocks |= {a.asname or a.name for a in stmt.names if a.name == "timeit"}
        elif isinstance(stmt, ast.ImportFrom) and stmt.module in ("time", "timeit"):
            clocks |= {
                a.asname or a.name
                for a in stmt.names
                if stmt.module == "timeit" or a.name in _CLOCKS
            }
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and depth < 2:
            beside = path.parent / (stmt.module.split(".")[-1] + ".py")
            found = _clock_facts(beside, cache, depth + 1) if beside != path else None
            if found is not None:
                clocks |= {a.asname or a.name for a in stmt.names if a.name in found[1]}
    for _ in range(3):  # a function that calls one that reads a clock reads it too
        clocks |= {
            f.name
            for f in tree.body
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            and _reads_clock(f, clocks, modules)
        }
    cache[path] = (tree, clocks, modules)
    return cache[path]


def clock_tests(root: Path, node_ids: Iterable[str]) -> set[str]:
    """The tests among ``node_ids`` (of the test files under ``root``) that read the wall
    clock: the test function, a method of its class, a function of its file or one it
    imports from a module beside it (``from perf_utils import assert_near_linear``) reads
    ``time.perf_counter`` and the like or uses ``timeit``. Their outcome depends on the
    machine's load (mistune's ``assertLess(elapsed, 0.5)``), so no task grades them."""
    cache: dict[Path, _ClockFacts | None] = {}
    out = set()
    for node_id in node_ids:
        rel, *parts = node_id.partition("[")[0].split("::")
        if not parts or (found := _clock_facts(root / rel, cache)) is None:
            continue
        tree, clocks, modules = found
        owner = next(
            (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == parts[0]), None
        )
        scope = owner.body if owner is not None and len(parts) == 2 else tree.body
        fn = next(
            (
                n
                for n in scope
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == parts[-1]
            ),
            None,
        )
        if fn is None:
            continue
        methods = set()
        if owner is not None:  # ``self.measure()``, a method that reads a clock
            methods = {
                m.name
                for m in owner.body
                if isinstance(m, ast.FunctionDef) and _reads_clock(m, clocks, modules)
            }
        if _reads_clock(fn, clocks, modules) or any(
            isinstance(n, ast.Attribute) and n.attr in methods for n in ast.walk(fn)
        ):
            out.add(node_id)
    return out


def changelog_files(root: Path) -> list[Path]:
    """The changelog-like files of an unpacked sdist (root first, then ``docs/``)."""
    out = []
    for folder in (root, root / "docs", root / "doc"):
        for p in sorted(folder.iterdir()) if folder.is_dir() else []:
            stem = p.name.lower().split(".")[0]
            if (
                p.is_file()
                and stem in CHANGELOG_NAMES
                and p.suffix.lower() in ("", ".md", ".rst", ".txt", ".markdown")
            ):
                out.append(p)
    return out


def _is_header(lines: list[str], i: int) -> bool:
    line = lines[i].strip()
    if not line or len(line) > 100 or _BULLET.match(lines[i]):
        return False
    if line.startswith("#"):
        return True
    if (
        i + 1 < len(lines)
        and _UNDERLINE.match(lines[i + 1])
        and len(lines[i + 1].strip()) >= min(len(line), 3)
    ):
        return True
    return bool(re.match(r"^(?:version\s+|release\s+|v|\[)?\d+\.\d+", line, re.IGNORECASE))


@dataclasses.dataclass(frozen=True)
class ChangelogEntry:
    """One entry (a bullet, or a paragraph) of a release's section in a changelog.

    Attributes:
        text: The entry, its lines joined by spaces, Markdown links reduced to their text.
        heading: The sub-heading it sits under in the release's section (``Bug Fixes``,
            ``Fixed``, ``Trivial Changes``...) without its markup; ``""`` when none.
    """

    text: str
    heading: str = ""


def changelog_section(root: Path, version: str) -> list[str] | None:
    """The entries (bullets, or paragraphs) of ``version``'s section in the sdist's
    changelog, or None when no changelog has a section for it (the texts of
    :func:`changelog_entries`)."""
    entries = changelog_entries(root, version)
    return None if entries is None else [e.text for e in entries]


def changelog_entries(root: Path, version: str) -> list[ChangelogEntry] | None:
    """The entries of ``version``'s section in the sdist's changelog, each with the
    sub-heading it sits under, or None when no changelog has a section for it.

    A sub-heading is a heading inside the section, or a line of its own such as ``Bug
    fixes:`` or ``**Added**`` that :func:`heading_kind` knows. An entry never runs across
    one. In a section with bullets the entries are the bullets (lines indented under a
    bullet, or following it without a blank line, are joined to it; a paragraph after a
    blank line that is not indented is not); in one without, the paragraphs."""
    token = re.compile(_VERSION_TOKEN.format(re.escape(version)))
    for path in changelog_files(root):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        heads = [i for i in range(len(lines)) if _is_header(lines, i)]
        versioned = [i for i in heads if _ANY_VERSION.search(lines[i])]
        for n, i in enumerate(versioned):
            if token.search(lines[i]):
                end = versioned[n + 1] if n + 1 < len(versioned) else len(lines)
                return _section_entries(lines[i + 1 : end], set(heads) - {i}, i + 1)
    return None


def _section_entries(lines: list[str], heads: set[int], first: int) -> list[ChangelogEntry]:
    """The entries of a release's section (``lines``, the first of which is line
    ``first`` of the file, whose headings are at ``heads``), split at its sub-headings."""
    chunks: list[tuple[str, list[str]]] = [("", [])]
    for k, ln in enumerate(lines, first):
        if k in heads or _label(ln):
            chunks.append((_heading_text(ln), []))
        elif not _UNDERLINE.match(ln):
            chunks[-1][1].append(ln)
    bulleted = any(_BULLET.match(ln) for _, chunk in chunks for ln in chunk)
    return [
        ChangelogEntry(text, heading)
        for heading, chunk in chunks
        for text in _entries(chunk, bulleted)
    ]


def _heading_text(line: str) -> str:
    """A heading's words without its markup (``#``, ``**``, a closing colon)."""
    text = line.strip().lstrip("#").strip()
    text = re.sub(r"^(\*\*|__|\*|_)(.*)\1$", r"\2", text).strip()
    return text.rstrip(":").strip()


def _label(line: str) -> bool:
    """Whether ``line`` is a sub-heading written as a line of its own (``Bug fixes:``,
    ``**Added**``): at most four words, not a bullet nor indented, that
    :func:`heading_kind` knows."""
    text = line.rstrip()
    if not text or len(text) - len(text.lstrip()) > 1 or _BULLET.match(text):
        return False
    text = text.strip()
    if m := re.fullmatch(r"(\*\*|__)(.+)\1:?", text):
        text = m.group(2)
    elif text.endswith(":"):
        text = text[:-1]
    else:
        return False
    return (
        re.fullmatch(r"[A-Za-z][A-Za-z &/,-]*", text.strip()) is not None
        and len(text.split()) <= 4
        and heading_kind(text) is not None
    )


def _entries(lines: list[str], bulleted: bool | None = None) -> list[str]:
    """Bullets (continuation lines joined), or paragraphs when there are none (in the
    section: ``bulleted``, by default whether ``lines`` have a bullet)."""
    out: list[str] = []
    current: list[str] | None = None
    if bulleted is None:
        bulleted = any(_BULLET.match(ln) for ln in lines)
    indent, blank = 0, False
    for ln in lines:
        if not ln.strip():
            if not bulleted:
                current = None
            blank = True
            continue
        after_blank, blank = blank, False
        if bulleted and (m := _BULLET.match(ln)) and len(m.group(1)) <= 2:
            current, indent = [ln[m.end() :].strip()], len(m.group(1))
            out.append("")
        elif bulleted and after_blank and len(ln) - len(ln.lstrip()) <= indent:
            current = None  # a paragraph of its own, not the bullet's: left out
            continue
        elif current is None:
            if bulleted:
                continue
            current = [ln.strip()]
            out.append("")
        else:
            current.append(ln.strip())
        out[-1] = " ".join(current)
    return [_MD_LINK.sub(r"\1", e) for e in out if e]


_MD_LINK = re.compile(r"\[([^\]]+)\]\(https?://[^)\s]+\)")
_URL = re.compile(r"https?://\S+")


def words(text: str) -> set[str]:
    """The stems (first 5 letters) of the words of ``text`` (identifiers split on ``_``
    and camel case), less common words."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", _URL.sub(" ", text))
    out = set()
    for w in re.findall(r"[A-Za-z]+", text.replace("_", " ")):
        w = w.lower()
        if len(w) >= 3 and w not in _STOP:
            out.add(w[:5])
    return out


#: The words of a changelog's sub-headings, by the kind of change they hold
#: (:func:`heading_kind`).
_HEADING_WORDS = {
    "bug": {"bug", "bugs", "bugfix", "bugfixes", "fix", "fixes", "fixed", "security"},
    "feature": {"feature", "features", "added", "enhancement", "enhancements"},
    "deprecation": {"deprecation", "deprecations", "deprecated", "removed", "removal", "removals"},
    "performance": {"performance"},
    "internal": {
        "trivial",
        "internal",
        "internals",
        "misc",
        "miscellaneous",
        "documentation",
        "docs",
        "doc",
        "test",
        "tests",
        "testing",
        "maintenance",
        "chore",
        "chores",
        "refactor",
        "refactoring",
        "refactorings",
        "build",
        "ci",
        "packaging",
        "development",
        "dependencies",
        "dependency",
        "deps",
        "tooling",
        "infrastructure",
    },
}


def heading_kind(heading: str) -> str | None:
    """The kind of change a changelog sub-heading holds: ``bug`` (``Bug Fixes``,
    ``Fixed``, ``Security``), ``feature`` (``Features``, ``Added``, ``Enhancements``),
    ``deprecation`` (``Deprecations``, ``Removed``), ``performance``, or ``internal``
    (``Trivial Changes``, ``Internal Changes``, ``Misc``, documentation, tests, build, CI,
    dependencies); None for a heading that says none of them (``Changed``) or more than
    one. Read from its words, whatever their case, markup or emoji."""
    found = {
        kind
        for word in re.findall(r"[a-z]+", heading.lower())
        for kind, known in _HEADING_WORDS.items()
        if word in known
    }
    return found.pop() if len(found) == 1 else None


#: References a changelog entry may open with: ``:gh:`463`:``, ``#12:``, ``[#12]``,
#: ``(gh-12)``, ``Issue #12:``, a reST link ```#12 <url>`_``.
_LEADING_REFERENCE = re.compile(
    r"^(?:\s*(?::[\w-]+:`[^`]*`|`[^`]*`_{1,2}|#\d+|gh-\d+|\[[^\]]*\]|\((?:#|gh-)?\d+\)"
    r"|(?:issue|pr|bug)\s*#?\d+)\s*[,:;-]?)+\s*",
    re.I,
)
#: The opening of an entry about tests, documentation, refactoring or CI and dependencies
#: (:func:`quotable`).
_HOUSEKEEPING = re.compile(
    r"(?:add(?:s|ed)?|write|wrote)\s+(?:(?:a|an|the|more|missing|new|some|additional|extra"
    r"|unit|regression|integration|basic)\s+)*tests?\b"
    r"|(?:improve|increase|extend|expand|enhance)[sd]?\s+(?:the\s+)?(?:unit\s+)?"
    r"(?:tests?|testing|test\s+(?:coverage|suite)|(?:code\s+)?coverage)\b"
    r"|(?:more|additional|missing)\s+tests\b|tests?(?:\s+suite)?\s*:"
    r"|refactor(?:s|ed|ing)?\b"
    r"|(?:remove[sd]?|delete[sd]?|drop(?:s|ped)?)\s+(?:the\s+|some\s+)?"
    r"(?:double|duplicated?|dead|unused|redundant)\s+code\b"
    r"|(?:fix(?:e[sd])?\s+)?(?:a\s+|some\s+|several\s+)?typos?\b"
    r"|(?:update[sd]?|improve[sd]?|fix(?:e[sd])?|add(?:s|ed)?|clarif(?:y|ies|ied)"
    r"|correct(?:s|ed)?|expand(?:s|ed)?|rewrite|rewrote|reword(?:s|ed)?)\s+"
    r"(?:the\s+|some\s+|more\s+|missing\s+)?(?:docs?|documentation|docstrings?|readme"
    r"|changelog)\b"
    r"|document(?:ed)?\s+(?:(?:the|how|that|what|why|when|which|a|an)\b|`)|docs?\b"
    r"|(?:ci|tox|nox|github\s+actions?|pre-commit|travis|appveyor)\b"
    r"|(?:update[sd]?|bump(?:s|ed)?|upgrade[sd]?|pin(?:s|ned)?|unpin(?:s|ned)?)\s+(?:the\s+)?"
    r"(?:(?:dev(?:elopment)?|test|ci|build)\s+)?(?:dependenc\w+|requirements|deps"
    r"|github\s+actions?|ci|workflows?|pre-commit|tox)\b"
    r"|bump(?:s|ed)?\s+\S+\s+from\s+\S+\s+to\b"
    r"|(?:suppress|silence|ignore|filter)(?:e[sd]|s|ed)?\s+(?:\w+\s+)?warnings?\s+in\s+"
    r"(?:the\s+)?tests?",
    re.I,
)


def quotable(entry: ChangelogEntry) -> bool:
    """Whether a changelog entry may describe a task's change: not one under a heading of
    housekeeping (:func:`heading_kind` ``internal``), nor one whose own words open by
    saying it is about tests, documentation, refactoring, typos or CI and dependencies
    (``Add tests for ...``, ``Improve test coverage``, ``Remove double code in ...``,
    ``Update docs``, ``Update GitHub Actions``), its leading references aside."""
    if heading_kind(entry.heading) == "internal":
        return False
    text = _LEADING_REFERENCE.sub("", " ".join(entry.text.replace("``", "`").split()))
    return _HOUSEKEEPING.match(text) is None


def pick_entry(entries: list[str], hints: Iterable[str], names: Iterable[str] = ()) -> str | None:
    """The changelog entry that describes a change: the one that shares the most words
    with ``hints`` (e.g. the failing tests' names), a mention of one of ``names`` (the
    changed function and its class, as identifiers, alone or after a dotted prefix such
    as ``pkg.module.Class.``) counting two, with a score of at least two and strictly
    above every other entry's; an entry alone in its section needs one. None when no entry
    qualifies. The entries are the quotable ones (:func:`quotable`) of the section."""
    want = set().union(*(words(h) for h in hints)) if hints else set()
    names = [n for n in names if len(n.strip("_")) >= 4]

    def score(entry: str) -> int:
        named = any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", entry) for n in names)
        return len(words(entry) & want) + 2 * named

    scored = sorted(((score(e), e) for e in entries), key=lambda x: -x[0])
    if not scored:
        return None
    best, entry = scored[0]
    if len(entries) == 1 and best >= 1:
        return entry
    if best >= 2 and (len(scored) == 1 or scored[1][0] < best):
        return entry
    return None


def fix_lines(gold: str) -> set[str]:
    """The lines a gold patch adds or removes (stripped, 6 characters or more)."""
    return {
        ln[1:].strip()
        for ln in gold.splitlines()
        if ln[:1] in "+-" and ln[:3] not in ("+++", "---") and len(ln[1:].strip()) >= 6
    }


def statement_leaks(statement: str, gold: str, test_ids: Iterable[str]) -> list[str]:
    """What of the fix or the hidden tests a statement gives away: lines the gold patch
    adds or removes (8 characters or more: the line to change points at the fix as much as
    the line it becomes), test ids and test function names (empty: none)."""
    out = []
    changed = {
        ln[1:].strip()
        for ln in gold.splitlines()
        if ln[:1] in "+-" and ln[:3] not in ("+++", "---") and len(ln[1:].strip()) >= 8
    }
    out += [f"gold line {ln!r}" for ln in sorted(changed) if ln in statement]
    for t in test_ids:
        names = {t, t.split("::")[0], *(p.split("[")[0] for p in t.split("::")[1:])}
        out += [
            f"test name {n!r}"
            for n in sorted(names)
            if len(n) > 4 and re.search(rf"(?<!\w){re.escape(n)}(?!\w)", statement)
        ]
    return out


# -- a reproduction script from a failing test -----------------------------------------
#: Longest reproduction script put in a statement.
MAX_REPRODUCTION_CHARS = 1500
#: Longest statement (description and reproduction together).
MAX_STATEMENT_CHARS = 2000
#: Fixtures a reproduction can stand in for (name -> the expression that replaces it).
_FIXTURES = {
    "tmp_path": "pathlib.Path(tempfile.mkdtemp())",
    "tmpdir": "pathlib.Path(tempfile.mkdtemp())",
}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _bound(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {stmt.name}
    if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return set()


def _is_fixture(node: ast.AST) -> bool:
    return any("fixture" in ast.unparse(d) for d in getattr(node, "decorator_list", []))


def _parametrize_case(fn: ast.FunctionDef, case_id: str) -> dict[str, ast.expr] | None:
    """Argument name -> value expression of the parametrize case called ``case_id`` (ids
    made the default way from literal values), or None."""
    decorators = [
        d
        for d in fn.decorator_list
        if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("mark.parametrize")
    ]
    if len(decorators) != 1 or len(decorators[0].args) < 2 or decorators[0].keywords:
        return None
    names_node, values_node = decorators[0].args[:2]
    try:
        names = ast.literal_eval(names_node)
    except ValueError:
        return None
    names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    if not isinstance(values_node, ast.List | ast.Tuple):
        return None
    found = []
    for case in values_node.elts:
        parts = case.elts if len(names) > 1 and isinstance(case, ast.Tuple) else [case]
        if len(parts) != len(names):
            return None
        ids = []
        for part in parts:
            try:
                value = ast.literal_eval(part)
            except ValueError:
                return None
            if isinstance(value, bool) or value is None or isinstance(value, int | float):
                ids.append(str(value))
            elif isinstance(value, str):
                ids.append(value.encode("unicode_escape").decode("ascii"))
            else:
                return None
        if "-".join(ids) == case_id:
            found.append(dict(zip(names, parts, strict=True)))
    return found[0] if len(found) == 1 else None


def test_script(
    source: str,
    node_id: str,
    *,
    local_modules: Iterable[str] = (),
    pythonpath: Iterable[str] = (),
    conftests: Sequence[str] = (),
) -> str | None:
    """A reproduction script made from one test (a module-level test function or a method
    of a module-level class): the test module's imports and the helpers the test uses, the
    test's body as a function ``reproduce``, and a call of it. The test is not named.

    Args:
        source: The test module's text.
        node_id: The test's pytest node id.
        local_modules: Top-level module names of the hidden tests (an import of one makes
            the script depend on hidden files: no script).
        pythonpath: Workspace folders the package is imported from (put on ``sys.path``).
        conftests: The texts of the ``conftest.py`` files above the test, nearest first:
            where its fixtures are looked for after its class and module.

    Returns:
        The script, or None for a test it cannot stand alone for (a fixture that is not
        plain code: one with ``params``, or that takes ``request``, ``monkeypatch`` or
        another of pytest's own besides ``tmp_path``; parameters it cannot resolve;
        imports of the test's own modules; a script over :data:`MAX_REPRODUCTION_CHARS`).
        A fixture that is plain code is inlined, its set-up before the test's body (a
        ``with`` it yields inside wraps the body); its tear-down is left out.
    """
    parts = node_id.split("::")[1:]
    name, _, case = parts[-1].partition("[")
    case = case.removesuffix("]")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = _test_scope(tree, parts)
    if found is None:
        return None
    scope, owner = found
    fn = next((n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if fn is None or _is_fixture(fn):
        return None
    args = [a.arg for a in fn.args.args if a.arg != "self"]
    values = _parametrize_case(fn, case) if case else {}
    if values is None or fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
        return None
    modules = [tree, *(_parsed(c) for c in conftests)]
    fixtures = _Fixtures(owner, modules)
    if not all(fixtures.resolve(a) for a in args if a not in values):
        return None
    used = _names(fn) | {n for v in values.values() for n in _names(v)}
    if owner is not None:
        helpers = _class_helpers(owner, fn)
        if helpers is None:
            return None
        for h in helpers:
            used |= _names(h)
        # the script's class keeps the test class's bases: their imports come with it
        # (without them every unittest test's script stopped at a NameError)
        used |= {n for b in owner.bases for n in _names(b)}
    if fixtures.clash(used):
        return None
    body = fixtures.context(used, set(local_modules))
    if body is None:
        return None
    fn = _Messages().visit(fn)
    fn.decorator_list, fn.name = [], "reproduce"
    fn.args.args = [a for a in fn.args.args if a.arg == "self"]
    for a, v in reversed(values.items()):
        fn.body[:0] = ast.parse(f"{a} = {ast.unparse(v)}").body
    fn.body = fixtures.around(fn.body)
    if owner is not None:
        cls = copy.copy(owner)
        cls.name, cls.body, cls.decorator_list = "Case", [*helpers, fn], []
        code = [ast.unparse(cls), _class_call(owner)]
    else:
        code = [ast.unparse(fn), "reproduce()"]
    head = [ast.unparse(n) for n in body]
    if any(f.node is None for f in fixtures.order):
        head[:0] = ["import pathlib", "import tempfile"]
    paths = [p for p in pythonpath if p not in ("", ".")]
    if paths:
        head[:0] = ["import sys", *(f"sys.path.insert(0, {p!r})" for p in reversed(paths))]
    script = "\n".join(head) + ("\n\n\n" if head else "") + "\n\n\n".join(code) + "\n"
    return script if len(script) <= MAX_REPRODUCTION_CHARS else None


def _parsed(text: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


@dataclasses.dataclass
class _Fixture:
    """A fixture a reproduction makes: ``node`` its definition (None for one of
    :data:`_FIXTURES`), ``module`` the index of the module whose names its code reads (0
    the test's, for a method of the test's class too, then the conftests)."""

    name: str
    node: ast.FunctionDef | None
    module: int = 0


class _Fixtures:
    """The fixtures a test takes, resolved to plain code: each fixture's own fixtures
    first (:attr:`order`), looked for in the test's class, its module, then the conftests."""

    #: Nesting of fixtures taking fixtures a reproduction follows.
    DEPTH = 4

    def __init__(self, owner: ast.ClassDef | None, modules: list[ast.Module]) -> None:
        self.owner, self.modules = owner, modules
        self.order: list[_Fixture] = []

    def _find(self, name: str) -> _Fixture | None:
        if self.owner is not None:
            for n in self.owner.body:
                if isinstance(n, ast.FunctionDef) and n.name == name and _is_fixture(n):
                    return _Fixture(name, n)
        for i, module in enumerate(self.modules):
            for n in module.body:
                if isinstance(n, ast.FunctionDef) and n.name == name and _is_fixture(n):
                    return _Fixture(name, n, i)
        return None

    def resolve(self, name: str, depth: int = 0) -> bool:
        """Whether fixture ``name`` can be made (added to :attr:`order` with what it takes)."""
        if any(f.name == name for f in self.order):
            return True
        if name in _FIXTURES:
            self.order.append(_Fixture(name, None))
            return True
        found = self._find(name)
        if found is None or depth >= self.DEPTH or not _plain_fixture(found.node):
            return False
        node = found.node
        takes = [a.arg for a in node.args.args if a.arg != "self"]
        if node.args.vararg or node.args.kwarg or node.args.kwonlyargs:
            return False
        if not all(self.resolve(a, depth + 1) for a in takes):
            return False
        self.order.append(found)
        return True

    def clash(self, used: set[str]) -> bool:
        """Whether a name one fixture's code binds is one the test, or another fixture,
        uses for something else (inlined, they would share one function's names)."""
        seen = set(used)
        for f in self.order:
            if f.node is None:
                continue
            bound = {
                n.id
                for s in f.node.body
                for n in ast.walk(s)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            } - {f.name}
            if bound & seen:
                return True
            seen |= bound | _names(f.node)
        return False

    def context(self, used: set[str], local_modules: set[str]) -> list[ast.stmt] | None:
        """The module-level statements the test (names ``used``) and its fixtures need,
        each from the module that defines it (:func:`_module_context`), the fixtures made
        left out; None when one cannot come along."""
        made = {f.name for f in self.order}
        wanted: dict[int, set[str]] = {0: used}
        for f in self.order:
            if f.node is not None:
                names = {n for s in f.node.body for n in _names(s)}
                wanted.setdefault(f.module, set()).update(names)
        body: list[ast.stmt] = []
        for i, names in sorted(wanted.items()):
            context = _module_context(self.modules[i], names, local_modules, made)
            if context is None:
                return None
            seen = {ast.unparse(n) for n in body}
            body += [n for n in context if ast.unparse(n) not in seen]
        return body

    def around(self, body: list[ast.stmt]) -> list[ast.stmt]:
        """``body`` after each fixture's set-up, innermost the last made."""
        for f in reversed(self.order):
            if f.node is None:
                body = [*ast.parse(f"{f.name} = {_FIXTURES[f.name]}").body, *body]
            else:
                body = _setup(f.node.body, f.name, body)
        return body


def _plain_fixture(node: ast.FunctionDef) -> bool:
    """A fixture that is plain code: no ``params``, no ``request`` (or another of pytest's
    own fixtures it would have to stand in for), one ``return`` or ``yield`` of its value
    on the path :func:`_setup` follows."""
    for d in node.decorator_list:
        if isinstance(d, ast.Call) and any(k.arg in ("params", "name") for k in d.keywords):
            return False
    if any(a.arg in _PYTEST_OWN for a in node.args.args):
        return False
    exits = [
        n
        for s in node.body
        for n in ast.walk(s)
        if isinstance(n, ast.Return | ast.Yield | ast.YieldFrom | ast.Await)
    ]
    return len(exits) == 1 and _setup(node.body, node.name, []) is not None


#: pytest's own fixtures that a reproduction cannot stand in for.
_PYTEST_OWN = frozenset(
    {"request", "monkeypatch", "capsys", "capfd", "caplog", "recwarn", "pytestconfig"}
)


def _setup(stmts: list[ast.stmt], name: str, inner: list[ast.stmt]) -> list[ast.stmt] | None:
    """A fixture's statements up to the one that hands its value over (``return X`` or
    ``yield X``, at the top or inside ``with`` blocks), that one becoming ``name = X``
    followed by ``inner``; what follows it (tear-down) is left out. None when the value is
    handed over anywhere else."""
    out: list[ast.stmt] = []
    for s in stmts:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and not out:
            continue  # the fixture's docstring
        value = None
        if isinstance(s, ast.Return):
            value = s.value
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Yield):
            value = s.value.value
        else:
            if isinstance(s, ast.With) and any(
                isinstance(n, ast.Return | ast.Yield) for n in ast.walk(s)
            ):
                nested = _setup(s.body, name, inner)
                if nested is None:
                    return None
                w = copy.copy(s)
                w.body = nested
                return [*out, w]
            out.append(s)
            continue
        if value is None:
            return None
        hand = (
            []
            if isinstance(value, ast.Name) and value.id == name
            else [ast.Assign(targets=[ast.Name(name, ast.Store())], value=value, lineno=0)]
        )
        return [*out, *hand, *inner]
    return None


def _test_scope(
    tree: ast.Module, parts: list[str]
) -> tuple[list[ast.stmt], ast.ClassDef | None] | None:
    """Where the test named by node id ``parts`` is defined: the module's body, or the body
    of its module-level class (a plain or ``TestCase`` class) and that class; None if not
    there or nested deeper."""
    if len(parts) == 1:
        return tree.body, None
    if len(parts) != 2:
        return None
    owner = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == parts[0]), None)
    if (
        owner is None
        or owner.bases
        and not all(ast.unparse(b).endswith("TestCase") for b in owner.bases)
    ):
        return None
    return owner.body, owner


def _class_helpers(owner: ast.ClassDef, fn: ast.FunctionDef) -> list[ast.FunctionDef] | None:
    """The methods of ``owner`` test ``fn`` calls through ``self`` and its set-up and
    tear-down; None when one is a fixture or the class has attributes of its own."""
    called = {a.attr for a in ast.walk(fn) if isinstance(a, ast.Attribute)}
    helpers = [
        m
        for m in owner.body
        if isinstance(m, ast.FunctionDef)
        and m is not fn
        and (m.name in called or m.name in ("setUp", "setup_method", "tearDown"))
    ]
    if any(_is_fixture(m) for m in helpers) or any(isinstance(m, ast.Assign) for m in owner.body):
        return None
    return helpers


def written_out(node: ast.expr) -> bool:
    """Whether an expression is a value written out (a literal, a display of literals)."""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


class _Messages(ast.NodeTransformer):
    """``assert a == b`` (no message) becomes ``_actual = a``, ``_expected = b`` (``b``
    the side written out: ``assert 3 == f(x)`` expects 3) and an assert whose message shows
    both; another bare ``assert c`` gets its own source as its
    message (a script has no pytest to explain a failed assert)."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        return node

    def visit_Assert(self, node: ast.Assert) -> ast.AST | list[ast.stmt]:
        if node.msg is not None:
            return node
        t = node.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq):
            actual, expected = t.left, t.comparators[0]
            if written_out(actual) and not written_out(expected):  # ``assert 3 == f(x)``
                actual, expected = expected, actual
            return ast.parse(
                f"_actual = {ast.unparse(actual)}\n_expected = {ast.unparse(expected)}\n"
                "assert _actual == _expected, "
                "f'expected {_expected!r}, got {_actual!r}'"
            ).body
        node.msg = ast.Constant(f"failed: {ast.unparse(t)}")
        return node


def asserting_script(script: str) -> str | None:
    """``script`` with its closing call wrapped so that whatever else the call raises (the
    library's own error, pytest's ``DID NOT RAISE``, an assert inside pytest or the library)
    becomes an AssertionError of the script's own that names it, the original traceback
    chained above it: a reproduction then fails by stating what went wrong, as
    :func:`repogym.scenarios.bug_reports.fails_itself` asks, even where the test it came from
    expected an exception or none. An AssertionError of the script's own (``unittest``'s
    for its ``self.assert*``) passes through. What follows the last definition or import
    is the closing part (a test's body inlined after its imports, for a script without
    definitions).
    None for a script with nothing after its definitions and imports."""
    try:
        tree = ast.parse(script)
    except SyntaxError:
        return None
    last_def = max(
        (
            i
            for i, n in enumerate(tree.body)
            if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom))
            or bug_reports.import_fallback(n)
        ),
        default=None,
    )
    if last_def is None or last_def == len(tree.body) - 1:
        return None
    lines = script.rstrip().splitlines()
    call = lines[tree.body[last_def + 1].lineno - 1 :]
    # ``import traceback`` goes after the docstring and ``__future__`` imports, if any
    lead = 0
    for i, n in enumerate(tree.body[:last_def]):
        docstring = (
            i == 0
            and isinstance(n, ast.Expr)
            and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str)
        )
        if not docstring and not (isinstance(n, ast.ImportFrom) and n.module == "__future__"):
            break
        lead = n.end_lineno or n.lineno
    head = "\n".join(
        [*lines[:lead], "import traceback", *lines[lead : tree.body[last_def + 1].lineno - 1]]
    ).rstrip()
    body = "\n".join("    " + ln if ln.strip() else ln for ln in call)
    return (
        f"{head}\n\n\ntry:\n{body}\n"
        "except (KeyboardInterrupt, SystemExit):\n    raise\n"
        "except BaseException as error:\n"
        "    frames = [f for f in traceback.extract_tb(error.__traceback__)\n"
        "              if '/unittest/' not in f.filename]\n"
        "    if isinstance(error, AssertionError) and frames[-1].filename == __file__:\n"
        "        raise\n"
        "    message = ' '.join(str(error).split())\n"
        "    raise AssertionError(f'{type(error).__name__}: {message}') from error\n"
    )


def _class_call(owner: ast.ClassDef) -> str:
    if owner.bases:  # a unittest.TestCase: debug() runs setUp, the test and tearDown
        return 'Case("reproduce").debug()'
    setup = any(isinstance(m, ast.FunctionDef) and m.name == "setup_method" for m in owner.body)
    return (
        "case = Case()\ncase.setup_method(None)\ncase.reproduce()"
        if setup
        else "Case().reproduce()"
    )


def _module_context(
    tree: ast.Module, used: set[str], local_modules: set[str], made: Collection[str] = ()
) -> list[ast.stmt] | None:
    """The module-level statements the names ``used`` need (imports, helper definitions,
    constants), in order, leaving out the names ``made`` otherwise (fixtures inlined);
    None when one of them is an import of a hidden test module or a pytest fixture."""
    needed, keep = set(used) - set(made), []
    stmts = [s for s in tree.body if _bound(s)]
    changed = True
    while changed:
        changed = False
        for s in stmts:
            if s not in keep and _bound(s) & needed:
                keep.append(s)
                if not isinstance(s, ast.Import | ast.ImportFrom):
                    new = _names(s) - needed - set(made)
                    needed |= new
                    changed = changed or bool(new)
    out = []
    for s in tree.body:
        if s not in keep:
            continue
        if isinstance(s, ast.ImportFrom) and (
            s.level or (s.module or "").split(".")[0] in local_modules
        ):
            return None
        if isinstance(s, ast.Import) and any(
            a.name.split(".")[0] in local_modules for a in s.names
        ):
            return None
        if _is_fixture(s) or (
            isinstance(s, ast.FunctionDef | ast.ClassDef) and s.name.startswith(("test", "Test"))
        ):
            return None
        out.append(s)
    return out


# -- writing the task -----------------------------------------------------------------------
@dataclasses.dataclass
class HistoryTask:
    """Everything a history task folder is made of.

    Attributes:
        name: The package's name.
        base: Release N (the reverted function's version).
        fixed: Release N+1 (the repository's and the tests' version).
        function: The reverted function.
        repo: N+1's unpacked sdist (read only; copied without its test files).
        test_files: Its test files (repository paths), hidden from the agent.
        tests_dest: Where they go at grading.
        fail_to_pass: Tests that fail with the revert.
        pass_to_pass: The other tests that pass on N+1.
        buggy: The reverted module's text.
        description: The bug report (the statement without its reproduction).
        statement_source: ``changelog`` or what wrote the description otherwise.
        environment: The pinned ``[environment]``.
        ini_options: The grader's pytest settings.
        reproduction: A reproduction script (``reproduction.py`` and in the statement), or
            None.
        tags: Extra tags.
        also: Functions reverted with ``function``: the rest of one coherent change (the
            functions N+1 changed for the changelog entry the statement quotes), so the
            buggy state is the one release N shipped, not half of it.
        also_buggy: The reverted text of each other module ``also`` has functions in.
    """

    name: str
    base: str
    fixed: str
    function: ChangedFunction
    repo: Path
    test_files: list[str]
    tests_dest: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    buggy: str
    description: str
    statement_source: str
    environment: DependencySpec | None = None
    ini_options: dict[str, str] = dataclasses.field(default_factory=dict)
    reproduction: str | None = None
    tags: tuple[str, ...] = ()
    also: tuple[ChangedFunction, ...] = ()
    also_buggy: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def functions(self) -> tuple[ChangedFunction, ...]:
        """Every function the task reverts, ``function`` first."""
        return (self.function, *self.also)

    @property
    def reverted(self) -> dict[str, str]:
        """Module -> its reverted text, for every module the task changes."""
        return {self.function.file: self.buggy, **self.also_buggy}

    @property
    def id(self) -> str:
        """``<package>-h<hash of release, files and functions>`` (names no function)."""
        key = f"{self.name}=={self.fixed}:" + ":".join(
            f"{f.file}:{f.qualname}" for f in self.functions
        )
        digest = hashlib.sha1(key.encode()).hexdigest()[:8]
        return re.sub(r"[^a-z0-9._-]", "-", f"{self.name}-h{digest}".lower()).strip("-")

    @property
    def statement(self) -> str:
        """What the agent is told: the description and the reproduction
        (:func:`full_statement`)."""
        return full_statement(self.description, self.reproduction)

    @property
    def gold(self) -> str:
        """The fix: the reverted modules back to N+1's text."""
        return "".join(
            file_diff(rel, text, (self.repo / rel).read_text(encoding="utf-8"))
            for rel, text in sorted(self.reverted.items())
        )


def full_statement(description: str, reproduction: str | None) -> str:
    """The statement: the description, then the reproduction script under ``Reproduction:``
    in a fenced python block (the format the ``apr`` agent reads)."""
    text = description.rstrip() + "\n"
    if reproduction:
        text += f"\nReproduction:\n\n```python\n{reproduction.rstrip()}\n```\n"
    return text


#: Longest title made from a changelog entry.
TITLE_CHARS = 90
#: Abbreviations whose period ends no sentence.
_ABBREVIATIONS = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf)|\.\.)\.$")
#: A reference a changelog entry ends a sentence with: ``(#374)``, ``(issue745, pr746 by
#: someone)``, ``(CVE-2024-1)``.
_REFERENCE = re.compile(
    r"\s*\((?:[^()]*?(?:#\d|\bissues?\s*#?\d|\bissue\d|\bpr\s*#?\d|\bgh-\d|\bby\s|CVE-)[^()]*)\)"
)


def _first_sentence(text: str) -> str:
    for m in re.finditer(r"[.!?](?=\s+[A-Z`(\"'])", text):
        if not _ABBREVIATIONS.search(text[: m.end()]):
            return text[: m.start()]
    return text.rstrip().rstrip(".")


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters: at a clause's end if one is near
    enough, else at a word, with ``...``; never inside a code span."""
    if len(text) <= limit:
        return text
    for seps in (("; ", " \u2014 ", " - ", ": "), (", ", " ("), (" by ", " when ", " instead of ")):
        ends = sorted(
            (m.start() for sep in seps for m in re.finditer(re.escape(sep), text[:limit])),
            reverse=True,
        )
        for i in ends:
            if (
                i >= limit // 3
                and text[:i].count("`") % 2 == 0
                and text[:i].count("(") == text[:i].count(")")
            ):
                return text[:i]
    cut = text[: limit - 3].rsplit(" ", 1)[0]
    if cut.count("`") % 2:
        cut = cut[: cut.rfind("`")].rstrip()
    return cut.rstrip(",;:") + "..."


#: References to issues, pull requests and people as Sphinx roles, in parentheses or not:
#: ``(:issue:`2891`)``, ``:pr:`3082` by :user:`someone```.
_SPHINX_REF = re.compile(
    r"\s*\((?:\s*(?::(?:issue|pr|gh|ghissue|ghpull|bug|user|commit|cve):`[^`]*`|by|and|thanks"
    r"|to)[\s,;]*)+\)|\s*:(?:issue|pr|gh|ghissue|ghpull|bug|commit|cve):`[^`]*`",
    re.I,
)
#: A Sphinx cross-reference: ``:meth:`~semver.version.Version.bump_build```.
_SPHINX_ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`<]*?)(?:\s*<[^`>]*>)?`")


def _role_text(m: re.Match) -> str:
    """A cross-reference as the rendered page shows it: ``~`` keeps the last name."""
    target = m.group(2).strip()
    return f"`{target.rsplit('.', 1)[-1] if m.group(1) else target}`"


def changelog_title(entry: str, limit: int = TITLE_CHARS) -> str:
    """The first line of a report made from a changelog entry: the maintainers' own words,
    as an issue's title (the entry's first sentence, without its references, leading
    ones such as ``:gh:`463`:`` too, a leading ``Fix`` or ``IMPORTANT:``, reST's double
    backticks and Sphinx roles (``:meth:`~a.B.c``` reads `` `c` ``); at most ``limit``
    characters)."""
    text = _LEADING_REFERENCE.sub("", " ".join(entry.replace("``", "`").split()))
    text = _SPHINX_REF.sub("", re.sub(r"^[A-Z]{3,}:\s*", "", text))
    text = _SPHINX_ROLE.sub(_role_text, text)
    text = _REFERENCE.sub("", _first_sentence(text)).strip().rstrip(".")
    head, sep, _ = text.partition("; ")  # what follows says what the fix does
    if sep and head.count("`") % 2 == 0:
        text = head
    if m := re.match(r"(?:Fix|Fixed|Fixes)\s+(?=\S)", text):
        text = text[m.end() :]
    text = text[:1].upper() + text[1:]
    return _cut(text, limit) or "A fix from the changelog"


def changelog_description(
    name: str, version: str, entry: str, limit: int = TITLE_CHARS, heading: str = ""
) -> str:
    """A statement from a changelog entry of ``version``: a title from the entry
    (:func:`changelog_title`, at most ``limit`` characters), then the entry, quoted, after a
    line that names the release and, when given, the sub-heading the entry sits under
    (which :func:`change_of` reads back)."""
    heading = " ".join(heading.replace('"', "'").split())
    under = f' (under "{heading}")' if heading else ""
    return (
        f"{changelog_title(entry, limit)}\n"
        f"The fix, as the changelog of `{name}` {version} describes it{under}:\n\n> {entry}\n\n"
        "This repository still has the bug. Fix the library code; the hidden tests check "
        "the behaviour described, and every other test of the package must keep "
        "passing.\n"
    )


#: What a reverted change is, when its changelog entry says (:func:`classify_change`).
CHANGES = ("bug", "performance", "feature", "deprecation")
_PERFORMANCE = re.compile(
    r"\b(speed(s|ed|ing)?[ -]up|faster|quicker|performance|optimi[sz]|slowness|"
    r"(in )?linear time|quadratic)\b",
    re.I,
)
_DEPRECATION = re.compile(r"\b(deprecat\w*|(drop|remove)[sd]? support)\b", re.I)
_FEATURE = re.compile(
    r"^(add(s|ed)?|support(s|ed)?|allow(s|ed)?|introduc\w*|implement(s|ed)?|expose[sd]?|"
    r"new|update[sd]? \S+ to support)\b|\bnow (allows?|supports?|accepts?)\b",
    re.I,
)


#: A kind an entry opens with, where a changelog tags each entry instead of grouping them
#: under sub-headings: ``[NEW]``, ``[FIX]``, ``**Bugfix**``, ``Fixed:``.
_ENTRY_TAG = re.compile(
    r"^\s*(?:\[([A-Za-z][A-Za-z -]*)\]|\*\*([A-Za-z][A-Za-z -]*)\*\*:?|([A-Z][A-Za-z]+):)\s"
)


def classify_change(entry: str, heading: str = "") -> str:
    """What a changelog entry says its change is: ``performance`` (speeds something up),
    ``deprecation``, ``feature`` (adds, supports or allows something new), or ``bug``
    (anything else: a fix of wrong behaviour, the kind of change a bug task reverts).
    The sub-heading the entry sits under decides when :func:`heading_kind` reads one of
    these from it (an entry under ``Features`` is a feature, one under ``Bug Fixes`` a
    bug, whatever their words), and so does a tag the entry opens with (arrow's
    ``[NEW]``, ``[FIX]``; wcwidth's ``**Bugfix**``). Else it is read from the entry's
    words alone, the title :func:`changelog_title` writes first: a maintainer who writes
    "Speed up membership tests" describes a performance change even when its tests also
    check behaviour."""
    kind = heading_kind(heading)
    if kind is not None and kind in CHANGES:
        return kind
    if tag := _ENTRY_TAG.match(entry):  # a tag says what a sub-heading would
        word = next(g for g in tag.groups() if g)
        kind = "feature" if word.strip().lower() == "new" else heading_kind(word)
        if kind in CHANGES:
            return kind
    title = changelog_title(entry, limit=10_000)
    if _PERFORMANCE.search(title):
        return "performance"
    if _DEPRECATION.search(title):
        return "deprecation"
    if _FEATURE.search(title):
        return "feature"
    return "bug"


#: The line before the quoted entry in :func:`changelog_description`, and the quote.
_QUOTED = re.compile(
    r'^The fix, as the changelog of (?:.*? \(under "(?P<heading>[^"\n]*)"\)|.*):\n\n'
    r"(?P<quote>(?:> .*\n?)+)",
    re.M,
)


#: A failure that says the older code lacks the interface the tests call: an argument it
#: does not take, a name its module does not have. Reverting such a change takes a
#: feature away; no behaviour of the old release was wrong.
_MISSING_API = re.compile(
    r"^- (TypeError: \S+\(\) (got an unexpected keyword argument|takes \d+ positional "
    r"arguments? but \d+ (were|was) given)|ImportError: cannot import name|"
    r"AttributeError: module '[^']+' has no attribute)"
)
#: The failures a statement written from the failing tests lists (group 1: one ``- `` line
#: each), as :func:`repogym.quality.synth_history.failure_description` writes them.
LISTED_FAILURES = re.compile(r"^Code that uses `[^`\n]*` fails with\n\n((?:- [^\n]*\n)+)", re.M)


#: A line a fix removes that said the code did not implement something yet.
_UNIMPLEMENTED = re.compile(r"^-\s*raise NotImplementedError\b", re.M)


def change_of(statement: str, gold: str = "") -> str:
    """:func:`classify_change` of the changelog entry a history task's statement quotes
    (:func:`changelog_description`), with the sub-heading its statement names, if any.
    A statement that quotes none is written from the failing tests, whose failures say
    nothing of the change's purpose (``bug``), unless every failure it lists says the
    older code lacks the interface the tests call (``TypeError: wrap() got an unexpected
    keyword argument 'term_program'``, an import of a name its module does not have): then
    the change added that interface (``feature``), or the fix, ``gold``, takes out a
    ``raise NotImplementedError`` (num2words 0.5.8 gave Russian an ordinal: the older
    release did not implement it, which is no bug)."""
    m = _QUOTED.search(statement)
    if m is None:
        if _UNIMPLEMENTED.search(gold):
            return "feature"
        listed = LISTED_FAILURES.search(statement)
        lines = listed[1].splitlines() if listed else []
        return "feature" if lines and all(_MISSING_API.match(x) for x in lines) else "bug"
    entry = " ".join(line[2:] for line in m["quote"].splitlines())
    return classify_change(entry, m["heading"] or "")


def write_task(
    task: HistoryTask, out: Path, decoys: Callable[[Path, list[str]], dict[str, str]] | None = None
) -> Path:
    """Write ``task`` as a task folder ``out/<id>`` (replacing one that is there).

    Args:
        task: What to write.
        out: The parent folder.
        decoys: ``(root with the tests, fail_to_pass) -> {name: patch}`` (e.g. the
            test-deletion decoys of :func:`repogym.scenarios.synth.deletion_decoys`).
    """
    root = out / task.id
    if root.exists():
        shutil.rmtree(root)
    hidden = set(task.test_files)

    def ignore(folder: str, names: list[str]) -> set[str]:
        rel = Path(folder).relative_to(task.repo)
        # what a suite's fetch leaves out of the same sdist (compiled files, build
        # output, file lists; the project's metadata stays): the task graded here is the
        # one a suite serves
        return {
            n for n in names if str(rel / n) in hidden or pypi.is_artefact((rel / n).as_posix())
        }

    shutil.copytree(task.repo, root / "repo", ignore=ignore)
    for rel, text in task.reverted.items():
        (root / "repo" / rel).write_text(text, encoding="utf-8")
    for rel in task.test_files:
        dest = (
            root
            / "tests"
            / (rel if task.tests_dest == "." else os.path.relpath(rel, task.tests_dest))
        )
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(task.repo / rel, dest)
    (root / "solution.patch").write_text(task.gold)
    (root / "decoys").mkdir()
    for name, patch in (decoys(task.repo, task.fail_to_pass) if decoys else {}).items():
        (root / "decoys" / name).write_text(patch)
    if task.reproduction:
        (root / "reproduction.py").write_text(task.reproduction.rstrip() + "\n")
    (root / "STATEMENT.md").write_text(task.statement)
    (root / "task.toml").write_text(_toml(task))
    return root


def _toml(task: HistoryTask) -> str:
    ini = ""
    if task.ini_options:
        ini = "\n[verifier.ini_options]\n" + "".join(
            f"{k} = {json.dumps(v)}\n" for k, v in sorted(task.ini_options.items())
        )
    env = "\n" + task.environment.to_toml() if task.environment else ""
    tags = json.dumps(["history", *task.tags])
    fn = task.function
    also = (
        f"also = {json.dumps([f'{f.file}::{f.qualname}' for f in task.also])}\n"
        if task.also
        else ""
    )
    return f"""# Made by `repogym history`: {task.name} {task.fixed} with {fn.file}::{fn.qualname}
# as it was in {task.base} (the id and tags are shown to agents: they name no function).
id = "{task.id}"
version = 0
statement_file = "STATEMENT.md"
split = "train"
tags = {tags}
max_steps = 30

[verifier]
tests_dest = "{task.tests_dest}"
command = "python -m pytest -q -p no:cacheprovider"
timeout_s = 300
fail_to_pass = {json.dumps(task.fail_to_pass)}
pass_to_pass = {json.dumps(task.pass_to_pass)}
{ini}
[history]
package = {json.dumps(task.name)}
base = {json.dumps(task.base)}
fixed = {json.dumps(task.fixed)}
file = {json.dumps(fn.file)}
function = {json.dumps(fn.qualname)}
{also}statement_source = {json.dumps(task.statement_source)}
{env}"""
