"""Audit of built tasks in the real sandbox: leaks of the fix, compiled files, reproductions,
regressions outside the bug."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from repogym.quality import audit
from repogym.scenarios.dependencies import DependencySpec
from repogym.scenarios.synth import TaskFiles, write_task
from repogym.scenarios.task import load_task

CODE = textwrap.dedent('''\
    def scale(values, factor):
        """Every value times factor."""
        out = []
        for v in values:
            out.append(v * factor)
        return out


    def label(name, suffix):
        """name, a dash, the suffix."""
        cleaned = name.strip()
        joined = cleaned + "-" + suffix
        return joined.lower()


    def clip(x, low, high):
        """x within [low, high]."""
        if x < low:
            return low
        return min(x, high)
    ''')
TESTS = textwrap.dedent("""\
    from calc import clip, label, scale


    def test_scale():
        assert scale([1, 2], 3) == [3, 6]


    def test_label():
        assert label(" A ", "b") == "a-b"


    def test_clip():
        assert clip(-1, 0, 5) == 0
        assert clip(9, 0, 5) == 5
    """)
BUGS = {
    "scale": ("out.append(v * factor)", "out.append(v + factor)"),
    "label": ('joined = cleaned + "-" + suffix', 'joined = cleaned + "_" + suffix'),
    "clip": ("if x < low:", "if x > low:"),
}
REPRO = {
    "scale": "from calc import scale\nassert scale([1, 2], 3) == [3, 6], scale([1, 2], 3)\n",
    "label": "from calc import label\nassert label('A', 'b') == 'a-b', label('A', 'b')\n",
    "clip": "from calc import clip\nassert clip(-1, 0, 5) == 0, clip(-1, 0, 5)\n",
}
#: The environment holds a vendored copy of the original scale() (a host package would).
VENDOR = (
    "python3 -c \"import os; open(os.environ['REPOGYM_ENV_SITE'] + '/vendored_calc.py', "
    "'w').write(open('/dev/stdin').read())\" <<'EOF'\n" + CODE.split("\n\n\n")[0] + "\nEOF"
)


def _task(
    base: Path,
    function: str,
    environment: DependencySpec,
    extra: dict[str, str],
    tests: str = TESTS,
    more_tests: dict[str, str] | None = None,
    unlisted: tuple[str, ...] = (),
) -> Path:
    repo = base / f"src-{function}"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(CODE)
    (repo / "tests" / "test_calc.py").write_text(tests)
    for rel, text in (more_tests or {}).items():
        (repo / rel).write_text(text)
    for rel, text in extra.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    old, new = BUGS[function]
    failing = [f"tests/test_calc.py::test_{function}"]
    others = [f"tests/test_calc.py::test_{f}" for f in BUGS if f != function]
    others += [f"tests/test_calc.py::{n}" for n in ("test_scale_empty",) if n in tests]
    others = [t for t in others if t.split("::")[-1] not in unlisted]
    return write_task(
        TaskFiles(
            id=f"audit-{function}",
            repo=repo,
            hidden=["tests/test_calc.py", *(more_tests or {})],
            tests_dest="tests",
            buggy={"calc.py": CODE.replace(old, new)},
            fail_to_pass=failing,
            pass_to_pass=others,
            statement="A bug.",
            reproduction=REPRO[function],
            environment=environment,
            ini_options={"pythonpath": "/workspace"},
        ),
        base / "tasks",
    )


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    from repogym.scenarios.dependencies import build

    base = tmp_path_factory.mktemp("audit")
    env = DependencySpec(requirements=(), setup=(VENDOR,))
    build(env)
    copy = CODE.split("\n\n\n")[1]  # label() as it should be, in another file of repo/
    paths = [
        _task(base, "scale", env, {}),
        _task(base, "label", env, {"notes/old_calc.py": copy}),
        _task(base, "clip", env, {}),
    ]
    return {p.name.split("-")[1]: load_task(p) for p in paths}


def test_leak_scan_finds_the_fix_in_the_environment_and_in_the_workspace(tasks):
    found = audit.leak_scan(tasks.values())
    assert set(found) == {"audit-scale", "audit-label"}, found
    assert found["audit-scale"] == [
        ("/opt/repogym/env/vendored_calc.py holds the fixed code around 'out.append(v * factor)'")
    ]
    assert found["audit-label"][0].startswith("/workspace/notes/old_calc.py holds")


def test_fix_blocks_are_the_restored_lines_with_their_context(tasks):
    gold = tasks["clip"].solution_patch.read_text()
    [(key, block)] = audit.fix_blocks(gold, {"calc.py": CODE.replace(*BUGS["clip"])})
    assert key == "if x < low:"
    assert block == (
        'def clip(x, low, high):\n"""x within [low, high]."""\nif x < low:\n'
        "return low\nreturn min(x, high)"
    )


def test_compiled_files_in_a_workspace_are_reported(tasks, tmp_path):
    task = tasks["clip"]
    assert audit.artefacts(task) == []
    (task.repo_dir / "__pycache__").mkdir()
    (task.repo_dir / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"\0")
    try:
        assert audit.artefacts(task) == ["__pycache__", "__pycache__/calc.cpython-311.pyc"]
    finally:
        import shutil

        shutil.rmtree(task.repo_dir / "__pycache__")


def test_reproduction_fails_without_the_fix_and_passes_with_it(tasks, tmp_path):
    assert audit.check_reproduction(tasks["clip"]) is None
    wrong = tasks["label"].path / "reproduction.py"
    wrong.write_text("print('nothing checked')\n")
    problem = audit.check_reproduction(tasks["label"])
    wrong.write_text(REPRO["label"])
    assert problem is not None and "does not fail with an AssertionError" in problem


def test_gold_plus_another_functions_bug_does_not_earn_full_reward(tasks):
    results = audit.sabotage([tasks["scale"], tasks["label"], tasks["clip"]])
    assert [(s.task, s.reward) for s in results] == [
        ("audit-scale", 0.0),
        ("audit-label", 0.0),
        ("audit-clip", 0.0),
    ]
    assert all(s.broken for s in results)
    diff = audit.sabotaged_diff(tasks["scale"], tasks["clip"])
    assert "+        out.append(v * factor)" in diff and "+    if x > low:" in diff


def test_a_task_no_other_lends_a_bug_gets_a_regression_its_packages_tests_catch(tasks):
    """Alone in the audit, clip borrows no bug: a mutant of another function, which the
    package's tests reach and catch, is graded with its gold patch instead."""
    [found] = audit.sabotage([tasks["clip"]])
    assert found.task == "audit-clip" and found.reward == 0.0 and found.problem is None
    assert found.other.split("::")[:2] in (["calc.py", "scale"], ["calc.py", "label"])
    assert found.caught_by and set(found.caught_by) <= {
        "tests/test_calc.py::test_scale",
        "tests/test_calc.py::test_label",
    }
    assert set(found.caught_by) <= set(found.broken)


