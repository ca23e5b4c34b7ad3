"""Task synthesis by mutation (SWE-smith style): many tasks from one tested package.

:func:`synthesize` takes a local Python package with its own pytest tests, applies one AST
mutation at a time to its functions (flipped comparison, off-by-one constant, dropped
``None``/empty guard, swapped call arguments, wrong default), runs the package's tests
with plain ``subprocess`` pytest (the package is the user's own, trusted code) and keeps a
mutant when at least one test fails and every other test still passes. Each kept mutant
becomes a task folder:

- ``repo/``: the package with the mutant, without its test files (those are hidden);
- ``tests/``: the package's tests (``tests_dest`` by the rule of
  :func:`repogym.scenarios.swebench.hidden_tests_dest`);
- ``fail_to_pass``: the failing tests; ``pass_to_pass``: a seeded sample of the rest;
- ``solution.patch``: the reverse diff (mutant -> original);
- ``decoys/``: the test-gaming fix (the failing tests deleted) and, when one exists, a
  wrong fix at the same place that still fails a test;
- ``STATEMENT.md``: the failing tests and their assertion messages, never the fix.

Emitted tasks should then be checked with ``repogym validate`` (real sandbox).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from repogym.envs.grader import is_test_file, junit_key
from repogym.scenarios.swebench import hidden_tests_dest

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".git", "*.egg-info")
_FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
         ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
         ast.In: ast.NotIn, ast.NotIn: ast.In}


class SynthError(ValueError):
    """The package cannot be used for synthesis; the message says why and how to fix it."""


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One single-site mutation of one source file.

    Attributes:
        file: Path relative to the package root.
        function: The enclosing function's name.
        operator: ``flip_compare``, ``off_by_one``, ``drop_guard``, ``swap_args`` or
            ``wrong_default``.
        lineno: First line of the mutated code.
        source: The whole mutated file.
    """

    file: str
    function: str
    operator: str
    lineno: int
    source: str


# -- mutations ----------------------------------------------------------------------------
def _replace_span(source: str, node: ast.AST, text: str) -> str:
    lines = source.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: node.lineno - 1]) + _col(lines, node.lineno,
                                                                      node.col_offset)
    end = sum(len(line) for line in lines[: node.end_lineno - 1]) + _col(
        lines, node.end_lineno, node.end_col_offset)
    return source[:start] + text + source[end:]


def _col(lines: list[str], lineno: int, byte_col: int) -> int:
    """AST columns are UTF-8 byte offsets; convert to a character offset."""
    return len(lines[lineno - 1].encode()[:byte_col].decode(errors="ignore"))


def _is_guard(test: ast.expr) -> bool:
    """``x is None``, ``x is not None``, ``not x``, ``len(x) == 0`` and the like."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        right = test.comparators[0]
        if isinstance(test.ops[0], ast.Is | ast.IsNot) and isinstance(right, ast.Constant) \
                and right.value is None:
            return True
        left = test.left
        return (isinstance(left, ast.Call) and isinstance(left.func, ast.Name)
                and left.func.id == "len" and isinstance(right, ast.Constant)
                and right.value == 0)
    return False


def _expr_mutations(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(operator, mutated copy) for an expression node."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP:
        new = copy.deepcopy(node)
        new.ops = [_FLIP[type(node.ops[0])]()]
        yield "flip_compare", new
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        for side in ("left", "right"):
            c = getattr(node, side)
            if isinstance(c, ast.Constant) and type(c.value) is int:
                new = copy.deepcopy(node)
                getattr(new, side).value = c.value + 1
                yield "off_by_one", new
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "range" and node.args and not node.keywords:
        new = copy.deepcopy(node)
        last = new.args[-1] if len(new.args) > 1 else new.args[0]
        idx = len(new.args) - 1 if len(new.args) > 1 else 0
        new.args[idx] = ast.BinOp(last, ast.Sub(), ast.Constant(1))
        yield "off_by_one", new
    if isinstance(node, ast.Call) and len(node.args) >= 2 and not any(
            isinstance(a, ast.Starred) for a in node.args[:2]) and \
            ast.dump(node.args[0]) != ast.dump(node.args[1]):
        new = copy.deepcopy(node)
        new.args[0], new.args[1] = new.args[1], new.args[0]
        yield "swap_args", new


def _wrong_default(c: ast.expr) -> str | None:
    if not isinstance(c, ast.Constant):
        return None
    v = c.value
    if isinstance(v, bool):
        return repr(not v)
    if isinstance(v, int | float):
        return repr(v + 1)
    if isinstance(v, str):
        return repr(v + "x") if not v else repr("")
    return None


def mutants_of(source: str, file: str) -> Iterator[Mutant]:
    """Every single-site mutant of one module's functions (only those that compile)."""
    tree = ast.parse(source)
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        candidates: list[tuple[str, ast.AST, str]] = []
        for d in fn.args.defaults + [k for k in fn.args.kw_defaults if k is not None]:
            text = _wrong_default(d)
            if text is not None:
                candidates.append(("wrong_default", d, text))
        for node in [fn, *(n for stmt in fn.body for n in ast.walk(stmt))]:
            if node is not fn:
                for op, new in _expr_mutations(node):
                    candidates.append((op, node, ast.unparse(new)))
            for body in ("body", "orelse"):
                block = getattr(node, body, None)
                if isinstance(block, list) and len(block) > 1:
                    for s in block:
                        if isinstance(s, ast.If) and not s.orelse and _is_guard(s.test):
                            candidates.append(("drop_guard", s, "pass"))
        yield from _compiled(source, file, fn.name, candidates)


