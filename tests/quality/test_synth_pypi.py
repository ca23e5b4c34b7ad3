"""`repogym synth --pypi` (repogym/quality/synth_pypi.py): validated tasks from a real
package's sdist, and the sample of mutants it scores."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from repogym.scenarios import pypi
from repogym.scenarios.patches import split_diff
from repogym.scenarios.task import load_tasks
from tests.scenarios._history import NEW, TESTS
from tests.scenarios._tasks import PROJECT


def test_synth_pypi_writes_validated_tasks_with_bugs_formatted_like_their_code(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "COLUMNS": "200"}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "repogym.cli",
            "synth",
            "--pypi",
            PROJECT,
            "--out",
            str(out),
            "--max-tasks",
            "2",
            "--reruns",
            "1",
            "--workers",
            "2",
            "--no-mutation",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "validated tasks from munch 4.0.0" in res.stdout
    tasks = load_tasks(out)
    assert len(tasks) >= 1
    sdist = pypi.download(PROJECT)
    pristine = pypi.unpack(sdist, tmp_path / "pristine")
    for task in tasks:
        assert task.dependencies is not None and task.dependencies.exclude in ((), ("munch",))
        assert all("==" in r for r in task.dependencies.requirements)  # pinned
        assert not list(task.repo_dir.rglob("test_*.py"))  # the tests are hidden
        [file] = {p.new for p in split_diff(task.solution_patch.read_text())}
        original = (pristine / file).read_text().splitlines()
        buggy = (task.repo_dir / file).read_text().splitlines()
        ops = [
            op
            for op in SequenceMatcher(None, original, buggy, autojunk=False).get_opcodes()
            if op[0] != "equal"
        ]
        assert len(ops) == 1, ops  # one place changed, every other line as it was
        _, i1, i2, j1, j2 = ops[0]
        removed, added = original[i1:i2], buggy[j1:j2]
        assert len(added) <= 1 and len(removed) <= 2, (added, removed)
        for old, new in zip(removed, added, strict=False):  # one region of the line replaced
            head = len(os.path.commonprefix([old, new]))
            tail = len(os.path.commonprefix([old[head:][::-1], new[head:][::-1]]))
            assert head > len(old) - len(old.lstrip()), (old, new)  # indentation kept
            assert old[:head] + new[head : len(new) - tail] + old[len(old) - tail :] == new
        text = task.statement
        assert "0x" not in text and "/workspace" not in text and "/tmp/" not in text
        for line in added + removed:
            if len(line.strip()) > 6:
                assert line.strip() not in text


@pytest.mark.parametrize(("flags", "expected"), [([], 20), (["--max-mutants", "5"], 5)])
def test_synth_pypi_scores_a_sample_of_mutants_unless_told(
    monkeypatch, tmp_path, capsys, flags, expected
):
    """A real function has 50-100 mutants and a package's own suite takes seconds per
    grading: `synth --pypi` scores a fixed sample unless --max-mutants says otherwise."""
    from repogym import cli
    from repogym.cli import cmd_synth
    from repogym.quality import synth_pypi, synthesis
    from repogym.scenarios.registry import builtin_tasks

    task = builtin_tasks()[0]
    sdist = pypi.Sdist(
        name="demo", version="1.0", path=tmp_path / "demo-1.0.tar.gz", sha256="0" * 64
    )
    done = synth_pypi.PypiSynthesis(
        sdist=sdist, dependencies=None, written=[task.path], dropped={}, passing_tests=3
    )
    monkeypatch.setattr(synthesis, "from_pypi", lambda *a, **k: done)
    seen = []
    monkeypatch.setattr(
        cmd_synth, "run_mutation", lambda tasks, args, console, diffs: seen.append(args.max_mutants)
    )
    assert cli.main(["synth", "--pypi", "demo==1.0", "--out", str(tmp_path / "o"), *flags]) == 0
    assert seen == [expected]
    assert "1 validated tasks from demo 1.0" in capsys.readouterr().out


# -- several packages, in turn or on Ray ----------------------------------------------------
#: rgdemo 1.1 (its module and tests, as the history tests build it) and rgempty 1.0, whose
#: sdist ships no tests: a package nothing can be synthesised from.
PACKAGES = ["rgempty==1.0", "rgdemo==1.1"]
#: A small synthesis: one task, one gold run, no mutation score.
SMALL = ["--max-tasks", "1", "--reruns", "1", "--workers", "1", "--no-mutation"]


def _sdist(sdists: Path, name: str, version: str, files: dict[str, str]) -> None:
    """An sdist of ``name`` ``version`` holding ``files`` (and its PKG-INFO), placed where
    the download cache keeps it."""
    files = {**files, "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}
    dest = sdists / f"{name}-{version}"
    dest.mkdir(parents=True)
    with tarfile.open(dest / f"{name}-{version}.tar.gz", "w:gz") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _demo_cache(root: Path) -> Path:
    """A cache under ``root`` holding the sdists of :data:`PACKAGES` (environments, the
    sandbox's root file system and interpreter shared with the real cache, built once by
    `make setup`)."""
    from repogym.sandbox.runtime import cache_dir

    cache = root / "cache"
    cache.mkdir()
    for shared in ("envs", "rootfs", "python"):
        (cache_dir() / shared).mkdir(parents=True, exist_ok=True)
        (cache / shared).symlink_to(cache_dir() / shared)
    _sdist(
        cache / "sdists",
        "rgdemo",
        "1.1",
        {"rgdemo/__init__.py": NEW, "tests/test_rgdemo.py": TESTS},
    )
    _sdist(cache / "sdists", "rgempty", "1.0", {"rgempty/__init__.py": NEW})
    return cache


def _synth(env: dict[str, str], out: Path, *flags: str) -> subprocess.CompletedProcess:
    """`repogym synth` of :data:`PACKAGES` into ``out`` (small: :data:`SMALL`)."""
    argv = [sys.executable, "-m", "repogym.cli", "synth"]
    for project in PACKAGES:
        argv += ["--pypi", project]
    return subprocess.run(
        [*argv, "--out", str(out), *SMALL, *flags],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


@pytest.fixture(scope="module")
def two_packages(tmp_path_factory) -> tuple[dict[str, str], Path, subprocess.CompletedProcess]:
    """A cache holding the sdists of :data:`PACKAGES` (:func:`_demo_cache`), and a plain
    `synth` of both: (its environment, its --out, the run)."""
    root = tmp_path_factory.mktemp("two-packages")
    cache = _demo_cache(root)
    env = {**os.environ, "REPOGYM_CACHE": str(cache), "COLUMNS": "200"}
    out = root / "out"
    return env, out, _synth(env, out)


def test_synth_pypi_several_packages_one_failing_without_stopping_the_others(two_packages):
    """`synth --pypi A --pypi B`: each package in turn, its tasks in --out/<name>; one that
    cannot be synthesised from says why once, named, and the others go on."""
    _, out, res = two_packages
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["rgdemo"]
    tasks = load_tasks(out / "rgdemo")
    assert len(tasks) == 1 and tasks[0].id.startswith("rgdemo-")
    assert f"wrote {out / 'rgdemo' / tasks[0].id}" in res.stdout
    assert "1 validated tasks from rgdemo 1.1 (4 of its tests pass in the sandbox" in res.stdout
    failures = [line for line in res.stderr.splitlines() if "no test files" in line]
    assert len(failures) == 1 and failures[0].startswith("rgempty==1.0: "), res.stderr
    assert "rgempty" not in res.stdout


def test_synth_pypi_on_ray_writes_what_a_plain_run_writes(two_packages, tmp_path):
    """``--ray local``: each package is a Ray task (real Ray, real sandbox); the tasks are
    the plain run's, under the same folders, and the failing package is still said once."""
    pytest.importorskip("ray")
    env, plain, _ = two_packages
    out = tmp_path / "out"
    res = _synth(env, out, "--ray", "local")
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    ids = {p.name: sorted(t.id for t in load_tasks(p)) for p in out.iterdir()}
    assert ids == {p.name: sorted(t.id for t in load_tasks(p)) for p in plain.iterdir()}
    assert ids["rgdemo"], ids
    assert "1 validated tasks from rgdemo 1.1" in res.stdout
    assert sum("rgempty==1.0: " in line for line in res.stderr.splitlines()) == 1, res.stderr


