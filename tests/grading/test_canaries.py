"""Canaries never change what a real test sees: they run after the tests of their scope.

A canary that ran a test's own code (the twins of an earlier grader did) and was planted
before a real test that reads shared state made a wrong fix (one that mutates the defaults
it was given) pass in one grading out of two. Canaries now need nothing but builtins and
still come last; the check below runs the masked file with pytest for many seeds.
"""

from __future__ import annotations

import ast
import random
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from repogym.grading.canaries import mask_test_file

STATEFUL = """\
import copy

DEFAULTS = {"db": {"host": "localhost"}}


def load(defaults, host):
    config = dict(defaults)          # the wrong fix: a shallow copy
    config["db"]["host"] = host
    return config


def test_defaults_are_not_modified():
    before = copy.deepcopy(DEFAULTS)
    first = load(DEFAULTS, "db1")
    assert DEFAULTS == before
    assert first["db"]["host"] == "db1"


def test_host_is_set():
    assert load({"db": {"host": "x"}}, "db2")["db"]["host"] == "db2"


class TestLoad:
    def test_in_a_class(self):
        before = copy.deepcopy(DEFAULTS)
        load(DEFAULTS, "db3")
        assert DEFAULTS == before

    def test_other(self):
        assert load({"db": {}}, "h")["db"] == {"host": "h"}
"""


def _defs(body: list[ast.stmt]) -> list[str]:
    return [n.name for n in body if isinstance(n, ast.FunctionDef | ast.ClassDef)]


def test_every_canary_comes_after_the_last_test_of_its_scope():
    for seed in range(20):
        text, masked = mask_test_file(STATEFUL, "tests/test_state.py", random.Random(seed))
        tree = ast.parse(text)
        canaries = {c.node_id.rsplit("::", 1)[1] for c in masked.canaries}
        real = {k.rsplit("::", 1)[1] for k in masked.renamed}
        assert canaries and real
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
        for names in (_defs(tree.body), _defs(cls.body)):
            seen_canary = False
            for name in names:
                if name in canaries:
                    seen_canary = True
                elif name in real:
                    assert not seen_canary, (seed, name, text)
        assert any(not c.must_pass for c in masked.canaries)  # a completed run exits 1
        assert any(c.must_pass for c in masked.canaries)


def _plant_seeds(folder: Path, seeds: int = 8) -> dict:
    """STATEFUL masked under each seed, one file per seed (one pytest run covers them all)."""
    planted = {}
    for seed in range(seeds):
        name = f"test_state_{seed}.py"
        text, planted[seed] = mask_test_file(STATEFUL, name, random.Random(seed))
        (folder / name).write_text(text)
    return planted


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest run over the planted files of ``folder`` (quiet, no cache)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "."],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_every_canary_is_collected_where_it_was_planted(tmp_path: Path):
    """STATEFUL ends with a test class: its canaries and the module's meet at the last line,
    and the module's, planted first, once swallowed the class's (nested in a function, never
    collected: the judge then called an honest run forged)."""
    planted = _plant_seeds(tmp_path)
    out = _pytest(tmp_path, "--collect-only")
    collected = set(out.stdout.split())
    for seed, masked in planted.items():
        assert any("::Test" in c.node_id for c in masked.canaries)
        missing = [c.node_id for c in masked.canaries if c.node_id not in collected]
        assert not missing, (seed, missing, out.stdout)
        assert set(masked.renamed) <= collected


def test_a_wrong_fix_fails_its_state_test_under_every_seed(tmp_path: Path):
    planted = _plant_seeds(tmp_path)
    out = _pytest(tmp_path, "-rA")
    lines = {
        ln.split()[1]: ln.split()[0]
        for ln in out.stdout.splitlines()
        if ln.startswith(("PASSED ", "FAILED "))
    }
    for seed, masked in planted.items():
        back = {task_id: lines.get(installed) for installed, task_id in masked.renamed.items()}
        name = f"test_state_{seed}.py"
        assert back[f"{name}::test_defaults_are_not_modified"] == "FAILED", (seed, out.stdout)
        assert back[f"{name}::TestLoad::test_in_a_class"] == "FAILED", (seed, out.stdout)
        assert back[f"{name}::test_host_is_set"] == "PASSED", (seed, out.stdout)


def test_the_log_gets_whole_names_back_in_one_pass():
    from repogym.grading.canaries import Masked
    from repogym.grading.grader import unmask_log

    f = "tests/test_calc.py::"
    masked = Masked(
        renamed={
            f + "test_zero_divide": f + "test_divide_by_zero",
            f + "test_divide": f + "test_add",
        }
    )
    log = (
        f"PASSED {f}test_divide\nFAILED {f}test_zero_divide - boom\n"
        f"FAILED {f}test_divide_add_by_zero - a canary keeps its name\n"
        f"PASSED {f}test_divide[1-2]\n"
    )
    assert unmask_log(log, masked) == (
        f"PASSED {f}test_add\nFAILED {f}test_divide_by_zero - boom\n"
        f"FAILED {f}test_divide_add_by_zero - a canary keeps its name\n"
        f"PASSED {f}test_add[1-2]\n"
    )


