"""`repogym synth` makes valid tasks from a small tested package (tests/scenarios/data)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from repogym.grading.grader import split_diff
from repogym.quality.validate import validate_tasks
from repogym.scenarios import bug_reports
from repogym.scenarios.synth import SynthError, Synthesis, synthesize
from repogym.scenarios.task import load_tasks

PACKAGE = Path(__file__).parent / "data" / "textstats"
REPRS = Path(__file__).parent / "data" / "reprs"


@pytest.fixture(scope="module")
def synthesised(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    folders = synthesize(PACKAGE, out, max_tasks=3, seed=0)
    return folders, load_tasks(out)


def test_emitted_tasks_validate_in_the_sandbox(synthesised):
    folders, tasks = synthesised
    assert len(folders) == len(tasks) == 3
    reports = validate_tasks(tasks, reruns=1, workers=2)
    failures = [p for r in reports for p in r.failures]
    assert not failures, failures
    assert all(any(c.kind == "decoy" for c in r.checks) for r in reports)


def test_emitted_task_contents(synthesised):
    _, tasks = synthesised
    for task in tasks:
        v = task.test_spec
        assert v.fail_to_pass and v.pass_to_pass and v.p2p_scope == "all"
        assert not set(v.fail_to_pass) & set(v.pass_to_pass)
        assert len(v.fail_to_pass) + len(v.pass_to_pass) == 13  # every test of the package
        assert not list(task.repo_dir.rglob("test_*.py"))  # the tests are hidden
        assert (task.tests_dir / "test_textstats.py").is_file()
        gold = task.solution_patch.read_text()
        added = [
            line[1:].strip()
            for line in gold.splitlines()
            if line.startswith("+") and not line.startswith("+++")
        ]
        assert added
        for line in added:  # the statement describes the misbehaviour, not the fix
            assert line not in task.statement
        for t in v.fail_to_pass:  # nor which hidden tests fail (HINTS.md holds them)
            assert t not in task.statement and t.split("::")[-1] not in task.statement
            assert t in (task.path / "HINTS.md").read_text()
        script = (task.path / "reproduction.py").read_text()
        assert bug_reports.reproduction_of(task.statement) == script
        assert len(task.statement) <= bug_reports.MAX_CHARS
        title = task.statement.split("\n", 1)[0]  # what the bug does, naming the function
        assert "`" in title and "misbehaves" not in title, title


def test_reproductions_fail_without_the_fix_and_pass_with_it(synthesised):
    from repogym.quality.audit import check_reproduction

    _, tasks = synthesised
    assert [check_reproduction(t) for t in tasks] == [None] * len(tasks)


def test_a_synthesis_draws_its_tasks_in_batches_where_the_last_one_stopped(tmp_path, synthesised):
    """`synth --pypi` asks for more candidates while fewer than --max-tasks validate: batches
    continue the seeded order (1 then 2 are the 3 one batch writes: the same seed, the same
    tasks), and stop once every mutant the budget allows has been tried."""
    folders, _ = synthesised
    with Synthesis(PACKAGE, tmp_path / "a", seed=0, max_trials=90) as synthesis:
        first, second = synthesis.more(1), synthesis.more(2)
        assert [p.name for p in first + second] == [p.name for p in folders]
        for a, b in zip(first + second, folders, strict=True):
            assert (a / "solution.patch").read_text() == (b / "solution.patch").read_text()
            assert (a / "STATEMENT.md").read_text() == (b / "STATEMENT.md").read_text()
        assert not synthesis.exhausted
        rest = synthesis.more(100)  # every function tried: the bugs left, one per function
        assert synthesis.exhausted and 0 < len(rest) < 100
        assert synthesis.more(1) == []
        assert f"{3 + len(rest)} bugs kept" in synthesis.summary()
    names = [p.name for p in first + second + rest]
    assert len(set(names)) == len(names)  # no mutant is written twice
    with Synthesis(PACKAGE, tmp_path / "b", seed=0, max_trials=2) as synthesis:
        assert len(synthesis.more(10)) <= 2 and synthesis.exhausted  # the budget spent
        assert "2 mutants tried" in synthesis.summary()


def test_bugs_are_formatted_like_their_surroundings(synthesised):
    """The mutated line is edited in place (no re-printed line, no bare `pass`)."""
    _, tasks = synthesised
    for task in tasks:
        [file] = {p.new for p in split_diff(task.solution_patch.read_text())}
        original = (PACKAGE / file).read_text().splitlines()
        buggy = (task.repo_dir / file).read_text().splitlines()
        removed = [x for x in original if x not in buggy]
        added = [x for x in buggy if x not in original]
        assert len(added) <= 1 and len(removed) <= 2, (added, removed)
        assert not any(x.strip() == "pass" for x in added)
        for new in added:  # the same line with one or two spans edited, the rest as it was
            old = max(removed, key=lambda o, n=new: SequenceMatcher(None, o, n).ratio())
            edits = [op for op in SequenceMatcher(None, old, new).get_opcodes() if op[0] != "equal"]
            assert len(edits) <= 2, (old, new)


def test_statements_hide_addresses_and_come_from_the_tests_when_calls_cannot_be_replayed(tmp_path):
    """reprs' Point has the default repr (an address): a bug in shift() changes no repr a
    call returns, so the report is the failing test's own body, asserting what it gave."""
    folders = synthesize(REPRS, tmp_path / "out", max_tasks=3, seed=1)
    statements = {f.name: (f / "STATEMENT.md").read_text() for f in folders}
    text = "\n".join(statements.values())
    assert not re.search(r"0x[0-9a-f]{4,}", text)
    assert "repogym-synth" not in text
    shifted = [s for s in statements.values() if "shift(Point(1, 2), 3)" in s]
    assert shifted, statements
    assert shifted[0].startswith("`shift` ") and "misbehaves" not in shifted[0]
    assert "This code fails: (p.x, p.y) gave (" in shifted[0]
    for f, statement in zip(folders, statements.values(), strict=True):
        gold = (f / "solution.patch").read_text()
        for line in gold.splitlines():
            if line[:1] in "+-" and line[:3] not in ("+++", "---") and len(line) > 7:
                assert line[1:].strip() not in statement
        toml = (f / "task.toml").read_text()
        assert 'tags = ["synthetic"]' in toml
        assert f.name.startswith("reprs-") and len(f.name) == len("reprs-") + 8