def _compiled(source: str, file: str, function: str,
              candidates: list[tuple[str, ast.AST, str]]) -> Iterator[Mutant]:
    seen = set()
    for op, node, text in candidates:
        new = _replace_span(source, node, text)
        if new == source or new in seen:
            continue
        try:
            compile(new, file, "exec")
        except SyntaxError:
            continue
        seen.add(new)
        yield Mutant(file, function, op, node.lineno, new)


# -- running the package's tests ----------------------------------------------------------
def run_tests(root: Path, node_ids: list[str],
              timeout_s: float) -> tuple[dict[str, str], dict[str, str]]:
    """(node id -> passed/failed/error/skipped/missing, node id -> failure message), from a
    plain pytest subprocess."""
    with tempfile.TemporaryDirectory(prefix="repogym-synth-") as tmp:
        report = Path(tmp) / "junit.xml"
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            f"--junitxml={report}"], cwd=root, env=env, capture_output=True,
                           timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return dict.fromkeys(node_ids, "error"), {}
        cases, messages = _parse(report)
    return ({t: cases.get(junit_key(t), "missing") for t in node_ids},
            {t: messages.get(junit_key(t), "") for t in node_ids})


def _parse(report: Path) -> tuple[dict, dict]:
    cases, messages = {}, {}
    if not report.is_file():
        return cases, messages
    for case in ET.parse(report).getroot().iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
                messages[key] = child.get("message", "")
        cases.setdefault(key, status)
    return cases, messages


def collect(root: Path, timeout_s: float) -> list[str]:
    """The package's pytest node ids."""
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider"], cwd=root, capture_output=True, text=True,
                         timeout=timeout_s, check=False,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    ids = [line.strip() for line in res.stdout.splitlines() if "::" in line]
    if not ids:
        raise SynthError(f"{root}: pytest collected no tests ({res.stdout[-500:]}). Fix: "
                         "give a package folder whose tests run with `python -m pytest` there")
    return ids


# -- writing tasks ------------------------------------------------------------------------
def _git_diff(before: Path, rel: str, after_source: str) -> str:
    """A git diff turning ``before/rel`` into ``after_source`` (``before`` is not changed)."""
    with tempfile.TemporaryDirectory(prefix="repogym-diff-") as tmp:
        env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
               "HOME": tmp, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        a.mkdir()
        b.mkdir()
        shutil.copy2(before / rel, a / "f")
        (b / "f").write_text(after_source)
        res = subprocess.run(["git", "diff", "--no-index", "--no-color", "--no-prefix",
                              "a/f", "b/f"],
                             cwd=tmp, env=env, capture_output=True, text=True, check=False)
    return re.sub(r"\b[ab]/f\b", lambda m: m.group(0)[:2] + rel, res.stdout)


