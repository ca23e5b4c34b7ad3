"""``apr``: a search-based program-repair baseline (no model), for measuring difficulty.

The agent reads the reproduction script of the task's bug report (the fenced ``python``
block under a line ``Reproduction:`` in the first observation), and then acts only through
the env's tools, as any agent does:

1. ``write`` the reproduction and a small helper (``repogym/scenarios/probe/rg_apr.py``, standard
   library only) to ``/tmp/rg-apr/`` in the sandbox;
2. ``bash``: the helper runs the reproduction once plainly and once under a tracer, and
   reports the traceback's frames in repository files, the repository functions called
   (most recent last call first), the lines that ran and those files' text;
3. here, outside the sandbox, the functions at the traceback's frames (innermost first),
   then the other functions called, are mutated with repogym's mutation library
   (:func:`repogym.scenarios.mutation.mutants`: its operators flip comparisons, operators,
   constants, conditions, exceptions and arguments, so they undo the bugs those operators
   make); only sites on lines that ran are kept (a change elsewhere cannot change the run);
4. ``write`` the edit sets (every single edit, then pairs of the first ``double_pool``
   singles) and ``bash`` the helper's search: it applies one set at a time, runs the
   reproduction, undoes the set, and leaves the first one with which the reproduction exits
   0 applied (with ``check_tests``, one that also breaks none of the repository's own
   tests that passed before; a suite slower than 30 s is not run);
5. ``submit``.

The search is bounded by ``max_edits`` (edit sets tried), ``max_seconds`` (its wall time)
and the episode's step budget. ``stop_reason`` says why an episode ended without a repair
(``no_reproduction``, ``reproduction_passes``, ``reproduction_broken`` (it ran no
repository code: the package did not import), ``no_candidates``, ``search_exhausted``,
``search_budget``, ``step_budget``, ``helper_failed``); ``repair`` describes the edit set
found. A task the agent resolves is ``trivial`` (:mod:`repogym.quality.tiers`).
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import hashlib
import json
import re
import time
import zlib
from collections.abc import Generator
from pathlib import Path
from typing import Any

import repogym.scenarios
from repogym.harness.baselines.base import AgentConfigError, tool_call
from repogym.scenarios.history import source_lines
from repogym.scenarios.mutation import Mutant, mutants, touched_functions

HOME = "/tmp/rg-apr"
HELPER = Path(repogym.scenarios.__file__).resolve().parent / "probe" / "rg_apr.py"
SUBMIT = tool_call("submit")
#: The reproduction block of a bug report (the shared statement format).
REPRODUCTION = re.compile(
    r"^Reproduction:[ \t]*\n\s*```python[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL
)
_CHUNK = re.compile(r"^RGAPR-CHUNK (\d+) (\d+) (\S*)$", re.MULTILINE)
_RESULT = re.compile(r"^RGAPR (\{.*\})$", re.MULTILINE)
#: The order edits are tried in, by operator: a token replaced first, then a condition
#: inverted or narrowed, and code deleted last (a deletion often silences a reproduction
#: without fixing the bug).
OPERATOR_CLASS = {
    "compare": 0,
    "arith_op": 0,
    "bool_op": 0,
    "constant": 0,
    "exception_type": 0,
    "swap_args": 0,
    "wrong_default": 0,
    "invert_condition": 1,
    "drop_condition": 1,
    "drop_guard": 2,
    "drop_statement": 2,
    "remove_call": 2,
    "return_value": 2,
}
#: Largest candidates file written in one action (the action limit is 256 KiB).
_MAX_SPEC_CHARS = 200_000


def reproduction_of(statement: str) -> str | None:
    """The reproduction script in a statement, or None when it has none."""
    m = REPRODUCTION.search(statement)
    return m.group(1) if m else None


@dataclasses.dataclass(frozen=True)
class Edit:
    """One single-site change of one file: ``text[start:end]`` becomes ``new``.

    Attributes:
        file: The file, relative to the repository root.
        start: Start offset (characters).
        end: End offset of the replaced text.
        new: What replaces it.
        mutant: The mutant's id (file, function, operator, variant, position).
        operator: The mutation operator.
        rank: The rank of its function (0: the innermost traceback frame).
        root: The outermost function holding the edit (``Class.method``, ``function``):
            the one whose code the sandbox helper swaps to try the edit without writing it.
    """

    file: str
    start: int
    end: int
    new: str
    mutant: str
    operator: str
    rank: int
    root: str = ""

    def overlaps(self, other: Edit) -> bool:
        return self.file == other.file and self.start <= other.end and other.start <= self.end


def _diff(a: str, b: str) -> tuple[int, int, str]:
    """(start, end, new): the smallest replacement of ``a[start:end]`` that makes ``b``."""
    i, limit = 0, min(len(a), len(b))
    while i < limit and a[i] == b[i]:
        i += 1
    j = 0
    while j < limit - i and a[len(a) - 1 - j] == b[len(b) - 1 - j]:
        j += 1
    return i, len(a) - j, b[i : len(b) - j]


def _scopes(tree: ast.Module, qualname: str) -> list[tuple[list[ast.ClassDef], ast.AST]]:
    """(the classes around it, the outermost function on its path) for each definition of
    ``qualname`` (a name defined twice, e.g. ``typing.overload`` stubs, has several)."""
    out = []

    def walk(node: ast.AST, parts: list[str], classes: list[ast.ClassDef]) -> None:
        for child in getattr(node, "body", []):
            if (
                not isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                or child.name != parts[0]
            ):
                continue
            if not isinstance(child, ast.ClassDef):
                out.append((classes, child))
            elif len(parts) > 1:
                walk(child, parts[1:], [*classes, child])

    walk(tree, qualname.split("."), [])
    return out


def function_mutants(source: str, file: str, qualname: str) -> list[tuple[Mutant, Edit]]:
    """Every mutant of one function of ``source``, as (the mutant, its :class:`Edit` of
    ``source``; rank 0). The mutants are made on the function's own text under its classes'
    headers, so each costs the size of the function, not of the module; ``Mutant.line`` is
    a line of ``source`` and ids are those of the whole module's mutants."""
    lines = source_lines(source)
    out = []
    for classes, fn in _scopes(ast.parse(source), qualname):
        first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        last = fn.end_lineno or fn.lineno
        header = "".join(_indent(lines[c.lineno - 1]) + f"class {c.name}:\n" for c in classes)
        body = "".join(lines[first - 1 : last])
        mini = header + body + ("" if body.endswith("\n") else "\n")
        shift_lines = first - 1 - len(classes)
        root = ".".join([*(c.name for c in classes), fn.name])
        base = sum(len(x) for x in lines[: first - 1]) - len(header)
        try:
            found = mutants(mini, file, functions={qualname})
        except Exception:  # libcst cannot parse it alone: the whole module
            return [
                (m, Edit(file, *_diff(source, m.source), m.id, m.operator, 0, root))
                for m in mutants(source, file, functions={qualname})
            ]
        for m in found:
            start, end, new = _diff(mini, m.source)
            if start >= len(header):
                m = dataclasses.replace(m, line=m.line + shift_lines, source="")
                out.append(
                    (m, Edit(file, start + base, end + base, new, m.id, m.operator, 0, root))
                )
    return out


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def executed_lines(source: str, ran: set[int]) -> set[int]:
    """``ran`` widened to whole statements: a statement (a compound one's header) one of
    whose lines ran counts as run on every line, so an edit anchored on any of them is
    kept."""
    out = set(ran)
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt):
            continue
        end = node.end_lineno or node.lineno
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.AST):
            end = max(node.lineno, body[0].lineno - 1)  # the header only
        span = set(range(node.lineno, end + 1))
        if span & ran:
            out |= span
    return out


