"""Suite manifests: every passing test listed once per package, materialised task folders,
release-history tasks added per release (munch's real sdists; nothing is graded here)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from repogym.quality.suite_build import history_entries, write_entry
from repogym.scenarios import pypi, suites
from repogym.scenarios.dependencies import DependencySpec
from repogym.scenarios.mutation import file_diff
from repogym.scenarios.synth import TaskFiles, write_task
from repogym.scenarios.task import load_task

TESTS = (
    "tests/test_munch.py::test_base",
    "tests/test_munch.py::test_contains",
    "tests/test_munch.py::test_getattr",
)
OLD = "    def __getattr__(self, k):"


def _entry(src: Path, version: str = "4.0.0") -> suites.PackageEntry:
    sdist = pypi.download(f"munch=={version}")
    text = (src / "munch" / "__init__.py").read_text()
    first, rest = text.split(OLD, 1)
    buggy = first + OLD + rest.replace("return", "return None  #", 1)
    gold = file_diff("munch/__init__.py", buggy, text)
    task = suites.TaskEntry(
        "munch-1",
        gold,
        TESTS[2:],
        suites.all_others(TESTS, TESTS[2:]),
        "A bug report.",
        {},
        reproduction="assert True\n",
    )
    return suites.PackageEntry(
        name="munch",
        version=version,
        sdist=sdist.path.name,
        sha256=sdist.sha256,
        split="train",
        kind="data-structures",
        environment=DependencySpec(requirements=()),
        ini_options={},
        tests_dest="tests",
        hidden=("tests/test_munch.py",),
        tasks=(task,),
        tests=TESTS,
        plugins=("pytest_mock",),
        timeout_s=300,
    )


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return pypi.unpack(pypi.download("munch==4.0.0"), tmp_path_factory.mktemp("m") / "src")


def test_pass_to_pass_all_is_written_once_per_package(src, tmp_path):
    entry = _entry(src)
    data = entry.to_json()
    assert data["tests"] == list(TESTS) and "pass_to_pass" not in data["tasks"][0]
    back = suites.package_from_json(json.loads(json.dumps(data)), tmp_path / "munch.json")
    assert back == entry and back.tasks[0].pass_to_pass == TESTS[:2]
    module = json.loads(json.dumps(data))
    module["tasks"][0].update(p2p_scope="module", pass_to_pass=[TESTS[0]])
    assert suites.package_from_json(module, tmp_path / "x.json").tasks[0].pass_to_pass == (
        TESTS[0],
    )


def test_materialised_tasks_have_every_test_no_metadata_and_the_reproduction(src, tmp_path):
    entry = _entry(src)
    [(_task, folder, written)] = list(suites.materialise(entry, tmp_path / "suite"))
    assert written
    t = load_task(folder)
    assert t.test_spec.pass_to_pass == TESTS[:2] and t.test_spec.p2p_scope == "all"
    assert t.test_spec.command.endswith("-p no:cacheprovider -p pytest_mock")
    assert t.test_spec.timeout_s == 300 and t.tags == ("realpy", "munch", "mutation")
    assert (folder / "reproduction.py").read_text() == "assert True\n"
    assert TESTS[2] in (folder / "HINTS.md").read_text()
    left = {str(p.relative_to(folder / "repo")) for p in (folder / "repo").rglob("*")}
    assert "munch.egg-info/SOURCES.txt" not in left and "munch.egg-info/PKG-INFO" in left
    assert not [p for p in (folder / "repo").rglob("*.pyc")]


def _history_task(src: Path, out: Path, version: str) -> Path:
    text = (src / "munch" / "__init__.py").read_text()
    head, _, tail = text.rpartition("return")  # not the fix of the mutation entry's task
    buggy = f"{head}return None  #{tail}"
    return write_task(
        TaskFiles(
            id=f"munch-h{version.replace('.', '')}",
            repo=src,
            hidden=["tests/test_munch.py"],
            tests_dest="tests",
            buggy={"munch/__init__.py": buggy},
            fail_to_pass=[TESTS[1]],
            pass_to_pass=[TESTS[0], TESTS[2]],
            statement="From the changelog.",
            reproduction="assert True\n",
            environment=DependencySpec(requirements=()),
            extra_toml=f'[history]\npackage = "munch"\nbase = "0"\nfixed = "{version}"\n',
        ),
        out,
    )


def test_history_tasks_join_their_release_or_get_an_entry_of_their_own(src, tmp_path):
    manifests = tmp_path / "manifests"
    write_entry(_entry(src), manifests, suite="demo", env_id="repogym/Demo-v0", description="")
    same = _history_task(src, tmp_path / "mined", "4.0.0")
    other = _history_task(src, tmp_path / "mined", "2.5.0")
    changed = {
        e.name: e
        for e in history_entries(
            [same, other], manifests, split="train", kind="data-structures", say=lambda m: None
        )
    }
    assert set(changed) == {"munch", "munch-2.5.0"}
    assert [(t.id, t.origin) for t in changed["munch"].tasks] == [
        ("munch-1", "mutation"),
        ("munch-2", "history"),
    ]
    release = changed["munch-2.5.0"]
    assert release.distribution == "munch" and release.project == "munch==2.5.0"
    assert [t.id for t in release.tasks] == ["munch-2.5.0-1"]
    assert release.tests == TESTS and release.tasks[0].pass_to_pass == (TESTS[0], TESTS[2])
    for entry in changed.values():
        write_entry(entry, manifests, suite="demo", env_id="repogym/Demo-v0", description="")
    meta = json.loads((manifests / "suite.json").read_text())
    assert meta["packages"] == ["munch", "munch-2.5.0"]
    # the history mined again: a fix the entry holds already is left out, and said
    said: list[str] = []
    again = _history_task(src, tmp_path / "again", "2.5.0")
    assert history_entries([again], manifests, split="train", kind="k", say=said.append) == []
    assert said == [
        f"left out {again.name}: munch-2.5.0 already holds its fix (the same gold patch)"
    ]
    # held out: a release's history tasks do not join the entry of its mutation tasks when
    # that entry is in another split; they get an entry of their own in theirs
    fresh = tmp_path / "held"
    write_entry(
        dataclasses.replace(_entry(src), split="test_synthetic"),
        fresh,
        suite="demo",
        env_id="repogym/Demo-v0",
        description="",
    )
    [held] = history_entries([same], fresh, split="test", kind="data-structures", say=print)
    assert (held.name, held.split, [t.id for t in held.tasks]) == (
        "munch-4.0.0",
        "test",
        ["munch-4.0.0-1"],
    )


def test_only_tasks_the_manifest_holds_now_are_served(src, tmp_path, monkeypatch):
    """A task validated here and then removed from the manifest, or changed in it (a newer
    repogym), is not served (nor registered, run or audited) until fetched again."""
    import dataclasses

    entry = _entry(src)
    [(task, folder, _)] = list(suites.materialise(entry, tmp_path / "suite"))
    suites.record_validated(
        tmp_path, entry, task, folder, True, {"grader": "g", "witnessed": 1, "f2p": 1}
    )
    suite = suites.Suite("munchy", "repogym/Munchy-v0", "", (entry,))
    monkeypatch.setattr(suites, "load_suite", lambda name: suite)
    [served] = suites.validated_tasks("munchy", tmp_path)
    assert served.id == "munch-1"
    # asked for by its package's name or its entry's (one release's, as `suite fetch` takes)
    release = dataclasses.replace(entry, name="munch-4.0.0", pypi="munch")
    [(task2, folder2, _)] = list(suites.materialise(release, tmp_path / "two" / "suite"))
    suites.record_validated(
        tmp_path / "two", release, task2, folder2, True, {"grader": "g", "witnessed": 1, "f2p": 1}
    )
    monkeypatch.setattr(
        suites,
        "load_suite",
        lambda name: suites.Suite("munchy", "repogym/Munchy-v0", "", (release,)),
    )
    for named in ("munch", "munch-4.0.0"):
        got = suites.validated_tasks("munchy", tmp_path / "two", packages=[named])
        assert [t.id for t in got] == ["munch-1"], named
    with pytest.raises(suites.SuiteError, match="no validated task"):
        suites.validated_tasks("munchy", tmp_path / "two", packages=["munch-9.9.9"])
    monkeypatch.setattr(suites, "load_suite", lambda name: suite)
    changed = dataclasses.replace(
        entry, tasks=(dataclasses.replace(entry.tasks[0], statement="A better bug report."),)
    )
    for now in (changed, dataclasses.replace(entry, tasks=())):
        monkeypatch.setattr(
            suites,
            "load_suite",
            lambda name, now=now: suites.Suite("munchy", "repogym/Munchy-v0", "", (now,)),
        )
        with pytest.raises(
            suites.SuiteError,
            match="1 validated from another version of its manifest.*repogym suite fetch munchy",
        ):
            suites.validated_tasks("munchy", tmp_path)


def test_a_task_under_the_seal_floor_is_withheld_but_runs_by_name(src, tmp_path, monkeypatch):
    """A validated task whose fail_to_pass tests value seals witness under 90 % (or were
    never measured) is not served by default; asked for, it is; the error and
    ``withheld_tasks`` say why."""
    entry = _entry(src)
    [(task, folder, _)] = list(suites.materialise(entry, tmp_path / "suite"))
    suite = suites.Suite("munchy", "repogym/Munchy-v0", "", (entry,))
    monkeypatch.setattr(suites, "load_suite", lambda name: suite)
    for seals, why in (
        (None, "not measured"),
        ({"grader": "g", "witnessed": 8, "f2p": 10}, "8 of 10"),
    ):
        suites.record_validated(tmp_path, entry, task, folder, True, seals)
        with pytest.raises(suites.SuiteError, match="1 withheld, under the seal floor"):
            suites.validated_tasks("munchy", tmp_path)
        [asked] = suites.validated_tasks("munchy", tmp_path, withheld=True)
        assert asked.id == "munch-1"
        assert why in suites.withheld_tasks("munchy", tmp_path)["munch-1"]
    suites.record_seals(tmp_path, "munch-1", {"grader": "g", "witnessed": 9, "f2p": 10})
    assert [t.id for t in suites.validated_tasks("munchy", tmp_path)] == ["munch-1"]
    assert suites.withheld_tasks("munchy", tmp_path) == {}
    # sealed, but no pass_to_pass test reaches the code its fix changes: withheld too
    suites.record_scope(tmp_path, "munch-1", 0)
    assert "no pass_to_pass test reaches" in suites.withheld_tasks("munchy", tmp_path)["munch-1"]
    [asked] = suites.validated_tasks("munchy", tmp_path, withheld=True)
    for reaching in (3, None):  # reached, or a fix outside every function (any test may reach)
        suites.record_scope(tmp_path, "munch-1", reaching)
        assert suites.withheld_tasks("munchy", tmp_path) == {}
    # a history task that reverts a performance change (its changelog says so): withheld
    perf = dataclasses.replace(task, change="performance")
    suites.record_validated(tmp_path, entry, perf, folder, True, {"witnessed": 1, "f2p": 1})
    assert "reverts a performance change" in suites.withheld_tasks("munchy", tmp_path)["munch-1"]


def test_a_change_left_at_bug_is_not_written_and_does_not_move_the_digest(src):
    """Entries written before tasks had a ``change`` keep their digest (a fetched suite is
    not validated again for it); a classified one is written and read back."""
    entry = _entry(src)
    task = entry.tasks[0]
    assert "change" not in entry._task_json(task)
    fields = dataclasses.asdict(task)
    del fields["change"]
    old = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    assert task.digest == old
    feature = dataclasses.replace(task, change="feature")
    assert feature.digest != old and entry._task_json(feature)["change"] == "feature"
    back = suites.package_from_json(
        dataclasses.replace(entry, tasks=(feature,)).to_json(), src / "munch.json"
    )
    assert back.tasks[0].change == "feature"
    bad = dataclasses.replace(entry, tasks=(dataclasses.replace(task, change="refactor"),))
    with pytest.raises(suites.SuiteError, match="change 'refactor'"):
        suites.package_from_json(bad.to_json(), src / "munch.json")


def test_a_package_moved_to_another_split_is_rewritten_and_served_there_not_regraded(
    src, tmp_path, monkeypatch
):
    """A package moved between splits (RealPy's mutation packages went from ``test`` to
    ``test_synthetic``): its validated tasks are not served under the old split's name; the
    next fetch rewrites each folder's task.toml and tells the index, without grading again
    (the split does not change how a task grades)."""
    entry = _entry(src)
    root = tmp_path / "suite"
    [(task, folder, _)] = list(suites.materialise(entry, root))
    suites.record_validated(
        root, entry, task, folder, True, {"grader": "g", "witnessed": 1, "f2p": 1}
    )
    moved = dataclasses.replace(entry, split="test_synthetic")
    monkeypatch.setattr(
        suites, "load_suite", lambda name: suites.Suite("munchy", "repogym/M-v0", "", (moved,))
    )
    with pytest.raises(suites.SuiteError, match="1 validated from another version"):
        suites.validated_tasks("munchy", root)
    # the fetch's two steps: the folder is written again, the index keeps the validation
    [(_, again, written)] = list(suites.materialise(moved, root))
    assert written and again == folder and load_task(folder).split == "test_synthetic"
    assert suites.is_validated(root, moved, task)
    assert suites.read_index(root)["munch-1"]["split"] == "test_synthetic"
    [served] = suites.validated_tasks("munchy", root, split="test_synthetic")
    assert served.id == "munch-1" and served.split == "test_synthetic"
    [(_, _, written)] = list(suites.materialise(moved, root))
    assert not written  # nothing changed since


def test_a_package_is_never_in_train_and_held_out_both(tmp_path, monkeypatch):
    folder = tmp_path / "s"
    folder.mkdir()
    base = {"name": "p", "env_id": "repogym/P-v0", "description": ""}
    (folder / "suite.json").write_text(json.dumps({**base, "packages": ["a", "a-2"]}))
    src_entry = json.loads((suites.MANIFESTS / "realpy" / "humanize-4.15.0.json").read_text())
    for name, split in (("a", "train"), ("a-2", "test")):
        (folder / f"{name}.json").write_text(
            json.dumps({**src_entry, "name": name, "pypi": "a", "split": split, "tasks": []})
        )
    monkeypatch.setattr(suites, "MANIFESTS", tmp_path)
    with pytest.raises(suites.SuiteError, match="a has entries in train and in \\['test'\\]"):
        suites.load_suite("s")
    (folder / "a.json").write_text(
        json.dumps({**src_entry, "name": "a", "pypi": "a", "split": "test_synthetic", "tasks": []})
    )
    assert {p.split for p in suites.load_suite("s").packages} == {"test", "test_synthetic"}


def test_a_task_records_the_day_its_release_shipped(src, tmp_path):
    """The manifest's ``released`` day becomes a ``released:YYYY-MM-DD`` tag (and is what
    ``suite fetch --since`` compares); a day that is not one is refused, named."""
    entry = dataclasses.replace(_entry(src), released="2023-10-01")
    data = entry.to_json()
    assert data["released"] == "2023-10-01"
    assert suites.package_from_json(json.loads(json.dumps(data)), tmp_path / "m.json") == entry
    [(_task, folder, _)] = list(suites.materialise(entry, tmp_path / "suite"))
    assert load_task(folder).tags == ("realpy", "munch", "mutation", "released:2023-10-01")
    with pytest.raises(suites.SuiteError, match="'last spring' is not a day. Fix: .*YYYY-MM-DD"):
        suites.package_from_json({**data, "released": "last spring"}, tmp_path / "m.json")


def test_suite_show_counts_only_tasks_validated_as_the_manifest_has_them(
    src, tmp_path, monkeypatch, capsys
):
    """``suite show``: per split, the tasks served of those validated here as the manifest
    has them now; a task validated from another version of it is counted apart, with the
    fix."""
    from repogym import cli

    entry = _entry(src)
    monkeypatch.setenv("REPOGYM_CACHE", str(tmp_path / "cache"))
    root = suites.suite_root("munchy")
    [(task, folder, _)] = list(suites.materialise(entry, root))
    suites.record_validated(
        root, entry, task, folder, True, {"grader": "g", "witnessed": 1, "f2p": 1}
    )
    suites.record_scope(root, task.id, 1)
    changed = dataclasses.replace(entry, tasks=(dataclasses.replace(task, statement="New."),))
    for now, served, stale in (
        (entry, "train: 1 served of 1", False),
        (changed, "train: 0 served of 0", True),
    ):
        suite = suites.Suite("munchy", "repogym/Munchy-v0", "", (now,))
        monkeypatch.setattr(suites, "load_suite", lambda name, suite=suite: suite)
        assert cli.main(["suite", "show", "munchy"]) == 0
        out = capsys.readouterr().out
        assert f"{served} validated here (1 in the manifest)" in out, out
        assert ("1 validated from another version of the manifest" in out) == stale, out


def test_a_history_fix_in_a_module_with_crlf_ends_applies_to_its_sdist(tmp_path):
    # num2words ships lang_PL.py with CRLF ends; the miner read it as text, so the gold
    # patch fits LF ends. Before, materialising the task failed: the patch did not apply.
    entry = next(e for e in suites.load_suite("realpy").packages if e.name == "num2words-0.5.11")
    task = next(t for t in entry.tasks if t.id == "num2words-0.5.11-11")
    [(_t, folder, written)] = list(suites.materialise(entry, tmp_path, [task.id]))
    assert written and "lang_PL.py" in task.gold and "\r" not in task.gold
    fixed = tmp_path / "fixed"
    shutil.copytree(folder / "repo", fixed)
    subprocess.run(["git", "apply", "-"], cwd=fixed, input=task.gold.encode(), check=True)
    assert b"\r\n" not in (fixed / "num2words" / "lang_PL.py").read_bytes()
    other = pypi.unpack(pypi.download(entry.project), tmp_path / "sdist")
    assert b"\r\n" in (other / "num2words" / "lang_PL.py").read_bytes()  # the sdist's own
    # a file the fix does not touch keeps its ends
    assert (folder / "repo" / "num2words" / "lang_EN.py").read_bytes() == (
        other / "num2words" / "lang_EN.py"
    ).read_bytes()


def test_a_task_whose_patch_does_not_apply_leaves_its_packages_other_tasks_written(src, tmp_path):
    entry = _entry(src)
    gold = "".join(  # its fixed lines are not the sdist's
        f"{ln.rstrip()}  # not in the sdist\n" if ln[:1] == "+" and ln[:3] != "+++" else ln
        for ln in entry.tasks[0].gold.splitlines(keepends=True)
    )
    broken = dataclasses.replace(entry.tasks[0], id="munch-2", gold=gold)
    entry = dataclasses.replace(entry, tasks=(broken, entry.tasks[0]))
    with pytest.raises(suites.SuiteError, match="does not apply"):
        list(suites.materialise(entry, tmp_path / "a"))
    failed: dict[str, str] = {}
    written = [t.id for t, _f, _w in suites.materialise(entry, tmp_path / "b", failed=failed)]
    assert written == ["munch-1"] and list(failed) == ["munch-2"]
    assert "does not apply" in failed["munch-2"] and "Fix:" in failed["munch-2"]
