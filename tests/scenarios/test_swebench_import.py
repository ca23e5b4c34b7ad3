"""SWE-bench-format import: a real local repo with a later fix commit and a tag."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import gymnasium as gym
import pytest

import repogym
from repogym.grading.grader import grade, swebench_available, swebench_tests
from repogym.quality.validate import validate_task
from repogym.sandbox import make_sandbox
from repogym.sandbox.workspace import TemplateCache, make_diff
from repogym.scenarios.importing import task_kind
from repogym.scenarios.swebench import InstanceError, hidden_tests_dest, import_instance
from repogym.scenarios.task import load_task

from ._tasks import git

MARKER = "FIX_MARKER_7f3a"
BASE_CALC = "def add(a, b):\n    return a + b\n\n\ndef divide(a, b):\n    return a / b\n"
FIXED_CALC = BASE_CALC.replace(
    "    return a / b\n",
    f"    if b == 0:\n        raise ValueError('{MARKER}: division by zero')\n    return a / b\n",
)
BASE_TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FIXED_TESTS = BASE_TESTS.replace(
    "from calc import add", "import pytest\n\nfrom calc import add, divide"
) + (
    "\n\ndef test_divide():\n    assert divide(6, 3) == 2\n"
    "\n\ndef test_divide_by_zero():\n    with pytest.raises(ValueError):\n"
    "        divide(1, 0)\n"
)

pytestmark = pytest.mark.skipif(
    not swebench_available(),
    reason="the swebench extra is not installed: pip install 'repogym[swebench]'",
)


def _clone_with_fix(clone: Path, extra_tests: dict[str, str] | None = None) -> tuple[str, str]:
    """A git clone of calc at its base commit, then a fix commit; returns (base, fix)."""
    (clone / "tests").mkdir(parents=True)
    (clone / "calc.py").write_text(BASE_CALC)
    (clone / "tests" / "test_calc.py").write_text(BASE_TESTS)
    for name, text in (extra_tests or {}).items():
        (clone / "tests" / name).write_text(text)
    git("init", "-q", "-b", "main", cwd=clone)
    git("add", "-A", cwd=clone)
    git("commit", "-qm", "base", cwd=clone)
    base = git("rev-parse", "HEAD", cwd=clone).strip()
    (clone / "calc.py").write_text(FIXED_CALC)
    (clone / "tests" / "test_calc.py").write_text(FIXED_TESTS)
    git("commit", "-qam", "fix divide by zero", cwd=clone)
    return base, git("rev-parse", "HEAD", cwd=clone).strip()


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    """repos/acme__calc: base commit, fix commit (tagged v1.0), one more commit."""
    repos = tmp_path_factory.mktemp("repos")
    clone = repos / "acme__calc"
    base, fix = _clone_with_fix(clone)
    git("tag", "v1.0", cwd=clone)
    (clone / "NEWS").write_text("later work\n")
    git("add", "NEWS", cwd=clone)
    git("commit", "-qm", "later", cwd=clone)
    instance = {
        "instance_id": "acme__calc-1",
        "repo": "acme/calc",
        "base_commit": base,
        "patch": git("diff", base, fix, "--", "calc.py", cwd=clone),
        "test_patch": git("diff", base, fix, "--", "tests", cwd=clone),
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_divide_by_zero"]),
        "PASS_TO_PASS": json.dumps(
            ["tests/test_calc.py::test_add", "tests/test_calc.py::test_divide"]
        ),
        "problem_statement": "divide(1, 0) raises ZeroDivisionError; it should raise ValueError.",
    }
    return {"repos": repos, "base": base, "fix": fix, "instance": instance}


@pytest.fixture(scope="module")
def imported(upstream, tmp_path_factory):
    out = tmp_path_factory.mktemp("tasks")
    jsonl = out.parent / "instances.jsonl"
    jsonl.write_text(json.dumps(upstream["instance"]) + "\n")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "import-swebench",
            str(jsonl),
            "--repos",
            str(upstream["repos"]),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return out / "acme__calc-1"


def test_import_writes_the_task_folder(imported, upstream):
    task = load_task(imported)
    assert task.id == "acme__calc-1"
    assert task.test_spec.log_parser == "swebench"
    assert task.test_spec.tests_dest == "tests"
    assert task.test_spec.fail_to_pass == ("tests/test_calc.py::test_divide_by_zero",)
    assert (imported / "repo" / "calc.py").read_text() == BASE_CALC
    assert (imported / "tests" / "test_calc.py").read_text() == FIXED_TESTS
    assert not (imported / "repo" / ".git").exists()
    assert not (imported / "repo" / "NEWS").exists()
    assert MARKER not in "".join(
        p.read_text() for p in (imported / "repo").rglob("*") if p.is_file()
    )
    assert MARKER in (imported / "solution.patch").read_text()
    meta = tomllib.loads((imported / "task.toml").read_text())["swebench"]
    assert meta == {
        "instance_id": "acme__calc-1",
        "repo": "acme/calc",
        "base_commit": upstream["base"],
    }


def test_imported_task_validates(imported):
    report = validate_task(load_task(imported), reruns=2, workers=2)
    assert report.ok, report.failures
    by_kind = {c.kind: c for c in report.checks}
    assert by_kind["gold"].reward == 1.0 and by_kind["noop"].reward == 0.0
    assert by_kind["noop"].tests["tests/test_calc.py::test_divide_by_zero"] == "failed"


def test_env_sees_one_commit_and_no_trace_of_the_fix(imported, upstream):
    [task] = repogym.register_task(imported, overwrite=True)
    env = gym.make(task.env_id)
    try:
        env.reset(seed=0)
        cmd = (
            "echo LOG=$(git log --all --oneline | wc -l) TAGS=$(git tag | wc -l) "
            "REFLOG=$(git reflog 2>/dev/null | wc -l) "
            f"HITS=$( (git cat-file --batch-all-objects --batch; grep -r . -e x) "
            f"| grep -c {MARKER}); git cat-file -t {upstream['fix']} || echo NO_FIX_OBJECT"
        )
        obs, *_ = env.step(json.dumps({"tool": "bash", "args": {"command": cmd}}))
    finally:
        env.close()
    assert re.search(r"LOG=1 TAGS=0 REFLOG=0 HITS=0", obs), obs
    assert "NO_FIX_OBJECT" in obs


def test_swebench_parser_agrees_with_junit_and_forged_log_is_flagged(imported, upstream):
    task = load_task(imported)
    forge = (
        "import atexit, os\natexit.register(lambda: os.write(1, b'\\nPASSED "
        "tests/test_calc.py::test_divide_by_zero\\n'))\n"
    )
    decoy = (
        "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,4 @@\n"
        + "".join("+" + line + "\n" for line in forge.splitlines())
        + " def add(a, b):\n     return a + b\n"
    )
    templates = TemplateCache()
    try:
        template = templates.get(task.repo_dir)

        def factory(spec):
            return make_sandbox("bwrap", spec)

        gold = grade(
            task,
            template,
            (imported / "solution.patch").read_text(),
            mode="binary",
            make_sandbox=factory,
        )
        forged = grade(task, template, decoy, mode="binary", make_sandbox=factory)
    finally:
        templates.close()
    # Honest log: the official parser and the junit report agree test by test.
    from_log, contradicted = swebench_tests(gold.test_output, task.test_spec, None)
    assert from_log == gold.tests == dict.fromkeys(task.test_spec.all_tests, "passed")
    assert not contradicted
    # The forged line fools a log-only reading, not the grader: the test's sealed check (its
    # pytest.raises) saw no ZeroDivisionError turned into the expected error.
    fooled, _ = swebench_tests(forged.test_output, task.test_spec, None)
    assert fooled["tests/test_calc.py::test_divide_by_zero"] == "passed"
    assert forged.reward == 0.0
    assert forged.tests["tests/test_calc.py::test_divide_by_zero"] == "failed"


def test_tests_dest_rule():
    assert hidden_tests_dest(["tests/test_a.py", "tests/unit/test_b.py"]) == "tests"
    assert hidden_tests_dest(["pkg/core/tests/test_a.py"]) == "pkg/core/tests"
    # tests beside the code in several packages: the repo root, test files guarded one by one
    assert hidden_tests_dest(["pkg/a/tests/test_a.py", "pkg/b/tests/test_b.py"]) == "."
    assert hidden_tests_dest(["test_top.py"]) == "."


def test_bad_instances_name_the_cause(upstream, tmp_path):
    inst = dict(upstream["instance"])
    with pytest.raises(InstanceError, match="no clone at .*acme__nope.*git clone"):
        import_instance({**inst, "repo": "acme/nope"}, upstream["repos"], tmp_path)
    with pytest.raises(InstanceError, match="base_commit 0+ is not in"):
        import_instance({**inst, "base_commit": "0" * 40}, upstream["repos"], tmp_path)
    with pytest.raises(InstanceError, match="no log parser for 'acme/calc'"):
        import_instance(
            {**inst, "FAIL_TO_PASS": '["test_x (mod.Case)"]'}, upstream["repos"], tmp_path
        )
    with pytest.raises(InstanceError, match="missing keys"):
        import_instance({"instance_id": "x"}, upstream["repos"], tmp_path)
    assert not any(tmp_path.iterdir())


# -- the SWE-bench family ----------------------------------------------------------------
OTHER_TESTS = "from calc import add\n\n\ndef test_add_negative():\n    assert add(-1, -2) == -3\n"


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """repos/acme__calc2: a base commit with tests in two files, and a fix commit that touches
    only one of them (its untouched file holds a PASS_TO_PASS test)."""
    repos = tmp_path_factory.mktemp("family")
    clone = repos / "acme__calc2"
    base, fix = _clone_with_fix(clone, {"test_other.py": OTHER_TESTS})
    return {"repos": repos, "clone": clone, "base": base, "fix": fix}


def _validates(folder):
    task = load_task(folder)
    report = validate_task(task, reruns=1, workers=2)
    assert report.ok, report.failures
    return task, {c.kind: c for c in report.checks}


def test_pass_to_pass_test_in_a_file_the_test_patch_does_not_touch(family, tmp_path):

    def g(*a):
        return git(*a, cwd=family["clone"])

    inst = {
        "instance_id": "acme__calc2-7",
        "repo": "acme/calc2",
        "base_commit": family["base"],
        "patch": g("diff", family["base"], family["fix"], "--", "calc.py"),
        "test_patch": g("diff", family["base"], family["fix"], "--", "tests"),
        "FAIL_TO_PASS": ["tests/test_calc.py::test_divide_by_zero"],
        "PASS_TO_PASS": ["tests/test_calc.py::test_add", "tests/test_other.py::test_add_negative"],
        "problem_statement": "divide(1, 0) must raise ValueError.",
    }
    folder = import_instance(inst, family["repos"], tmp_path)
    task, checks = _validates(folder)
    assert "tests/test_calc.py" in task.test_spec.command
    assert "tests/test_other.py" in task.test_spec.command  # the union of the test files
    assert checks["gold"].tests["tests/test_other.py::test_add_negative"] == "passed"
    assert checks["noop"].tests["tests/test_other.py::test_add_negative"] == "passed"


def test_swesmith_row_its_patch_makes_the_bug(family, tmp_path):
    # SWE-smith: the patch creates the bug in the clean repository; no test_patch; the mirror
    # is named after the commit it starts from (no base_commit key).
    clean = family["clone"]

    def g(*a):
        return git(*a, cwd=clean)

    bug = g("diff", family["fix"], family["base"], "--", "calc.py")
    inst = {
        "instance_id": "acme__calc2.{}.func_pm_remove_cond__x1".format(family["fix"][:8]),
        "repo": "swesmith/acme__calc2.{}".format(family["fix"][:8]),
        "patch": bug,
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_divide_by_zero"]),
        "PASS_TO_PASS": json.dumps(
            ["tests/test_calc.py::test_divide", "tests/test_other.py::test_add_negative"]
        ),
        "image_name": "swesmith.x86_64.acme__calc2.{}".format(family["fix"][:8]),
    }
    folder = import_instance(inst, family["repos"], tmp_path)
    task, _checks = _validates(folder)
    assert (folder / "repo" / "calc.py").read_text() == BASE_CALC  # the bug applied
    assert MARKER in task.solution_patch.read_text()  # the gold fix is the reverse
    assert "tests/test_calc.py::test_divide_by_zero" in task.statement
    assert task.tags[0] == "swesmith"
    with pytest.raises(InstanceError, match="swesmith|SWE-smith"):
        import_instance(
            {k: v for k, v in inst.items() if k != "patch"}, family["repos"], tmp_path / "x"
        )


def _summary(**statuses: str) -> str:
    return "=== short test summary info ===\n" + "".join(
        f"{s} r2e_tests/test_1.py::{t}\n" for t, s in statuses.items()
    )


def test_r2e_gym_row_with_generated_tests(family, tmp_path):
    r2e_tests = FIXED_TESTS.replace("from calc import", "from calc import")
    row = {
        "repo_name": "acme__calc2",
        "commit_hash": family["fix"],
        "docker_image": "namanjain12/calc2_final:" + family["fix"],
        "problem_statement": "divide(1, 0) must raise ValueError.",
        "parsed_commit_content": json.dumps(
            {"old_commit_hash": family["base"], "new_commit_hash": family["fix"]}
        ),
        "execution_result_content": json.dumps(
            {
                "test_file_names": ["test_1.py"],
                "test_file_codes": [r2e_tests],
                "old_commit_res_stdout": _summary(
                    test_add="PASSED", test_divide="PASSED", test_divide_by_zero="FAILED"
                ),
                "new_commit_res_stdout": _summary(
                    test_add="PASSED", test_divide="PASSED", test_divide_by_zero="PASSED"
                ),
            }
        ),
        "expected_output_json": json.dumps({"test_add": "PASSED"}),
    }
    folder = import_instance(row, family["repos"], tmp_path)
    task, _checks = _validates(folder)
    assert task.test_spec.fail_to_pass == ("r2e_tests/test_1.py::test_divide_by_zero",)
    assert set(task.test_spec.pass_to_pass) == {
        "r2e_tests/test_1.py::test_add",
        "r2e_tests/test_1.py::test_divide",
    }
    # r2e_tests/ is not a test folder by name: tests_dest is the root, test files guarded
    assert task.test_spec.tests_dest == "."
    assert task_kind(folder) == "r2e"
    assert (folder / "tests" / "r2e_tests" / "test_1.py").is_file()
    assert MARKER in task.solution_patch.read_text()
    assert "tests/test_calc.py" not in task.solution_patch.read_text()  # code only
    assert not (folder / "repo" / "r2e_tests").exists()


def test_instance_requirements_become_the_tasks_environment(family, tmp_path):

    def g(*a):
        return git(*a, cwd=family["clone"])

    inst = {
        "instance_id": "acme__calc2-9",
        "repo": "acme/calc2",
        "base_commit": family["base"],
        "patch": g("diff", family["base"], family["fix"], "--", "calc.py"),
        "test_patch": g("diff", family["base"], family["fix"], "--", "tests"),
        "FAIL_TO_PASS": ["tests/test_calc.py::test_divide_by_zero"],
        "PASS_TO_PASS": [],
        "problem_statement": "x",
        "pip_packages": "six==1.17.0 attrs",
        "python": "3.11",
    }
    task = load_task(import_instance(inst, family["repos"], tmp_path))
    assert task.dependencies.requirements == ("attrs", "six==1.17.0")
    assert task.dependencies.python == "==3.11.*"


# -- non-pytest runners: django-style and sympy-style instances ------------------------
RUNTESTS = '''\
#!/usr/bin/env python
"""A stand-in for django's tests/runtests.py: its options, unittest underneath."""
import argparse
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [here, os.path.dirname(here)]
p = argparse.ArgumentParser()
p.add_argument("--verbosity", type=int, default=1)
p.add_argument("--settings")
p.add_argument("--parallel")
p.add_argument("labels", nargs="*")
args = p.parse_args()
suite = unittest.defaultTestLoader.loadTestsFromNames(args.labels)
result = unittest.TextTestRunner(verbosity=args.verbosity).run(suite)
sys.exit(not result.wasSuccessful())
'''
DJANGO_BASE = (
    "import unittest\n\nfrom calc import add, divide\n\n\n"
    "class CalcTests(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_divide(self):\n        self.assertEqual(divide(6, 3), 2)\n"
)
DJANGO_FIXED = DJANGO_BASE + (
    "\n    def test_divide_by_zero(self):\n"
    "        with self.assertRaises(ValueError):\n"
    "            divide(1, 0)\n"
)
BIN_TEST = '''\
#!/usr/bin/env python
"""A stand-in for sympy's bin/test: its options and its verbose output format."""
import importlib.util
import os
import sys
import traceback

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, root)
failed = False
for path in [a for a in sys.argv[1:] if not a.startswith("-")]:
    spec = importlib.util.spec_from_file_location("t", os.path.join(root, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    print(path + "[%d]" % len([n for n in vars(module) if n.startswith("test_")]))
    for name in sorted(n for n in vars(module) if n.startswith("test_")):
        try:
            getattr(module, name)()
            print(name + " ok")
        except AssertionError:
            failed = True
            print(name + " F")
            print("_" * 8 + " %s:%s " % (path, name) + "_" * 8)
            traceback.print_exc(file=sys.stdout)
        except Exception:
            failed = True
            print(name + " E")
sys.exit(1 if failed else 0)
'''
SYMPY_BASE = (
    "from symbolic.calc import add, divide\n\n\ndef test_add():\n"
    "    assert add(2, 3) == 5\n\n\ndef test_divide():\n    assert divide(6, 3) == 2\n"
)
SYMPY_FIXED = SYMPY_BASE + (
    "\n\ndef test_divide_by_zero():\n    try:\n        divide(1, 0)\n"
    "    except ValueError:\n        return\n    assert False\n"
)


def _runner_repo(
    clone: Path, files_base: dict[str, str], files_fixed: dict[str, str], executable: list[str]
) -> tuple[str, str]:
    for rel, text in files_base.items():
        (clone / rel).parent.mkdir(parents=True, exist_ok=True)
        (clone / rel).write_text(text)
    for rel in executable:
        (clone / rel).chmod(0o755)
    git("init", "-q", "-b", "main", cwd=clone)
    git("add", "-A", cwd=clone)
    git("commit", "-qm", "base", cwd=clone)
    base = git("rev-parse", "HEAD", cwd=clone).strip()
    for rel, text in files_fixed.items():
        (clone / rel).write_text(text)
    git("commit", "-qam", "fix divide by zero", cwd=clone)
    return base, git("rev-parse", "HEAD", cwd=clone).strip()


@pytest.fixture(scope="module")
def runner_rows(tmp_path_factory):
    """A django-style row (no eval_script: swebench's django command and parser by repo
    name) and a sympy-style row in swebench 5's form (log_parser and eval_script)."""
    repos = tmp_path_factory.mktemp("runner-repos")
    dj = repos / "django__django"
    base, fix = _runner_repo(
        dj,
        {
            "calc.py": BASE_CALC,
            "tests/runtests.py": RUNTESTS,
            "tests/test_sqlite.py": "SECRET_KEY = 'x'\n",
            "tests/calc_tests/__init__.py": "",
            "tests/calc_tests/tests.py": DJANGO_BASE,
        },
        {"calc.py": FIXED_CALC, "tests/calc_tests/tests.py": DJANGO_FIXED},
        ["tests/runtests.py"],
    )
    case = "({}.CalcTests.{})".format("calc_tests.tests", "{}")
    django = {
        "instance_id": "django__django-90001",
        "repo": "django/django",
        "base_commit": base,
        "version": "5.0",
        "patch": git("diff", base, fix, "--", "calc.py", cwd=dj),
        "test_patch": git("diff", base, fix, "--", "tests", cwd=dj),
        "FAIL_TO_PASS": json.dumps([f"test_divide_by_zero {case.format('test_divide_by_zero')}"]),
        "PASS_TO_PASS": json.dumps(
            [f"test_add {case.format('test_add')}", f"test_divide {case.format('test_divide')}"]
        ),
        "problem_statement": "divide(1, 0) must raise ValueError.",
    }
    sy = repos / "acme__symbolic"
    code = {
        "symbolic/__init__.py": "",
        "symbolic/calc.py": BASE_CALC,
        "symbolic/tests/__init__.py": "",
        "symbolic/tests/test_calc.py": SYMPY_BASE,
        "bin/test": BIN_TEST,
    }
    base2, fix2 = _runner_repo(
        sy,
        code,
        {"symbolic/calc.py": FIXED_CALC, "symbolic/tests/test_calc.py": SYMPY_FIXED},
        ["bin/test"],
    )
    test_patch = git("diff", base2, fix2, "--", "symbolic/tests", cwd=sy)
    eval_script = (
        "#!/bin/bash\nset -uxo pipefail\ncd /testbed\n"
        f"git checkout {base2} symbolic/tests/test_calc.py\n"
        f"git apply -v - <<'EOF_1'\n{test_patch}EOF_1\n"
        ": '>>>>> Start Test Output'\n"
        "PYTHONWARNINGS='ignore::UserWarning' bin/test -C --verbose "
        "symbolic/tests/test_calc.py\n"
        ": '>>>>> End Test Output'\n"
        f"git checkout {base2} symbolic/tests/test_calc.py\n"
    )
    sympy = {
        "instance_id": "acme__symbolic-7",
        "repo": "acme/symbolic",
        "base_commit": base2,
        "patch": git("diff", base2, fix2, "--", "symbolic/calc.py", cwd=sy),
        "test_patch": test_patch,
        "eval_script": eval_script,
        "log_parser": "parse_log_sympy",
        "eval_type": "pass_and_fail",
        "FAIL_TO_PASS": ["test_divide_by_zero"],
        "PASS_TO_PASS": ["test_add", "test_divide"],
        "problem_statement": "divide(1, 0) must raise ValueError.",
    }
    return {"repos": repos, "django": django, "sympy": sympy}


@pytest.mark.parametrize("which", ["django", "sympy"])
def test_non_pytest_instance_imports_and_grades_with_swebenchs_parser(runner_rows, tmp_path, which):
    row = runner_rows[which]
    folder = import_instance(row, runner_rows["repos"], tmp_path)
    task = load_task(folder)
    meta = tomllib.loads((folder / "task.toml").read_text())["swebench"]
    assert meta["log_parser"] == ("parse_log_django" if which == "django" else "parse_log_sympy")
    if which == "django":  # swebench's django command, its test labels from test_patch
        assert meta["test_command"] == (
            "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 calc_tests.tests"
        )
    else:  # the eval script's lines between the markers
        assert (
            meta["test_command"].startswith("PYTHONWARNINGS=")
            and "bin/test" in meta["test_command"]
        )
    originals = json.loads(row["FAIL_TO_PASS"]) if which == "django" else row["FAIL_TO_PASS"]
    assert [meta["tests"][t] for t in task.test_spec.fail_to_pass] == originals
    vendored = folder / "tests" / "_repogym_swebench" / "swebench"
    assert (vendored / "harness" / "log_parsers" / "python.py").is_file()
    assert (vendored / "LICENSE").is_file()
    assert task_kind(folder) == "swebench-log"  # `repogym tasks --quality` says log-graded
    report = validate_task(task, reruns=1, workers=2)
    assert report.ok, report.failures
    checks = {c.kind: c for c in report.checks}
    # its seals hold what the runner printed: none vouches for a fail_to_pass test
    assert report.witnessed == (0, 1) and report.strongly == 0
    assert checks["gold"].reward == 1.0 and checks["noop"].reward == 0.0
    f2p = task.test_spec.fail_to_pass[0]
    assert checks["noop"].tests[f2p] == "failed"
    assert all(checks["noop"].tests[t] == "passed" for t in task.test_spec.pass_to_pass)


def test_non_pytest_rows_without_a_parser_or_command_say_the_fix(runner_rows, tmp_path):
    sympy = dict(runner_rows["sympy"])
    with pytest.raises(InstanceError, match="no log parser for 'acme/symbolic'.*add log_parser"):
        import_instance({**sympy, "log_parser": ""}, runner_rows["repos"], tmp_path)
    with pytest.raises(InstanceError, match="no eval_script and swebench had no test command"):
        import_instance({**sympy, "eval_script": ""}, runner_rows["repos"], tmp_path)
    with pytest.raises(InstanceError, match="non-Python runner"):
        import_instance({**sympy, "log_parser": "parse_log_jest"}, runner_rows["repos"], tmp_path)
    assert not any(tmp_path.iterdir())


def test_grade_reports_a_non_pytest_instance_under_its_own_test_ids(runner_rows, tmp_path):
    """`repogym grade` over the imported django-style task: swebench's report.json names
    the tests as the instance does, and make_run_report reads it."""
    row = runner_rows["django"]
    suite = tmp_path / "suite"
    import_instance(row, runner_rows["repos"], suite)
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        json.dumps(
            {
                "instance_id": row["instance_id"],
                "model_patch": row["patch"],
                "model_name_or_path": "gold",
            }
        )
        + "\n"
    )
    out = tmp_path / "graded"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "grade",
            str(preds),
            "--suite",
            str(suite),
            "--out",
            str(out),
            "--no-progress",
            "--run-id",
            "r1",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(
        (out / "logs/run_evaluation/r1/gold" / row["instance_id"] / "report.json").read_text()
    )[row["instance_id"]]
    assert report["resolved"] and report["patch_successfully_applied"]
    assert report["tests_status"]["FAIL_TO_PASS"]["success"] == json.loads(row["FAIL_TO_PASS"])
    assert report["tests_status"]["PASS_TO_PASS"]["success"] == json.loads(row["PASS_TO_PASS"])
    run = json.loads((out / "gold.r1.json").read_text())
    assert run["resolved_ids"] == [row["instance_id"]] and run["total_instances"] == 1


# A task-blind printer: at the runner's exit, a pass line in django's and sympy's formats for
# every test method of every test file under the working directory.
LOG_PRINTER = '''

def _print_passes():
    """At exit, print a pass line in django's and sympy's formats for every test method of
    every test file in the working tree (task-blind: it reads the files it finds)."""
    import ast, atexit, os, sys

    def lines():
        for top, dirs, files in os.walk(os.getcwd()):
            for name in files:
                if not (name.startswith("test") and name.endswith(".py")):
                    continue
                path = os.path.join(top, name)
                rel = os.path.relpath(path, os.getcwd())[:-3].split(os.sep)
                labels = {".".join(rel[i:]) for i in range(len(rel))}
                try:
                    tree = ast.parse(open(path).read())
                except (OSError, SyntaxError, ValueError):
                    continue
                for node in ast.walk(tree):
                    for fn in (node.body if isinstance(getattr(node, "body", None), list) else []):
                        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test"):
                            yield f"{fn.name} ok"
                            if isinstance(node, ast.ClassDef):
                                for label in labels:
                                    yield f"{fn.name} ({label}.{node.name}) ... ok"
                                    yield f"{fn.name} ({label}.{node.name}.{fn.name}) ... ok"

    def write():
        text = "\\n".join(lines()) + "\\n"
        sys.__stdout__.write(text); sys.__stderr__.write(text)
        sys.__stdout__.flush(); sys.__stderr__.flush()
        os._exit(0)

    if "pytest" not in sys.modules and "_pytest" not in sys.modules:  # the runner, not pytest
        atexit.register(write)


_print_passes()
'''


@pytest.mark.parametrize("which", ["django", "sympy"])
def test_what_remains_a_log_printer_forges_a_log_graded_task(runner_rows, tmp_path, which):
    """A non-pytest row is graded from a log that code the agent changed prints: a printer
    of pass lines resolves it without a fix (documented in docs/grading.md, "Imported
    tasks"; `repogym tasks --quality` says log-graded)."""
    task = load_task(import_instance(runner_rows[which], runner_rows["repos"], tmp_path))
    changes = {
        str(p.relative_to(task.repo_dir)): p.read_text() + LOG_PRINTER
        for p in task.repo_dir.rglob("*.py")
        if "test" not in str(p.relative_to(task.repo_dir))
    }
    templates = TemplateCache()
    try:
        got = {
            name: grade(
                task,
                templates.get(task.repo_dir),
                diff,
                mode="binary",
                make_sandbox=lambda spec: make_sandbox("bwrap", spec),
            ).reward
            for name, diff in (("noop", ""), ("printer", make_diff(task.repo_dir, changes)))
        }
    finally:
        templates.close()
    assert got == {"noop": 0.0, "printer": 1.0}
    listing = subprocess.run(
        [sys.executable, "-m", "repogym.cli", "tasks", "--quality", "--dir", str(task.path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert listing.returncode == 0, listing.stderr
    [row] = [line for line in listing.stdout.splitlines() if f"{task.id}-v0" in line]
    assert "swebench-log (log-graded: a forger can print" in row  # the cell may fold
    assert "0/1 (the runner's output)" in row  # its seals hold what the runner printed