def test_a_file_whose_test_names_use_few_words_is_masked_quickly():
    """100 tests named from three words once made the name generator loop for ever."""
    import time

    text = "".join(
        f"def test_reward_at_least_{i:03d}():\n    assert {i} == {i}\n\n\n" for i in range(100)
    )
    start = time.monotonic()
    masked_text, masked = mask_test_file(text, "tests/test_r.py", random.Random(0), seal=True)
    assert time.monotonic() - start < 30
    assert len(set(masked.renamed)) == 100
    ast.parse(masked_text)


ORDERED = """\
import unittest

SHARED = {"prefix": "language-"}


class TestFenced(unittest.TestCase):
    # as markdown's fenced-code tests: one leaves a setting behind, and the tests after it
    # in name order (unittest's order) expect it; the one before expects the default
    def test_alt_prefix(self):
        SHARED["prefix"] = "lang-"
        self.assertEqual(SHARED["prefix"], "lang-")

    def test_b_keeps_alt(self):
        self.assertEqual(SHARED["prefix"], "lang-")

    def test_a_default(self):
        self.assertEqual(SHARED["prefix"], "language-")
"""


def test_renamed_unittest_methods_run_in_their_own_order_under_every_seed(tmp_path: Path):
    """unittest runs a class's methods in name order, so random names reordered tests
    that share state: they failed in some gradings and passed in others. The new names
    sort as the old ones do."""
    renamed = {}
    for seed in range(12):
        text, masked = mask_test_file(ORDERED, f"test_ordered_{seed}.py", random.Random(seed))
        (tmp_path / f"test_ordered_{seed}.py").write_text(text)
        renamed[seed] = masked.renamed
        # the new names sort as the old ones
        pairs = sorted((new, old) for new, old in masked.renamed.items() if "::TestFenced" in old)
        assert [old for _, old in pairs] == sorted(old for _, old in pairs), (seed, pairs)
    out = _pytest(tmp_path, "-rA")
    failed = {ln.split()[1] for ln in out.stdout.splitlines() if ln.startswith("FAILED ")}
    for seed, back in renamed.items():
        assert not [back[n] for n in failed if n in back], (seed, out.stdout[-2000:])


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_log_gets_names_back_as_one_regex_of_every_name_would(data):
    """The names come back where a regex of every name, longest first, whole node ids only
    (what the log's unmasking means), finds them: over logs that mix node ids, their heads,
    longer names, case ids and noise."""
    import re

    from repogym.grading.canaries import Masked
    from repogym.grading.grader import unmask_log

    files = ["t.py", "a/t.py", "test_x.py"]
    parts = st.sampled_from(["test_a", "test_ab", "TestK::test_a", "test_a[1-2]", "test_a[x y]"])
    ids = st.builds(lambda f, p: f"{f}::{p}", st.sampled_from(files), parts)
    renamed = data.draw(st.dictionaries(ids, ids, max_size=6))
    noise = st.sampled_from([" ", "\n", "_", "-", ".", "/", "x", "::", "[", "]", "1", "é"])
    log = "".join(data.draw(st.lists(st.one_of(ids, noise), max_size=30)))
    masked = Masked(renamed=renamed)
    expected = log
    if renamed:
        names = sorted(renamed, key=len, reverse=True)
        pattern = re.compile(r"(?<![\w./-])(" + "|".join(map(re.escape, names)) + r")(?!\w)")
        expected = pattern.sub(lambda m: renamed[m.group(1)], log)
    assert unmask_log(log, masked) == expected


#: A test file that binds builtins' names (tinydb's tests import ``set`` from
#: ``tinydb.operations``; others define ``sum`` or assign ``max``).
SHADOWING = """\
from operator import add as set
from operator import neg as sorted

try:
    from operator import mul as max
except ImportError:
    max = None

len = None


def sum(values):
    return 0


class TestIt:
    def test_in_a_class(self):
        assert set(1, 2) == 3


def test_one():
    assert sorted(1) == -1
"""


def test_canaries_behave_as_planted_in_a_file_that_binds_builtins_names(tmp_path: Path):
    """Every seed: each must-pass canary passes and each must-fail one fails by its own
    assertion (not by a TypeError from a name the file rebinds), so a grading trusts the
    reports; a star import leaves only canaries that call no builtin."""
    planted = {}
    for seed in range(24):
        text, planted[seed] = mask_test_file(SHADOWING, f"test_s_{seed}.py", random.Random(seed))
        (tmp_path / f"test_s_{seed}.py").write_text(text)
    out = _pytest(tmp_path, "-rA")
    lines = {
        ln.split()[1]: ln for ln in out.stdout.splitlines() if ln.startswith(("PASSED ", "FAILED "))
    }
    for seed, masked in planted.items():
        for c in masked.canaries:
            line = lines[c.node_id]
            assert line.startswith("PASSED" if c.must_pass else "FAILED"), (seed, line)
            assert c.must_pass or "- ass" in line, (seed, line)  # its assertion failed
    starred, _ = mask_test_file(
        "from os import *\n\n\ndef test_x():\n    pass\n", "t.py", random.Random(0)
    )
    canary_lines = starred.split("    pass\n", 1)[1]  # after the (renamed) test
    assert not any(f"{b}(" in canary_lines for b in ("sorted", "len", "sum", "max", "min", "set"))