#: A long test whose check of ``shift`` comes after 60 checks of ``label``; a Point's repr
#: is its address, so no call of ``shift`` can be replayed: the report is the test's body.
LONG_TEST = (
    "from longcheck.geo import Point, shift\nfrom longcheck.text import label\n\n\n"
    "def test_many():\n"
    "    p = shift(Point(1, 2), 3)\n"
    + "".join(f"    assert label({n}) == '#{n}'\n" for n in range(60))
    + "    assert (p.x, p.y) == (4, 2)\n"
)


def test_a_long_test_failing_at_its_last_check_gives_a_report_cut_after_it(tmp_path):
    """The report of a bug whose failing check comes after all that fits a statement: the
    whole script run once with the bug names the check; the body is cut after it, the
    checks before it that bind nothing left out from the first (before, it was cut after
    the last check that fit, which held with the bug, and no report was written)."""
    pkg = tmp_path / "longcheck"
    (pkg / "longcheck").mkdir(parents=True)
    (pkg / "tests").mkdir()
    (pkg / "longcheck" / "__init__.py").write_text("")
    core = (REPRS / "reprs" / "core.py").read_text()
    (pkg / "longcheck" / "geo.py").write_text(core.split("def scratch_name")[0])
    (pkg / "longcheck" / "text.py").write_text('def label(n):\n    return "#" + str(n)\n')
    (pkg / "tests" / "test_long.py").write_text(LONG_TEST)
    (pkg / "tests" / "test_text.py").write_text(
        "from longcheck.text import label\n\n\ndef test_label():\n    assert label(3) == '#3'\n"
    )
    folders = synthesize(pkg, tmp_path / "out", max_tasks=1, seed=0, only=["longcheck/geo.py"])
    assert folders
    statement = (folders[0] / "STATEMENT.md").read_text()
    assert "p = shift(Point(1, 2), 3)" in statement and "result = (p.x, p.y)" in statement
    assert "label(0)" not in statement and "label(59)" in statement
    # the title names what computed the failing value, not the test's last call (label)
    assert statement.startswith("`shift` "), statement[:200]