def test_synth_ray_takes_pypi_packages_each_once(tmp_path, capsys):
    """--ray spreads --pypi packages: with PACKAGE_DIR it is a usage error naming the fix;
    a package given twice (both would be written to --out/<name>) is refused."""
    from repogym import cli

    out = str(tmp_path / "out")
    with pytest.raises(SystemExit) as stop:
        cli.main(["synth", str(tmp_path), "--out", out, "--ray", "local"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "--ray" in err and "Fix: drop --ray, or give --pypi" in err
    argv = ["synth", "--pypi", "Demo_Pkg==1.0", "--pypi", "demo-pkg==2.0", "--out", out]
    assert cli.main(argv) == 2
    assert "--pypi names a package twice" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_synth_pypi_draws_more_candidates_until_max_tasks_are_kept(monkeypatch, tmp_path):
    """--max-tasks counts the tasks kept, not the candidates: a candidate the screen drops
    (here the first one, as a leak or the seal floor would) is replaced by drawing another
    where the mutants stopped (textstats, the synthesis tests' package, as an sdist: it has
    bugs in several functions)."""
    from repogym.quality import synthesis

    cache = _demo_cache(tmp_path)
    package = Path(__file__).parents[1] / "scenarios" / "data" / "textstats"
    files = {
        str(f.relative_to(package)): f.read_text()
        for f in sorted(package.rglob("*.py"))
        if "__pycache__" not in f.parts
    }
    _sdist(cache / "sdists", "textstats", "1.0", files)
    monkeypatch.setenv("REPOGYM_CACHE", str(cache))
    screen, refused = synthesis.screen, []

    def refusing_the_first(folders, reports, **options):
        holes = screen(folders, reports, **options)
        if not refused:
            refused.append(reports[0].task_id)
            holes[refused[0]] = [f"{refused[0]}: refused by the test"]
        return holes

    monkeypatch.setattr(synthesis, "screen", refusing_the_first)
    said = []
    res = synthesis.from_pypi(
        "textstats==1.0", tmp_path / "out", max_tasks=1, reruns=1, workers=1, say=said.append
    )
    assert [p.name for p in res.written] == [p.name for p in (tmp_path / "out").iterdir()]
    assert len(res.written) == 1 and res.written[0].name != refused[0]
    assert res.dropped == {refused[0]: [f"{refused[0]}: refused by the test"]}
    assert "0 of 1 tasks kept; drawing 1 more candidates" in said
