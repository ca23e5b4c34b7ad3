"""Discovery for `repogym synth --pypi`: the tests it keeps are those the grader can hide."""

from __future__ import annotations

from pathlib import Path

import pytest

from repogym.quality.sandboxed_tests import SandboxRunner
from repogym.scenarios.synth import SynthError

TESTS = """\
import sys

from calc import add


def test_add():
    assert add(2, 3) == 5


def test_reads_a_file_named_after_itself():
    # like a snapshot/refdata library: the expectation is keyed by the test's own name
    assert sys._getframe().f_code.co_name == "test_reads_a_file_named_after_itself"


class TestAdd:
    def test_zero(self):
        assert add(0, 0) == 0
"""


def test_a_test_that_depends_on_its_own_name_is_not_kept(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(TESTS)
    runner = SandboxRunner(None, {"pythonpath": "."})
    assert runner.collect(root, timeout_s=60) == [
        "tests/test_calc.py::TestAdd::test_zero",
        "tests/test_calc.py::test_add",
    ]


SHUFFLED = """\
import os

import pytest

from calc import add

# Each process draws another order, and pytest names a dict parameter by its index, so the
# ids name other cases in the next run (isodate parametrizes over a set of tuples, one
# holding None, whose hash in Python 3.11 is its address: the same effect).
CASES = sorted(range(6), key=lambda _: os.urandom(4))


@pytest.mark.parametrize(("n", "box"), [(n, {"n": n}) for n in CASES])
def test_shuffled(n, box):
    assert add(n, 0) == box["n"]


@pytest.mark.parametrize(("n", "box"), [(n, {"n": n}) for n in CASES[::-1]])
def test_reversed(n, box):
    assert add(0, n) == box["n"]


@pytest.mark.parametrize(("n", "box"), [(n, {"n": n}) for n in CASES[1:] + CASES[:1]])
def test_rotated(n, box):
    assert add(n, n) == 2 * box["n"]


@pytest.mark.parametrize(("n", "box"), [(n, {"n": n}) for n in [0, *CASES]])
def test_prefixed(n, box):
    assert add(n, 1) == box["n"] + 1


@pytest.mark.parametrize("n", [1, 2])
def test_fixed(n):
    assert add(n, n) == 2 * n
"""


def test_a_parametrized_test_whose_ids_change_between_runs_is_not_kept(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(SHUFFLED)
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        assert runner.collect(root, timeout_s=60) == [
            "tests/test_calc.py::test_fixed[1]",
            "tests/test_calc.py::test_fixed[2]",
        ]


def test_stable_ids():
    from repogym.quality.sandboxed_tests import stable_ids

    a = {"t.py::f[0-x]", "t.py::f[1-y]", "t.py::g[1]", "t.py::h"}
    b = {"t.py::f[0-y]", "t.py::f[1-x]", "t.py::g[1]", "t.py::h"}
    c = {"t.py::f[0-x]", "t.py::f[1-y]", "t.py::g[1]", "t.py::h", "t.py::k"}
    assert stable_ids([a, b, c]) == {"t.py::g[1]", "t.py::h"}
    assert stable_ids([a, a]) == a
    assert stable_ids([]) == set()


UNITTEST = """\
import unittest

from calc import add


class AddMixin:
    def test_inherited(self):
        self.assertEqual(add(1, 1), 2)


class AddTest(unittest.TestCase, AddMixin):
    def test_written_here(self):
        self.assertEqual(add(2, 2), 4)


class TestOther(unittest.TestCase, AddMixin):
    pass
"""


def test_unittest_classes_of_any_name_are_listed(tmp_path: Path) -> None:
    """cachetools names its TestCase classes `*Test` and inherits tests from mixins: the
    grader leaves such a class its names, so all its tests can be listed; a method a
    renamed Test* class inherits cannot be mapped back and is left out."""
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(UNITTEST)
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        assert runner.collect(root, timeout_s=60) == [
            "tests/test_calc.py::AddTest::test_inherited",
            "tests/test_calc.py::AddTest::test_written_here",
        ]


MIXIN = """\
import unittest

import pytest

from calc import add


class AddMixin:
    def test_inherited(self):
        self.assertEqual(add(1, 1), 2)


class FirstTest(unittest.TestCase, AddMixin):
    def test_written_here(self):
        self.assertEqual(add(2, 2), 4)


class SecondTest(unittest.TestCase, AddMixin):
    pass


@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    assert add(n, 0) == n
"""


def test_a_method_a_mixin_gives_several_classes_is_one_test(tmp_path: Path) -> None:
    """cachetools' CacheTestMixin is inherited by every cache's TestCase: a bug in the base
    class fails each of its methods once per class, which is one failing test each, not
    seven. Parametrized cases stay tests of their own."""
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(MIXIN)
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        ids = runner.collect(root, timeout_s=60)
        assert len(ids) == 5, ids
        same = {t: runner.same_test(t) for t in ids}
    first, second = (
        same[f"tests/test_calc.py::{c}::test_inherited"] for c in ("FirstTest", "SecondTest")
    )
    assert first == second == "tests/test_calc.py:9"
    assert len(set(same.values())) == 4, same
    assert same["tests/test_calc.py::test_param[1]"] != same["tests/test_calc.py::test_param[2]"]


def test_a_mutant_run_stops_once_too_many_tests_fail(tmp_path: Path) -> None:
    """A mutant that fails more tests than a task may list is dropped whatever the rest do:
    its run stops there (cachetools: most mutants of its base class break every cache's
    tests), and the pristine runs stay whole."""
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n"
        + "".join(f"\n\ndef test_{n}():\n    assert add({n}, 1) == {n + 1}\n" for n in range(12))
    )
    with SandboxRunner(None, {"pythonpath": "."}, stop_after=3) as runner:
        ids = runner.collect(root, timeout_s=60)
        assert len(ids) == 12
        (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        status, _ = runner.run(root, ids, timeout_s=60)
        assert sorted(status.values()).count("failed") == 4, status
        runner.stop_after = None
        status, _ = runner.run(root, ids, timeout_s=60)
        assert set(status.values()) == {"failed"}, status


def _calc(tmp_path: Path, tests: str) -> Path:
    """A package ``calc`` (``add``) under ``tmp_path`` with ``tests`` as its test file."""
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(tests)
    return root


def test_tests_run_with_the_graders_environment(tmp_path: Path) -> None:
    """python-slugify's tests run `python -m slugify` in a subprocess: graded, that child
    gets the grader's environment (no PYTHONPATH, so not the task's requirements), so
    synthesis must see the same or every task it lists the test in fails noop."""
    root = _calc(
        tmp_path,
        "import os\nimport subprocess\nimport sys\n\nfrom calc import add\n\n\n"
        "def test_add():\n    assert add(1, 1) == 2\n\n\n"
        "def test_child_sees_no_pythonpath():\n"
        "    code = 'import os, sys; sys.exit(\"PYTHONPATH\" in os.environ)'\n"
        "    assert subprocess.run([sys.executable, '-c', code]).returncode == 0\n"
        "    assert os.environ['HOME'] == '/tmp'\n",
    )
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        assert runner.collect(root, timeout_s=60) == [
            "tests/test_calc.py::test_add",
            "tests/test_calc.py::test_child_sees_no_pythonpath",
        ]


#: Ways a test starts a child process that runs the package's code.
CHILDREN = {
    "subprocess": "out = subprocess.run([sys.executable, '-m', 'calc'], capture_output=True, "
    "text=True).stdout\n    assert out == '5\\n'",
    "os.system": "assert os.system(f'{sys.executable} -m calc > /dev/null') == 0",
    "multiprocessing spawn": "child = multiprocessing.get_context('spawn').Process("
    "target=calc.check)\n    child.start()\n    child.join()\n    assert child.exitcode == 0",
    "multiprocessing fork": "child = multiprocessing.get_context('fork').Process("
    "target=calc.check)\n    child.start()\n    child.join()\n    assert child.exitcode == 0",
}


@pytest.mark.parametrize("how", sorted(CHILDREN))
def test_a_test_that_starts_a_process_always_reruns(tmp_path: Path, how: str) -> None:
    """A mutant's run reruns the tests that reached the changed function; the calls of a
    test's child process (python-slugify's `python -m slugify`) are not traced, so such a
    test reruns whatever changed, or its failure is missed and it is listed in
    pass_to_pass of a task whose noop then fails it. However the child is started."""
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(
        "import sys\n\n\ndef add(a, b):\n    return a + b\n\n\n"
        "def check():\n    sys.exit(0 if add(2, 3) == 5 else 1)\n\n\n"
        "if __name__ == '__main__':\n    print(add(2, 3))\n    check()\n"
    )
    (root / "tests" / "test_calc.py").write_text(
        "import multiprocessing\nimport os\nimport subprocess\nimport sys\n\nimport calc\n\n\n"
        f"def test_cli():\n    {CHILDREN[how]}\n\n\n"
        "def test_other():\n    assert True\n"
    )
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        ids = runner.collect(root, timeout_s=60)
        assert ids == ["tests/test_calc.py::test_cli", "tests/test_calc.py::test_other"]
        (root / "calc.py").write_text((root / "calc.py").read_text().replace("a + b", "a - b"))
        status, _ = runner.run(root, ids, timeout_s=60)
    assert status == {
        "tests/test_calc.py::test_cli": "failed",
        "tests/test_calc.py::test_other": "passed",
    }


def test_a_function_run_at_import_reaches_every_test(tmp_path: Path) -> None:
    """python-slugify builds PRE_TRANSLATIONS at import with add_uppercase_char: no test
    calls it, but a test reads the table, so a mutant of it reruns every test."""
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def make():\n    return {1: 2}\n\n\nTABLE = make()\n")
    (root / "tests" / "test_calc.py").write_text(
        "from calc import TABLE\n\n\ndef test_table():\n    assert TABLE == {1: 2}\n"
    )
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        ids = runner.collect(root, timeout_s=60)
        (root / "calc.py").write_text((root / "calc.py").read_text().replace("2}", "3}"))
        status, _ = runner.run(root, ids, timeout_s=60)
    assert status == {"tests/test_calc.py::test_table": "failed"}


def test_a_mutants_run_reruns_only_the_tests_that_reach_it(tmp_path: Path) -> None:
    """The module's own code runs at import too, and spans the whole file: counted as a
    function run at import, it made every mutant rerun every test (selection narrowed
    nothing). A mutant of ``add`` reruns the one test that calls it."""
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(
        "class Calc:\n    def add(self, a, b):\n        return a + b\n\n"
        "    def sub(self, a, b):\n        return a - b\n"
    )
    (root / "tests" / "test_calc.py").write_text(
        "from calc import Calc\n\n\ndef test_add():\n    assert Calc().add(2, 3) == 5\n\n\n"
        "def test_sub():\n    assert Calc().sub(2, 3) == -1\n"
    )
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        ids = runner.collect(root, timeout_s=60)
        (root / "calc.py").write_text((root / "calc.py").read_text().replace("a + b", "a * b"))
        status, _ = runner.run(root, ids, timeout_s=60)
        assert runner.stats["tests run"] == 1
    assert status == {
        "tests/test_calc.py::test_add": "failed",
        "tests/test_calc.py::test_sub": "passed",
    }


#: A package whose functions come in every form the traced run numbers.
FORMS = {
    "shapes/__init__.py": (
        "import functools\n\n\n"
        "def double(x):\n"
        '    """Twice x."""\n'
        "    return x * 2\n\n\n"
        "triple = lambda x: x * 3  # noqa: E731\n\n\n"
        "@functools.lru_cache(maxsize=None)\n"
        "def square(x):\n"
        "    return x * x\n\n\n"
        "def evens(n):\n"
        "    for i in range(n):\n"
        "        if i % 2 == 0:\n"
        "            yield i\n\n\n"
        "class Box:\n"
        "    def __init__(self, v):\n"
        "        self.v = v\n\n"
        "    @property\n"
        "    def half(self):\n"
        "        return self.v / 2\n\n\n"
        "async def later(x):\n"
        "    return x + 1\n\n\n"
        "def broken():\n"
        "    raise ValueError('line 37')\n"
    ),
}
FORM_TESTS = """\
import asyncio
import inspect
import sys

import shapes


def test_double():
    assert shapes.double(2) == 4
    assert shapes.double.__doc__ == "Twice x."


def test_triple():
    assert shapes.triple(2) == 6


def test_square():
    assert shapes.square(3) == 9


def test_evens():
    assert list(shapes.evens(5)) == [0, 2, 4]


def test_half():
    assert shapes.Box(4).half == 2


def test_later():
    assert asyncio.run(shapes.later(1)) == 2


def test_lines():
    # the package's code as its tests see it: its own source and line numbers
    try:
        shapes.broken()
    except ValueError:
        tb = sys.exc_info()[2]
        while tb.tb_next is not None:
            tb = tb.tb_next
    assert tb.tb_lineno == 37
    assert inspect.getsource(shapes.broken).startswith("def broken():")
"""


@pytest.mark.parametrize(
    ("old", "new", "reached"),
    [
        ("return x * 2", "return x * 5", "test_double"),
        ("x * 3", "x * 4", "test_triple"),
        ("return x * x", "return x + x", "test_square"),
        ("if i % 2 == 0", "if i % 2 == 1", "test_evens"),
        ("return self.v / 2", "return self.v / 3", "test_half"),
        ("return x + 1", "return x + 2", "test_later"),
    ],
)
def test_a_mutants_run_reruns_the_tests_that_reach_it_in_every_form(
    tmp_path: Path, old: str, new: str, reached: str
) -> None:
    """The traced run numbers the package's functions when they are imported (a lambda, a
    decorated function, a generator, a property, a coroutine, each by its own lines), and
    the tests see the code they would see without it: docstrings, source and line numbers.
    A mutant reruns exactly the test that reaches its function."""
    root = tmp_path / "pkg"
    (root / "shapes").mkdir(parents=True)
    (root / "tests").mkdir()
    for rel, text in FORMS.items():
        (root / rel).write_text(text)
    (root / "tests" / "test_shapes.py").write_text(FORM_TESTS)
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        ids = runner.collect(root, timeout_s=60)
        assert len(ids) == 7, runner.dropped  # test_lines among them
        init = root / "shapes" / "__init__.py"
        init.write_text(init.read_text().replace(old, new))
        status, _ = runner.run(root, ids, timeout_s=60)
        assert runner.stats["tests run"] == 1
    assert {t for t, s in status.items() if s == "failed"} == {f"tests/test_shapes.py::{reached}"}


def test_a_test_that_reloads_a_module_reaches_every_function_in_it(tmp_path: Path) -> None:
    """pyrsistent's tests reload ``_pvector`` with an environment variable set: every
    function of the module is defined anew, as a tracer sees the module's code run, so a
    change in any of them reruns that test too."""
    root = _calc(
        tmp_path,
        "import importlib\n\nimport calc\n\n\ndef test_reload():\n"
        "    assert importlib.reload(calc) is calc\n\n\n"
        "def test_add():\n    assert calc.add(2, 3) == 5\n\n\n"
        "def test_other():\n    assert True\n",
    )
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        ids = runner.collect(root, timeout_s=60)
        (root / "calc.py").write_text((root / "calc.py").read_text().replace("a + b", "a - b"))
        status, _ = runner.run(root, ids, timeout_s=60)
        assert runner.stats["tests run"] == 2  # test_add and test_reload
    assert status["tests/test_calc.py::test_add"] == "failed"


def test_a_first_run_that_is_killed_is_named_as_such(tmp_path: Path) -> None:
    """asttokens' slow test (which the project deselects with ``-m 'not slow'`` in its
    own addopts) filled the sandbox's memory and the process was killed mid-run: the error
    says so and names the test that was running, not the collection errors of its
    test data."""
    killing = TESTS.replace("import sys\n", "import os\nimport signal\nimport sys\n") + (
        "\n\ndef test_huge():\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        with pytest.raises(SynthError, match="stopped after 4 tests") as info:
            runner.collect(_calc(tmp_path, killing), timeout_s=60)
    assert "tests/test_calc.py::test_huge" in str(info.value)
    assert "memory limit" in str(info.value)


def test_a_mutant_that_loops_is_stopped_at_a_multiple_of_the_suites_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mutant that makes a test loop held a run for the whole timeout (pyrsistent: 300 s
    a mutant, its suite 17 s); it is stopped at a multiple of the pristine suite's time
    now, and its tests are "timed out", neither passed nor missing."""
    from repogym.quality import sandboxed_tests

    monkeypatch.setattr(sandboxed_tests, "MUTANT_MIN_S", 3.0)
    monkeypatch.setattr(sandboxed_tests, "MUTANT_SLOWDOWN", 0)  # the limit is the floor
    root = _calc(tmp_path, "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        ids = runner.collect(root, timeout_s=60)
        (root / "calc.py").write_text("def add(a, b):\n    while True:\n        pass\n")
        status, _ = runner.run(root, ids, timeout_s=600)
    assert status == {"tests/test_calc.py::test_add": "timed out"}
    assert runner.log == "timed out after 3.0s"


def test_a_module_run_from_its_file_reaches_every_test(tmp_path: Path) -> None:
    """A test that runs a module of the package from its file (``runpy.run_path``), not by
    importing it, runs code the traced run did not number: a change in that file reruns
    every test."""
    root = _calc(
        tmp_path,
        "import runpy\n\n\ndef test_script():\n"
        "    assert runpy.run_path('calc.py')['add'](2, 3) == 5\n\n\n"
        "def test_other():\n    assert True\n",
    )
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        ids = runner.collect(root, timeout_s=60)
        assert "calc.py" in runner.traced()["unhooked"]
        (root / "calc.py").write_text((root / "calc.py").read_text().replace("a + b", "a - b"))
        status, _ = runner.run(root, ids, timeout_s=60)
    assert status == {
        "tests/test_calc.py::test_other": "passed",
        "tests/test_calc.py::test_script": "failed",
    }


def test_tests_failing_on_the_pristine_package_do_not_stop_a_mutants_run(tmp_path: Path) -> None:
    """humanize's benchmark tests fail in the sandbox (so are not listed) and come first
    in a run of whole files: counted, they stopped a mutant's run before the listed tests
    ran, and those were reported passed, then failed noop in grading."""
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("OFFSET = 0\n\n\ndef add(a, b):\n    return a + b + OFFSET\n")
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n"
        + "".join(f"\n\ndef test_broken_{n}():\n    assert False\n" for n in range(4))
        + "".join(f"\n\ndef test_add_{n}():\n    assert add({n}, 1) == {n + 1}\n" for n in range(3))
    )
    with SandboxRunner(None, {"pythonpath": "."}, stop_after=2) as runner:
        ids = runner.collect(root, timeout_s=60)
        assert len(ids) == 3
        (root / "calc.py").write_text((root / "calc.py").read_text().replace("= 0", "= 1"))
        status, _ = runner.run(root, ids, timeout_s=60)
    assert set(status.values()) == {"failed"}, status


def test_an_unknown_plugin_marker_is_named(tmp_path: Path) -> None:
    """python-dateutil marks tests `no_cover` (pytest-cov's marker) and makes warnings
    errors: without pytest-cov collection stops, and the error says which plugin to add."""
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(
        "import pytest\n\n\n@pytest.mark.no_cover\ndef test_add():\n    assert True\n"
    )
    with (
        SandboxRunner(None, {"pythonpath": ".", "filterwarnings": "error"}) as runner,
        pytest.raises(
            SynthError,
            match=r"unknown marker `no_cover`.*--requirement "
            r"pytest-cov",
        ),
    ):
        runner.collect(root, timeout_s=60)


def test_a_missing_test_requirement_is_named(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(
        "import not_installed_anywhere\n\n\ndef test_add():\n    assert True\n"
    )
    with (
        SandboxRunner(None, {"pythonpath": "."}) as runner,
        pytest.raises(
            SynthError,
            match=r"fail to import not_installed_anywhere\. Fix: .*--requirement "
            r"not_installed_anywhere",
        ),
    ):
        runner.collect(root, timeout_s=60)


def test_calls_and_reproductions_run_in_the_sandbox(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    hidden = ["tests/test_calc.py"]
    script = "from calc import add\nassert add(2, 3) == 5, add(2, 3)\nprint('ok')\n"
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        runner.collect(root, timeout_s=60)
        calls = runner.calls(root, ["tests/test_calc.py::test_add"], hidden, 60)
        assert [c["text"] for c in calls["tests/test_calc.py::test_add"]] == ["add(2, 3)"]
        assert runner.script(root, script, hidden, 60) == (0, "ok\n")
        probe = "import os\nprint(os.path.exists('tests/test_calc.py'), os.getcwd())\n"
        assert runner.script(root, probe, hidden, 60) == (0, "False /workspace\n")
        (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")  # the bug
        code, out = runner.script(root, script, hidden, 60)
        assert code == 1 and out.strip().endswith("AssertionError: -1")
        assert (
            runner.calls(root, ["tests/test_calc.py::test_add"], hidden, 60)[
                "tests/test_calc.py::test_add"
            ][0]["outcome"]["returned"]
            == "-1"
        )


BULKY = """\
import sys

from calc import add


def test_a_writes_five_megabytes_of_records():
    # as a traced run of a suite of 20,000 tests does (packaging's): more than the cap on
    # what a sandboxed command may print
    sys.modules["rg_probe"]._out.write(("x" * 1023 + "\\n") * 5 * 1024)


def test_add():
    assert add(2, 3) == 5
"""


def test_the_records_of_a_run_are_read_whole_past_the_output_cap(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(BULKY)
    runner = SandboxRunner(None, {"pythonpath": "."})
    assert runner.collect(root, timeout_s=60) == [
        "tests/test_calc.py::test_a_writes_five_megabytes_of_records",
        "tests/test_calc.py::test_add",
    ]


def test_a_package_whose_tests_never_run_its_code_is_refused_with_the_cause(tmp_path: Path) -> None:
    """iniconfig's tests import the copy pytest loaded for itself, never the repository's:
    no mutant can fail a test, and synthesis says so instead of trying every mutant."""
    from repogym.scenarios.synth import Synthesis

    root = _calc(
        tmp_path,
        "def add(a, b):  # another copy\n    return a + b\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n",
    )
    runner = SandboxRunner(None, {"pythonpath": "."})
    with (
        runner,
        pytest.raises(SynthError, match="no test runs the package's code in the repository"),
        Synthesis(root, tmp_path / "out", runner=runner),
    ):
        pass
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    with SandboxRunner(None, {"pythonpath": "."}) as runner:
        with Synthesis(root, tmp_path / "out", runner=runner) as synthesis:
            assert "calc.py" in runner.reached_files()
            assert len(synthesis.more(1)) <= 1