def _statement(package: str, failing: list[str], messages: dict[str, str]) -> str:
    lines = [f"Some behaviour of `{package}` is broken: these tests fail.", ""]
    for t in failing:
        msg = " ".join(messages.get(t, "").split())[:300]
        lines.append(f"- `{t}`" + (f": {msg}" if msg else ""))
    lines += ["", ("Fix the library code so that they pass; the tests themselves are correct, "
              "and every other test must keep passing.")]
    return "\n".join(lines) + "\n"


def _toml(task_id: str, mutant: Mutant, dest: str, f2p: list[str], p2p: list[str]) -> str:
    q = '", "'
    return f"""# Synthesised by `repogym synth` (mutation {mutant.operator} in {mutant.function}).
id = "{task_id}"
version = 0
statement_file = "STATEMENT.md"
split = "train"
tags = ["synthetic", "{mutant.operator}"]
max_steps = 30

[verifier]
tests_dest = "{dest}"
command = "python -m pytest -q -p no:cacheprovider"
timeout_s = 120
fail_to_pass = ["{q.join(f2p)}"]
pass_to_pass = [{('"' + q.join(p2p) + '"') if p2p else ""}]
"""


@dataclasses.dataclass
class _Package:
    root: Path
    name: str
    node_ids: list[str]
    test_files: list[str]
    dest: str
    sources: list[str]


def _scan(root: Path, timeout_s: float) -> _Package:
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if "__pycache__" not in p.parts)
    test_files = [f for f in files if is_test_file(f) or Path(f).name == "conftest.py"]
    if not test_files:
        raise SynthError(f"{root}: no test files (test_*.py). Fix: give a package with tests")
    dest = hidden_tests_dest(test_files)
    hidden = (lambda f: f in test_files) if dest == "." else (
        lambda f: f == dest or f.startswith(dest + "/"))
    sources = [f for f in files if not hidden(f)]
    return _Package(root, root.name, collect(root, timeout_s), test_files if dest == "." else
                    [f for f in files if hidden(f)], dest, sources)


def synthesize(package_dir: str | Path, out: str | Path, *, max_tasks: int = 10,
               seed: int = 0, p2p_sample: int = 20, max_trials: int | None = None,
               timeout_s: float = 120.0) -> list[Path]:
    """Write up to ``max_tasks`` task folders made by mutating ``package_dir``.

    Args:
        package_dir: A folder whose tests pass with ``python -m pytest`` run inside it.
        out: Where task folders are written (``<package>-<function>-<operator>-<line>``).
        max_tasks: Stop after this many kept mutants.
        seed: Seeds the order mutants are tried in and the pass_to_pass sample.
        p2p_sample: Largest pass_to_pass list.
        max_trials: Mutants to try at most (default ``20 * max_tasks``).
        timeout_s: Limit for one test run.

    Returns:
        The task folders written.

    Raises:
        SynthError: the package has no tests, or they do not all pass unmutated.
    """
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="repogym-synth-"))
    try:
        shutil.copytree(Path(package_dir).resolve(), work / "pkg", ignore=_IGNORE)
        pkg = _scan(work / "pkg", timeout_s)
        pkg.name = Path(package_dir).resolve().name
        base, _ = run_tests(pkg.root, pkg.node_ids, timeout_s)
        broken = [t for t, s in base.items() if s != "passed"]
        if broken:
            raise SynthError(f"{package_dir}: tests fail before any mutation: {broken[:5]}. "
                             "Fix: synthesise from a package whose tests all pass")
        mutants = [m for f in pkg.sources for m in mutants_of((pkg.root / f).read_text(), f)]
        rng.shuffle(mutants)
        return _keep(pkg, mutants, Path(out), rng, max_tasks, p2p_sample,
                     max_trials or 20 * max_tasks, timeout_s)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _try(pkg: _Package, m: Mutant, timeout_s: float) -> tuple[dict[str, str], dict]:
    path = pkg.root / m.file
    original = path.read_text()
    path.write_text(m.source)
    try:
        return run_tests(pkg.root, pkg.node_ids, timeout_s)
    finally:
        path.write_text(original)