def test_merging_mutants_of_one_file():
    from repogym.scenarios.synth import merge_sources

    base = "a = 1\nb = 2\nc = 3\nd = 4\n"
    assert (
        merge_sources(base, ["a = 9\nb = 2\nc = 3\nd = 4\n", "a = 1\nb = 2\nc = 3\nd = 8\n"])
        == "a = 9\nb = 2\nc = 3\nd = 8\n"
    )
    assert (
        merge_sources(base, ["a = 9\nb = 2\nc = 3\nd = 4\n", "a = 7\nb = 2\nc = 3\nd = 4\n"])
        is None
    )  # the same line


def test_bugs_are_not_crashes_and_few_are_cheap(synthesised):
    """At most 19 failing tests, none missing; at most a quarter of the bugs drop a call
    or return None (the easiest kinds)."""
    from repogym.scenarios.synth import CHEAP_OPERATORS, MAX_FAIL_TO_PASS

    folders, tasks = synthesised
    operators = []
    for folder, task in zip(folders, tasks, strict=True):
        operators += re.findall(r"::(\w+)\(", (folder / "task.toml").read_text().splitlines()[0])
        assert 1 <= len(task.test_spec.fail_to_pass) <= MAX_FAIL_TO_PASS
    assert operators and sum(op in CHEAP_OPERATORS for op in operators) <= len(operators) / 4


def test_package_with_failing_tests_is_refused(tmp_path):
    pkg = tmp_path / "broken"
    pkg.mkdir()
    (pkg / "m.py").write_text("def f():\n    return 1\n")
    (pkg / "test_m.py").write_text("from m import f\n\n\ndef test_f():\n    assert f() == 2\n")
    with pytest.raises(SynthError, match="tests fail before any mutation"):
        synthesize(pkg, tmp_path / "out")


def test_a_package_whose_code_is_not_found_is_refused_with_the_cause(tmp_path):
    """markdown2 keeps its module in lib/, where `synth --pypi` did not look: no function
    to mutate is an error naming where the code was looked for, not 0 tasks unexplained."""
    with pytest.raises(SynthError, match=r"^textstats: no code to mutate: .* within lib"):
        synthesize(PACKAGE, tmp_path / "out", only=["lib"])


def test_the_projects_metadata_stays_in_the_task_and_its_file_list_does_not(tmp_path):
    """portion reads its own version with ``importlib.metadata`` at import: its egg-info's
    PKG-INFO goes with the copy synthesis tests and the task's repository; SOURCES.txt,
    which lists the hidden test files, does not."""
    pkg = tmp_path / "textstats"
    shutil.copytree(PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "textstats.egg-info").mkdir()
    (pkg / "textstats.egg-info" / "PKG-INFO").write_text(
        "Metadata-Version: 2.1\nName: textstats\nVersion: 1.0\n"
    )
    (pkg / "textstats.egg-info" / "SOURCES.txt").write_text("tests/test_textstats.py\n")
    init = pkg / "textstats" / "__init__.py"
    init.write_text(
        'import importlib.metadata\n\n__version__ = importlib.metadata.version("textstats")\n'
        + init.read_text()
    )
    [folder] = synthesize(pkg, tmp_path / "out", max_tasks=1, seed=0)
    info = folder / "repo" / "textstats.egg-info"
    assert (info / "PKG-INFO").is_file() and not (info / "SOURCES.txt").exists()


def test_a_package_without_tests_is_refused_by_name(tmp_path):
    """bidict's and sortedcontainers' sdists ship no tests: the error names the package,
    not a temporary folder."""
    pkg = tmp_path / "untested"
    pkg.mkdir()
    (pkg / "m.py").write_text("def f():\n    return 1\n")
    with pytest.raises(
        SynthError,
        match=r"^bidict: no test files .*Fix: give a package with "
        r"its tests",
    ):
        synthesize(pkg, tmp_path / "out", name="bidict")