def test_a_regression_in_tests_the_task_does_not_list_earns_full_reward_and_is_a_problem(
    tmp_path,
):
    """A task that lists neither test of the other functions: the package's tests catch
    the regression, the grader never runs them, so gold plus it earns full reward."""
    from repogym.scenarios.dependencies import build

    env = DependencySpec(requirements=(), setup=(VENDOR,))
    build(env)
    task = load_task(_task(tmp_path, "clip", env, {}, unlisted=("test_scale", "test_label")))
    assert task.test_spec.pass_to_pass == ()
    [found] = audit.sabotage([task])
    assert found.reward == 1.0 and found.broken == [] and found.caught_by
    assert found.problem and "which the package's tests/test_calc.py::test_" in found.problem


def test_a_package_whose_suite_cannot_run_is_a_problem_not_a_crash(tasks, tmp_path):
    import shutil

    broken = tmp_path / "tasks" / "audit-clip"
    shutil.copytree(tasks["clip"].path, broken)
    patch = broken / "solution.patch"
    patch.write_text(patch.read_text().replace("-    if x > low:", "-    if x >= low:"))
    [found] = audit.sabotage([load_task(broken)])
    assert found.error and "gold patch does not apply" in found.error
    assert found.problem and "no regression beside the fix could be graded" in found.problem


def test_stability_finds_a_test_that_holds_only_under_one_hash_seed(tmp_path):
    """A pass_to_pass test that asserts an exact ``hash()`` (as semver's and toolz's do)
    changes outcome under another PYTHONHASHSEED, for gold and for no change; nothing
    changes beside a CPU hog."""
    import subprocess
    import sys

    from tests.scenarios._tasks import TESTS
    from tests.scenarios._tasks import write_task as write_clamp_task

    h0 = subprocess.run(
        [sys.executable, "-c", "print(hash('repogym'))"],
        env={"PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tests = TESTS + f'\n\ndef test_hash():\n    assert hash("repogym") == {h0}\n'
    task = load_task(
        write_clamp_task(
            tmp_path / "hashed",
            tests=tests,
            p2p=("tests/test_mod.py::test_inside", "tests/test_mod.py::test_hash"),
        )
    )
    seed, found = audit.stability([task], hash_seed=12345)
    assert seed == 12345
    assert [(u.patch, u.condition, u.changed) for u in found] == [
        (p, "PYTHONHASHSEED=12345", {"tests/test_mod.py::test_hash": ("passed", "failed")})
        for p in ("gold", "noop")
    ], [str(u) for u in found]


def test_scope_names_what_is_not_graded_and_what_reaches_each_fix(tmp_path):
    """The package's suite, run once traced on the fixed code: a file whose only test is
    skipped is not graded, and says so; the scale task's empty-list test (it calls
    ``scale`` and passes with the bug) reaches its fix, nothing reaches label's."""
    from repogym.scenarios.dependencies import build

    env = DependencySpec(requirements=(), setup=())
    build(env)
    tests = TESTS + "\n\ndef test_scale_empty():\n    assert scale([], 3) == []\n"
    skipped = "import pytest\n\n\n@pytest.mark.skip\ndef test_later():\n    pass\n"
    more = {"tests/test_later.py": skipped}
    tasks = [
        load_task(_task(tmp_path, f, env, {}, tests=tests, more_tests=more))
        for f in ("scale", "label")
    ]
    assert {t.path.parent for t in tasks} == {tmp_path / "tasks"}  # one package
    (found,) = audit.scope(tasks)
    assert found.error == ""
    assert found.ungraded == {"tests/test_later.py": "1 skipped on the pristine package"}
    assert found.reach == {
        "audit-scale": ["tests/test_calc.py::test_scale_empty"],
        "audit-label": [],
    }