def _keep(pkg: _Package, mutants: list[Mutant], out: Path, rng: random.Random,
          max_tasks: int, p2p_sample: int, max_trials: int, timeout_s: float) -> list[Path]:
    written: list[Path] = []
    used: set[tuple[str, str]] = set()
    for m in mutants[:max_trials]:
        if len(written) >= max_tasks:
            break
        if (m.file, m.function) in used:
            continue
        result, messages = _try(pkg, m, timeout_s)
        failing = [t for t, s in result.items() if s != "passed"]
        passing = [t for t, s in result.items() if s == "passed"]
        if not failing or not passing or any(result[t] == "missing" for t in failing):
            continue
        used.add((m.file, m.function))
        p2p = sorted(rng.sample(passing, min(p2p_sample, len(passing))))
        written.append(_write(pkg, m, out, failing, p2p, messages, mutants, timeout_s))
    return written


def _write(pkg: _Package, m: Mutant, out: Path, f2p: list[str], p2p: list[str],
           messages: dict, mutants: list[Mutant], timeout_s: float) -> Path:
    task_id = re.sub(r"[^a-z0-9._-]", "-", f"{pkg.name}-{m.function}-{m.operator}-{m.lineno}"
                     .lower()).strip("-")
    root = out / task_id
    if root.exists():
        shutil.rmtree(root)
    hidden = set(pkg.test_files)
    shutil.copytree(pkg.root, root / "repo", ignore=lambda d, names: [
        n for n in names if str((Path(d) / n).relative_to(pkg.root)) in hidden
        or n in ("__pycache__", ".pytest_cache")])
    (root / "repo" / m.file).write_text(m.source)
    (root / "tests").mkdir()
    for f in pkg.test_files:
        rel = f if pkg.dest == "." else os.path.relpath(f, pkg.dest)
        (root / "tests" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(pkg.root / f, root / "tests" / rel)
    original = (pkg.root / m.file).read_text()
    (root / "solution.patch").write_text(_git_diff(root / "repo", m.file, original))
    (root / "decoys").mkdir()
    _write_decoys(pkg, m, root, f2p, f2p + p2p, mutants, timeout_s)
    (root / "STATEMENT.md").write_text(_statement(pkg.name, f2p, messages))
    (root / "task.toml").write_text(_toml(task_id, m, pkg.dest, f2p, p2p))
    return root


def _write_decoys(pkg: _Package, m: Mutant, root: Path, f2p: list[str], listed: list[str],
                  mutants: list[Mutant], timeout_s: float) -> None:
    """The failing tests deleted (test gaming), and a wrong fix at the same place if any."""
    by_file: dict[str, list[str]] = {}
    for t in f2p:
        by_file.setdefault(t.split("::")[0], []).append(t.split("::")[-1].split("[")[0])
    for n, (file, names) in enumerate(sorted(by_file.items())):
        text = (pkg.root / file).read_text()
        tree = ast.parse(text)
        kept = [s for s in tree.body if not (isinstance(s, ast.FunctionDef | ast.ClassDef)
                                             and s.name in names)]
        tree.body = kept
        patch = _new_file_diff(file, ast.unparse(tree) + "\n")
        (root / "decoys" / f"delete_failing_tests_{n}.patch").write_text(patch)
    for other in mutants:
        if other.file != m.file or other.function != m.function or other.source == m.source:
            continue
        if other.lineno != m.lineno:
            continue
        result, _ = _try(pkg, other, timeout_s)
        if any(result[t] != "passed" for t in listed):
            (root / "decoys" / "wrong_fix.patch").write_text(
                _git_diff(root / "repo", m.file, other.source))
            return


def _new_file_diff(rel: str, text: str) -> str:
    """A diff that creates (or, applied over the hidden copy, replaces) a test file."""
    body = "".join("+" + line for line in text.splitlines(keepends=True))
    n = len(text.splitlines())
    return (f"diff --git a/{rel} b/{rel}\nnew file mode 100644\n--- /dev/null\n+++ b/{rel}\n"
            f"@@ -0,0 +1,{n} @@\n{body}")