def test_cli_prints_the_mutation_score_of_each_task(tmp_path):
    env = {**os.environ, "REPOGYM_CACHE": str(tmp_path / "cache")}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "synth",
            str(REPRS),
            "--out",
            str(tmp_path / "out"),
            "--max-tasks",
            "1",
            "--max-mutants",
            "2",
            "--workers",
            "2",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    [task] = [line.split("/")[-1] for line in res.stdout.splitlines() if line.startswith("wrote ")]
    line = rf"^{task}: mutation (ok|FAILED) score \d\.\d\d \("
    assert re.search(line, res.stdout, re.MULTILINE), res.stdout


def test_a_mixin_method_failing_in_every_class_counts_once():
    """A mutant of cachetools' Cache fails a CacheTestMixin method in each of its 7+ cache
    classes: one failing test per method (and the cap still holds for distinct tests)."""
    from repogym.scenarios.synth import MAX_FAIL_TO_PASS, _why_not

    classes = [f"C{n}Test" for n in range(MAX_FAIL_TO_PASS + 1)]
    result = {f"tests/test_c.py::{c}::test_get": "failed" for c in classes}
    result["tests/test_c.py::test_other"] = "passed"
    same = {f"tests/test_c.py::{c}::test_get": "tests/__init__.py:12" for c in classes}.get
    assert _why_not(result, {}) == f"over {MAX_FAIL_TO_PASS} tests fail"
    assert _why_not(result, {}, lambda t: same(t, t)) == ""
    many = {f"tests/test_c.py::test_{n}": "failed" for n in range(MAX_FAIL_TO_PASS + 1)}
    assert _why_not(many, {}, lambda t: same(t, t)) == f"over {MAX_FAIL_TO_PASS} tests fail"
    assert _why_not({"tests/test_c.py::test_0": "passed"}, {}) == "no test fails"
    assert (
        _why_not(
            {"tests/test_c.py::test_0": "failed"}, {"tests/test_c.py::test_0": "ImportError: no"}
        )
        == "import or collection error"
    )


def _pooled(file: str, function: str, failing: int, body: int, first: int = 0):
    """A pooled bug of ``function`` failing ``failing`` tests (numbered from ``first``) whose
    check's body is ``body`` characters long."""
    from repogym.scenarios.mutation import Mutant
    from repogym.scenarios.synth import Bug, Pooled

    m = Mutant(file, function, "swap_args", "0-1", 1, 0, 1, "")
    tests = tuple(f"tests/test_m.py::test_{n}" for n in range(first, first + failing))
    check = bug_reports.Check(
        (f"assert {function}() == {'x' * body!r}",),
        (),
        f"{function}()",
        "returns 1",
        "return 2",
        function,
    )
    return Pooled(Bug((m,), tests, {}), check, "")


def _chars(members):
    text = bug_reports.script([p.check for p in members])
    return len(
        bug_reports.statement(
            "pkg", [p.check for p in members], text, [p.observed for p in members]
        )
    )