def ranked_functions(report: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    """(file, function, focus line) to mutate, most suspicious first: the traceback's
    frames in repository files, innermost first, then the other repository functions the
    reproduction called, most recently called first."""
    sources = report.get("sources", {})
    out: list[tuple[str, str, int | None]] = []
    seen: set[tuple[str, str]] = set()

    def add(file: str, line: int, focus: int | None) -> None:
        if file not in sources:
            return
        try:
            names = touched_functions(sources[file], [line])
        except SyntaxError:
            return
        for name in sorted(names)[:1] if len(names) == 1 else []:
            if (file, name) not in seen:
                seen.add((file, name))
                out.append((file, name, focus))

    for file, line, name in reversed(report.get("frames", [])):
        if name != "<module>":
            add(file, line, line)
    for file, first_line, name, *_ in report.get("calls", []):
        if name != "<module>":
            add(file, first_line, None)
    return out


def plan(
    report: dict[str, Any], *, max_functions: int, max_edits: int, double_pool: int
) -> tuple[list[Edit], list[list[int]]]:
    """The single edits and the edit sets to try, in order: singles (by
    :data:`OPERATOR_CLASS`, then function rank, then distance from the frame's line), then
    pairs of the first ``double_pool`` singles."""
    sources: dict[str, str] = report.get("sources", {})
    ran = {f: set(v) for f, v in report.get("lines", {}).items()}
    targets = ranked_functions(report)[:max_functions]
    edits: list[Edit] = []
    seen: set[tuple[str, int, int, str]] = set()
    for rank, (file, name, _) in enumerate(targets):
        live = executed_lines(sources[file], ran.get(file, set()))
        for m, edit in function_mutants(sources[file], file, name):
            key = (edit.file, edit.start, edit.end, edit.new)
            if m.line in live and key not in seen:
                seen.add(key)
                edits.append(dataclasses.replace(edit, rank=rank))
    anchors = {rank: focus for rank, (_, _, focus) in enumerate(targets)}

    def order(e: Edit) -> tuple[int, int, int, int]:
        anchor = anchors[e.rank]
        line = sources[e.file].count("\n", 0, e.start) + 1
        return (
            OPERATOR_CLASS.get(e.operator, 2),
            e.rank,
            abs(line - anchor) if anchor else 0,
            e.start,
        )

    edits.sort(key=order)
    edits = edits[:max_edits]
    sets: list[list[int]] = [[i] for i in range(len(edits))]
    pool = min(double_pool, len(edits))
    for b in range(pool):
        for a in range(b):
            if len(sets) >= max_edits:
                return edits, sets
            if not edits[a].overlaps(edits[b]):
                sets.append([a, b])
    return edits, sets


class AprAgent:
    """Search-based program repair (no model): mutations at the reproduction's frames.

    Single then double edits of repogym's mutation library on the functions of the
    reproduction's traceback (then the functions it called), checked against the
    reproduction script in the sandbox.

    Args:
        max_edits: Edit sets tried at most (single edits and pairs together).
        max_seconds: Wall time of the search, in seconds.
        max_functions: Functions mutated (the traceback's first, then the ones called).
        double_pool: Pairs are made of the first this many single edits.
        chunk_s: Longest search command in seconds (below the sandbox's command limit).
        run_timeout_s: Limit of one reproduction run (default: 10x its first run, >= 2s).
        check_tests: Also run the repository's own tests, where it has some, before
            accepting an edit set.
    """

    def __init__(
        self,
        max_edits: int = 2000,
        max_seconds: float = 600.0,
        max_functions: int = 12,
        double_pool: int = 60,
        chunk_s: float = 40.0,
        run_timeout_s: float | None = None,
        check_tests: bool = True,
    ) -> None:
        for name, value in (
            ("max_edits", max_edits),
            ("max_seconds", max_seconds),
            ("max_functions", max_functions),
            ("chunk_s", chunk_s),
        ):
            if not value > 0:
                raise AgentConfigError(
                    f"apr: {name}={value!r} must be positive. Fix: pass "
                    f"--agent-arg {name}=N with N > 0"
                )
        if double_pool < 0:
            raise AgentConfigError(
                f"apr: double_pool={double_pool!r} must be >= 0 (0: singles "
                "only). Fix: pass --agent-arg double_pool=N"
            )
        self.max_edits, self.max_seconds = max_edits, max_seconds
        self.max_functions, self.double_pool = max_functions, double_pool
        self.chunk_s, self.run_timeout_s, self.check_tests = chunk_s, run_timeout_s, check_tests
        self.stop_reason: str | None = None
        self.repair: list[str] | None = None
        self.tried = 0
        self._steps = 0
        self._max_steps: int | None = None
        self._gen: Generator[str, str, None] | None = None

    def reset(self, task_info: dict[str, Any]) -> None:
        """Start an episode: nothing is known until the first observation."""
        self.stop_reason, self.repair, self.tried, self._steps = None, None, 0, 0
        self._max_steps = task_info.get("max_steps")
        self._gen = self._episode()
        next(self._gen)

    def act(self, observation: str) -> str:
        """The next tool call of the search (``submit`` once it is over)."""
        self._steps += 1
        if self._gen is None:
            return SUBMIT
        if self._max_steps and self._steps >= self._max_steps:
            self._gen = None
            self.stop_reason = self.stop_reason or "step_budget"
            return SUBMIT
        try:
            return self._gen.send(observation)
        except StopIteration:
            self._gen = None
            return SUBMIT

    # -- the episode, as a coroutine: it yields actions and receives observations ---------
    def _episode(self) -> Generator[str, str, None]:
        obs = yield ""
        script = reproduction_of(obs)
        if script is None:
            self.stop_reason = "no_reproduction"
            return
        yield tool_call("write", path=f"{HOME}/reproduction.py", content=script)
        yield tool_call("write", path=f"{HOME}/rg_apr.py", content=HELPER.read_text())
        report = yield from self._report(f"python -B {HOME}/rg_apr.py trace")
        if report is None:
            return
        if report.get("exit_code") == 0:
            self.stop_reason = "reproduction_passes"
            return
        if not report.get("sources"):  # e.g. the package did not import: nothing to search
            self.stop_reason = f"reproduction_broken: {report.get('error') or 'no code ran'}"
            return
        edits, sets = plan(
            report,
            max_functions=self.max_functions,
            max_edits=self.max_edits,
            double_pool=self.double_pool,
        )
        if not sets:
            self.stop_reason = "no_candidates"
            return
        spec = self._spec(report["sources"], edits, sets)
        yield tool_call("write", path=f"{HOME}/candidates.json", content=spec[0])
        sets = sets[: spec[1]]
        yield from self._search(edits, sets, report)

    def _report(self, command: str) -> Generator[str, str, dict | None]:
        obs = yield tool_call("bash", command=command)
        pieces: dict[int, str] = {}
        while True:
            m = _CHUNK.search(obs)
            if m is None:
                self.stop_reason = f"helper_failed: {obs.strip()[-300:]}"
                return None
            n, total = int(m.group(1)), int(m.group(2))
            pieces[n] = m.group(3)
            if len(pieces) >= total:
                break
            obs = yield tool_call("bash", command=f"python -B {HOME}/rg_apr.py chunk {n + 1}")
        blob = "".join(pieces[i] for i in range(len(pieces)))
        return json.loads(zlib.decompress(base64.b64decode(blob)))

    def _spec(
        self, sources: dict[str, str], edits: list[Edit], sets: list[list[int]]
    ) -> tuple[str, int]:
        """The candidates file (as small as fits in one action) and how many sets it has."""
        used = sorted({e.file for e in edits})
        files = {f: hashlib.sha256(sources[f].encode("utf-8")).hexdigest() for f in used}
        rows = [[e.file, e.start, e.end, e.new, e.root, e.operator] for e in edits]
        n = len(sets)
        while True:
            text = json.dumps({"files": files, "edits": rows, "sets": sets[:n]})
            if len(text) <= _MAX_SPEC_CHARS or n <= 1:
                return text, n
            n = n * 3 // 4

    def _search(
        self, edits: list[Edit], sets: list[list[int]], report: dict[str, Any]
    ) -> Generator[str, str, None]:
        timeout = self.run_timeout_s or max(2.0, 10 * float(report.get("duration_s") or 0.2))
        tests = " tests" if self.check_tests and report.get("test_files") else ""
        deadline, chunk, nxt = time.monotonic() + self.max_seconds, self.chunk_s, 0
        while nxt < len(sets):
            if time.monotonic() >= deadline or self.tried >= self.max_edits:
                self.stop_reason = f"search_budget: {self.tried} of {len(sets)} edit sets tried"
                return
            seconds = max(1.0, min(chunk, deadline - time.monotonic()))
            obs = yield tool_call(
                "bash",
                command=(
                    f"python -B {HOME}/rg_apr.py search {nxt} {seconds:.0f} {timeout:.1f}{tests}"
                ),
            )
            m = _RESULT.search(obs)
            if m is None:
                if "timed out" in obs and chunk > 2 * timeout:
                    chunk /= 2  # the sandbox's command limit is shorter than chunk_s
                    continue
                self.stop_reason = f"helper_failed: {obs.strip()[-300:]}"
                return
            result = json.loads(m.group(1))
            self.tried += int(result["next"]) - nxt
            nxt = int(result["next"])
            if "found" in result:
                self.repair = [edits[k].mutant for k in sets[int(result["found"])]]
                return
        self.stop_reason = f"search_exhausted: {len(sets)} edit sets tried"
