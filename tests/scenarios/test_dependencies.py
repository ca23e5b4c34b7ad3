"""Task environments: [environment] in task.toml, built once with pip, bound read-only.

The builds use small real packages from PyPI (network once; the cache keeps them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repogym.envs import make_env
from repogym.quality.validate import validate_task
from repogym.sandbox import SandboxSpec, make_sandbox
from repogym.sandbox.base import ENV_MOUNT, SandboxError
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios.dependencies import (
    BuiltDependencies,
    DependenciesUnavailable,
    DependencySpec,
    build,
    built,
    check_conflicts,
    envs_dir,
    parse_spec,
)
from repogym.scenarios.task import TaskError, load_task
from tests.conftest import call

SIX = "six==1.17.0"
#: six from the environment; the task's own pytest 8.3.5 instead of the sandbox's.
PINNED = ["six==1.17.0", "pytest==8.3.5"]

CODE = "import six\n\n\ndef label(x):\n    return six.text_type(x) + '!'\n"
TESTS = textwrap.dedent("""\
    import pytest
    import six

    from shout import label


    def test_label():
        assert label(3) == '3!'


    def test_six_is_the_environments():
        assert six.__version__ == '1.17.0'
        assert six.__file__.startswith('/opt/repogym/env/')
    """)


def _git_diff(repo: Path, changes: dict[str, str]) -> str:
    from repogym.sandbox.workspace import make_diff

    return make_diff(repo, changes)


def write_env_task(
    root: Path,
    task_id: str,
    environment: str,
    *,
    code: str = CODE,
    tests: str = TESTS,
    extra_files: dict[str, str] | None = None,
) -> Path:
    """A task whose repo needs `six` (a bug: label() adds '?' instead of '!')."""
    d = root / task_id
    (d / "repo").mkdir(parents=True)
    (d / "tests").mkdir()
    buggy = code.replace("'!'", "'?'")
    (d / "repo" / "shout.py").write_text(buggy)
    for rel, text in (extra_files or {}).items():
        (d / "repo" / rel).write_text(text)
    (d / "tests" / "test_shout.py").write_text(tests)
    (d / "solution.patch").write_text(_git_diff(d / "repo", {"shout.py": code}))
    (d / "task.toml").write_text(
        f'id = "{task_id}"\nstatement = "label(3) must be \'3!\'"\n\n[verifier]\n'
        'tests_dest = "tests"\nfail_to_pass = ["tests/test_shout.py::test_label"]\n'
        'pass_to_pass = ["tests/test_shout.py::test_six_is_the_environments"]\n\n'
        f"[environment]\n{environment}\n"
    )
    return d


@pytest.fixture(scope="module")
def six_env():
    env, _ = build(DependencySpec(requirements=(SIX,)))
    return env


@pytest.fixture(scope="module")
def six_task(tmp_path_factory, six_env):
    return load_task(
        write_env_task(tmp_path_factory.mktemp("env"), "needs-six", f'requirements = ["{SIX}"]')
    )


# -- the spec ------------------------------------------------------------------------------
def test_spec_errors_name_the_file_the_key_and_the_fix(tmp_path):
    cases = {
        'requirements = ["six", "not a requirement!"]': (
            "environment.requirements",
            "not a pip requirement",
        ),
        'python = ">>3"': ("environment.python", "not a version constraint"),
        'requirements_file = "missing.txt"': ("environment.requirements_file", "does not exist"),
        'requirement = ["six"]': ("environment.requirement", "did you mean 'requirements'"),
        'setup = "echo hi"\nexclude = [1]': ("environment.exclude", "list of strings"),
    }
    for n, (table, (key, problem)) in enumerate(cases.items()):
        folder = write_env_task(tmp_path, f"bad-{n}", table)
        with pytest.raises(TaskError) as e:
            load_task(folder)
        text = str(e.value)
        assert str(folder / "task.toml") in text and f"'{key}'" in text, text
        assert problem in text and "Fix:" in text, text


def test_requirements_file_and_key_share_environments(tmp_path):
    (tmp_path / "reqs.txt").write_text("# test requirements\nsix==1.17.0  # inline\n\n")
    a = write_env_task(tmp_path, "a", 'requirements_file = "../reqs.txt"')
    b = write_env_task(tmp_path, "b", f'requirements = ["{SIX}"]')
    spec_a, spec_b = load_task(a).dependencies, load_task(b).dependencies
    assert spec_a == spec_b and spec_a.key == spec_b.key
    assert spec_a.requirements == ("six==1.17.0",)
    assert "pytest==" in " ".join(spec_a.effective_requirements())  # pytest always included
    other = parse_spec({"requirements": [SIX], "setup": ["true"]}, tmp_path)
    assert other.key != spec_a.key


# -- building ----------------------------------------------------------------------------
def test_build_once_read_only_files_and_pip_errors_name_the_requirement(six_env):
    again, new = build(DependencySpec(requirements=(SIX,)))
    assert not new and again.root == six_env.root
    assert six_env.root.parent == envs_dir()
    assert six_env.distributions["six"] == "1.17.0" and "pytest" in six_env.distributions
    assert (six_env.site / "six.py").is_file()
    spec = DependencySpec(requirements=("six==0.0.999",))
    with pytest.raises(DependenciesUnavailable) as e:
        build(spec)
    assert "'six==0.0.999'" in str(e.value) and "Fix:" in str(e.value)
    assert built(spec) is None  # nothing half-built is left


def test_python_constraint_the_interpreter_does_not_meet_is_refused(tmp_path):
    folder = write_env_task(tmp_path, "future", f'requirements = ["{SIX}"]\npython = ">=4"')
    task = load_task(folder)
    for attempt in (lambda: build(task.dependencies), task.sandbox_dependencies):
        with pytest.raises(DependenciesUnavailable, match=r"needs Python '>=4'.*Fix:"):
            attempt()


def test_unbuilt_environment_says_how_to_build_it(tmp_path):
    folder = write_env_task(
        tmp_path, "unbuilt", f'requirements = ["{SIX}"]\nsetup = ["echo {tmp_path.name}"]'
    )
    env = make_env(folder)
    try:
        with pytest.raises(DependenciesUnavailable, match=r"not built here.*repogym env build"):
            env.reset(seed=0)
    finally:
        env.close()


# -- in the sandbox ------------------------------------------------------------------------
def test_episode_and_grader_use_the_environment_read_only(six_task):
    env = make_env(six_task)
    try:
        env.reset(seed=0)

        def run(command: str) -> str:
            return env.step(call("bash", command=command))[0]

        assert f"{ENV_MOUNT}/six.py" in run("python -c 'import six; print(six.__file__)'")
        assert run("echo $PYTHONPATH").startswith(f"{ENV_MOUNT}:")
        assert "READ-ONLY" in run(f"touch {ENV_MOUNT}/x 2>/dev/null || echo READ-ONLY")
        assert run(f"ls -a {ENV_MOUNT} | grep -ci repogym").startswith("0")
    finally:
        env.close()
    report = validate_task(six_task, reruns=1, workers=2)
    assert report.ok, report.failures
    checks = {c.kind: c for c in report.checks}
    assert checks["gold"].tests["tests/test_shout.py::test_six_is_the_environments"] == "passed"
    assert checks["noop"].tests["tests/test_shout.py::test_label"] == "failed"


def test_reset_binds_without_copying(six_task, six_env):
    templates = TemplateCache()
    try:
        template = templates.get(six_task.repo_dir, six_task.sandbox_dependencies())
        assert not any(p.name == "six.py" for p in template.rglob("*"))
        sandboxes = [make_sandbox("bwrap", SandboxSpec(template)) for _ in range(3)]
        for sb in sandboxes:
            assert sb.dependencies.site == six_env.site
            assert sb.interpreter.sites[0] == ENV_MOUNT
            sb.close()
    finally:
        templates.close()


def test_package_under_test_in_the_environment_is_refused_and_exclude_removes_it(tmp_path):
    # The repository is (a fake) six itself: the environment must not provide it.
    fake_six = "__version__ = '1.17.0'\ntext_type = str\n"
    clash = write_env_task(
        tmp_path, "clash", f'requirements = ["{SIX}"]', extra_files={"six.py": fake_six}
    )
    build(load_task(clash).dependencies)
    with pytest.raises(
        DependenciesUnavailable, match=r"installs six .*exclude = \[\"six\"\].*--no-requirement six"
    ):
        load_task(clash).sandbox_dependencies()
    # Excluded (and a pinned pytest): the grader imports six from the workspace, runs the
    # task's own pytest, and the unfixed repository still fails.
    tests = TESTS.replace(
        "assert six.__file__.startswith('/opt/repogym/env/')",
        "assert six.__file__ == '/workspace/six.py'\n    assert pytest.__version__ == '8.3.5'",
    )
    ok = write_env_task(
        tmp_path,
        "excluded",
        f'requirements = {json.dumps(PINNED)}\nexclude = ["six"]',
        tests=tests,
        extra_files={"six.py": fake_six},
    )
    task = load_task(ok)
    env, _ = build(task.dependencies)
    assert "six" not in env.distributions and not (env.site / "six.py").exists()
    assert env.distributions["pytest"] == "8.3.5"
    report = validate_task(task, reruns=1, workers=2)
    assert report.ok, report.failures


def test_env_build_cli_builds_each_distinct_environment_once(tmp_path, six_env):
    for n in range(2):
        write_env_task(tmp_path / "tasks", f"share-{n}", f'requirements = ["{SIX}"]')
    wide = {**os.environ, "COLUMNS": "250"}
    res = subprocess.run(
        [sys.executable, "-m", "repogym.cli", "env", "build", str(tmp_path / "tasks")],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env=wide,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 environment(s)" in res.stdout and "already built" in res.stdout
    assert "share-0, share-1" in res.stdout
    listing = subprocess.run(
        [sys.executable, "-m", "repogym.cli", "env", "list"],
        capture_output=True,
        text=True,
        check=False,
        env=wide,
    )
    assert six_env.root.name in listing.stdout


@pytest.mark.docker
def test_docker_sandbox_binds_the_environment(six_task, docker_engine):
    templates = TemplateCache()
    try:
        template = templates.get(six_task.repo_dir, six_task.sandbox_dependencies())
        try:
            sb = make_sandbox("docker", SandboxSpec(template))
        except SandboxError as e:
            if "built for Python" in str(e):  # the image's Python differs: a clear refusal
                pytest.skip(str(e))
            raise
        try:
            res = sb.run(
                "python3 -c 'import six; print(six.__file__)'; "
                f"touch {ENV_MOUNT}/x || echo READ-ONLY"
            )
            assert f"{ENV_MOUNT}/six.py" in res.stdout and "READ-ONLY" in res.stdout
            assert sb.interpreter.sites == (ENV_MOUNT,)
        finally:
            sb.close()
    finally:
        templates.close()
    report = validate_task(six_task, sandbox="docker", reruns=1)
    assert report.ok, report.failures


def test_a_locked_spec_written_to_task_toml_finds_its_build():
    """`synth --pypi` pins what the first build installed; the pins must load back from
    task.toml with the same key ("pytest-mock==..." sorts before "pytest==..."): natsort's
    tasks were all dropped as "environment not built here"."""
    import tomllib

    from repogym.scenarios.dependencies import lock

    spec = DependencySpec(requirements=("pytest-mock==3.14.0", "six==1.17.0"))
    env, _ = build(spec)
    pinned = lock(env, spec)
    assert any(r.startswith("pytest==") for r in pinned.requirements)
    loaded = parse_spec(tomllib.loads(pinned.to_toml())["environment"], Path("."))
    assert loaded.key == pinned.key and built(loaded) is not None


def test_a_conflict_names_the_requirement_that_pulls_the_clashing_package_in(tmp_path):
    # isort's case: yarg, which pipreqs requires, installs a top-level `tests` package, and
    # the repository has its own `tests/`. A miner drops a requirement with
    # `--no-requirement NAME`, so the error names pipreqs, not yarg.
    site = tmp_path / "env" / "site"
    for name, needs in (("pipreqs", "yarg>=0.1"), ("yarg", None), ("six", None)):
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
        (info / "METADATA").write_text(meta + (f"Requires-Dist: {needs}\n" if needs else ""))
        (info / "RECORD").write_text("tests/__init__.py,,\n" if name == "yarg" else "")
    (site / "tests").mkdir()
    (site / "tests" / "__init__.py").write_text("")
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "__init__.py").write_text("")
    env = BuiltDependencies(tmp_path / "env", {"requirements": ["pipreqs>=0.4", "six"]})
    with pytest.raises(DependenciesUnavailable) as e:
        check_conflicts(env, repo, what="isort")
    said = str(e.value)
    assert "installs tests (from yarg)" in said and 'exclude = ["yarg"]' in said
    assert "--no-requirement pipreqs" in said and "--no-requirement six" not in said