def test_members_are_chosen_within_the_cap_and_the_length_budget_before_any_run():
    """The union of the members' failing tests must be at most 19 (a mixin method counted
    once) and their statement at most 2,000 characters; of the sets left, the one in the
    most files, then the shortest, and never a set tried already."""
    from repogym.scenarios.synth import MAX_FAIL_TO_PASS, choose_members

    a = _pooled("pkg/a.py", "f", 12, 10)
    b = _pooled("pkg/a.py", "g", 12, 10, first=20)  # 24 failing with a: over the cap
    c = _pooled("pkg/b.py", "h", 7, 10, first=40)  # 19 with a: within the cap
    refusals: dict[str, int] = {}
    judged: set = set()
    assert choose_members([a, b], 2, chars=_chars, refusals=refusals, judged=judged) is None
    assert refusals == {f"set: over {MAX_FAIL_TO_PASS} failing tests together": 1}
    assert choose_members([a, b, c], 2, chars=_chars, refusals=refusals, judged=judged) == [a, c]
    assert refusals == {f"set: over {MAX_FAIL_TO_PASS} failing tests together": 1}  # once
    assert choose_members([a, b, c], 3, chars=_chars) is None
    # the same tests run once per class (a mixin's method) count once

    def same(t):
        return re.sub(r"test_(\d+)", lambda m: f"test_{int(m[1]) % 20}", t)

    assert choose_members([a, b], 2, chars=_chars, same=same) == [a, b]

    # the length budget: a long check is left out for a short one, in one file or not
    long = _pooled("pkg/c.py", "k", 1, bug_reports.MAX_CHARS - 400, first=60)
    short = _pooled("pkg/a.py", "m", 1, 40, first=70)
    assert _chars([c, long]) > bug_reports.MAX_CHARS >= _chars([c, short])
    refusals = {}
    assert choose_members([c, long, short], 2, chars=_chars, refusals=refusals) == [c, short]
    assert refusals == {f"set: statement over {bug_reports.MAX_CHARS} characters": 2}
    # files first, then length: c + shorter (one file) is the shortest, but two files
    # win, and of those the shorter
    shorter = _pooled("pkg/b.py", "n", 1, 5, first=80)
    assert _chars([c, shorter]) < _chars([shorter, short]) < _chars([c, short])
    assert choose_members([c, shorter, short], 2, chars=_chars) == [shorter, short]
    assert choose_members(
        [c, shorter, short], 2, chars=_chars, skip={frozenset({shorter.bug.id, short.bug.id})}
    ) == [c, short]
    assert choose_members([c, shorter], 2, chars=_chars) == [c, shorter]
    # two bugs of one function are never combined
    twin = _pooled("pkg/b.py", "h", 1, 5, first=90)
    assert choose_members([c, twin], 2, chars=_chars) is None


def test_combined_tasks_reuse_each_bugs_check_fit_the_statement_and_validate(tmp_path, monkeypatch):
    """With ``combined``, a task of 2-3 bugs is written: its statement (one paragraph per
    check and one script) fits in 2,000 characters, its reproduction fails with the bugs
    and passes with the gold patch, 1 to 19 tests fail, and no partial fix earns full
    reward. Each bug's check is drafted once (the recorded calls are taken once per bug),
    however many combinations are tried."""
    from repogym.quality.audit import check_reproduction
    from repogym.scenarios.synth import MAX_FAIL_TO_PASS, Reporter

    drafted: list[str] = []
    candidates = Reporter._candidates

    def counted(self, changes, tests):
        drafted.append(repr(sorted(changes.items())))
        return candidates(self, changes, tests)

    monkeypatch.setattr(Reporter, "_candidates", counted)
    said: list[str] = []
    folders = synthesize(
        PACKAGE, tmp_path / "out", max_tasks=2, seed=0, combined=0.5, say=said.append
    )
    combined = [f for f in folders if " + " in (f / "task.toml").read_text().splitlines()[0]]
    assert combined, said
    kept = [s for s in said if "] bug kept: " in s]
    assert len(drafted) == len(set(drafted)) == len(kept), said
    assert len(combined) == 1 and len(folders) == 2
    assert re.search(r"combinations \(\d+ tried\): .*\b1 written\b", said[-1]), said[-1]
    tasks = load_tasks(tmp_path / "out")
    for task in tasks:
        if task.path not in combined:
            continue
        assert len(task.statement) <= bug_reports.MAX_CHARS
        assert (
            bug_reports.reproduction_of(task.statement)
            == (task.path / "reproduction.py").read_text()
        )
        assert check_reproduction(task) is None
        assert 1 <= len(task.test_spec.fail_to_pass) <= MAX_FAIL_TO_PASS
        # 2-3 bugs, each in a function of its own, each needed: every fix that leaves
        # one bug is a decoy
        mutants = (task.path / "task.toml").read_text().splitlines()[0].split(": ", 1)[1]
        mutants = mutants.split(" + ")
        assert 2 <= len(mutants) <= 3 and len({m.split("::")[1] for m in mutants}) == len(mutants)
        partial = [p for p in task.decoys if p.name.startswith("partial_fix_")]
        assert len(partial) == len(mutants)
        assert task.statement.startswith(
            f"{('Two', 'Three')[len(mutants) - 2]} bugs in `textstats`"
        )
    reports_ = validate_tasks([t for t in tasks if t.path in combined], reruns=1, workers=2)
    assert all(r.ok for r in reports_), [r.failures for r in reports_]
