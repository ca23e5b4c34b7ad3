"""Harbor export/import: every built-in task round-trips; the exported verifier is repogym's."""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repogym.integrations.harbor import export_task, import_task
from repogym.quality.validate import validate_task
from repogym.scenarios.registry import builtin_tasks
from repogym.scenarios.task import TaskError


def _same_tree(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b, ignore=["__pycache__"])
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    return all(_same_tree(a / d, b / d) for d in cmp.common_dirs)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("harbor")
    return {t.id: (t, export_task(t, out)) for t in builtin_tasks()}


def test_every_builtin_exports_and_imports_back_equivalent(exported, tmp_path):
    for task, folder in exported.values():
        for name in (
            "instruction.md",
            "task.toml",
            "environment/Dockerfile",
            "solution/solve.sh",
            "tests/test.sh",
        ):
            assert (folder / name).is_file(), f"{folder}: no {name}"
        assert os.access(folder / "tests" / "test.sh", os.X_OK)
        back = import_task(folder, tmp_path)
        assert (
            back.id,
            back.version,
            back.statement,
            back.split,
            back.tags,
            back.max_steps,
            back.test_spec,
        ) == (
            task.id,
            task.version,
            task.statement,
            task.split,
            task.tags,
            task.max_steps,
            task.test_spec,
        )
        assert _same_tree(task.repo_dir, back.repo_dir) and _same_tree(
            task.tests_dir, back.tests_dir
        )
        assert [(c.kind, c.name, c.read()) for c in back.candidates()] == [
            (c.kind, c.name, c.read()) for c in task.candidates()
        ]


def test_exported_task_toml_is_valid_for_harbors_own_model(exported):
    """harbor's TaskConfig and TaskPaths (from its wheel; harbor itself needs Python 3.12)."""
    wheel = _harbor_wheel()
    sys.path.insert(0, str(wheel))
    try:
        from harbor.models.task.config import TaskConfig
        from harbor.models.task.paths import TaskPaths
    finally:
        sys.path.remove(str(wheel))
    for task, folder in exported.values():
        config = TaskConfig.model_validate_toml((folder / "task.toml").read_text())
        assert config.task.name == f"repogym/{task.id}" and config.agent.user == "agent"
        assert config.environment.workdir == "/workspace"
        assert config.verifier.network_mode.value == "no-network"
        paths = TaskPaths(folder)
        assert paths.discovered_test_path == folder / "tests" / "test.sh"
        assert paths.discovered_solve_path == folder / "solution" / "solve.sh"
        paths.validate_input_tree(paths.task_dir)


def _harbor_wheel() -> Path:
    """harbor's wheel, downloaded once with pip (it refuses to install on Python 3.11)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "repogym-test"
    found = sorted(cache.glob("harbor-*.whl"))
    if not found:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--python-version",
                "3.12",
                "-d",
                str(cache),
                "harbor",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        found = sorted(cache.glob("harbor-*.whl"))
        if not found:
            pytest.skip(f"cannot download harbor's wheel from PyPI: {run.stderr[-300:]}")
    return found[-1]


@pytest.mark.parametrize("task_id", ["retry-zero", "csv-quoted-fields"])
def test_imported_task_validates(exported, tmp_path, task_id):
    _, folder = exported[task_id]
    report = validate_task(import_task(folder, tmp_path), reruns=1)
    assert report.ok, report


def test_exported_verifier_grades_with_the_vendored_grader(exported):
    task, folder = exported["retry-zero"]
    tests = folder / "tests"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tests / "vendor"), "HOME": "/tmp"}
    results = []
    for diff in (folder / "solution" / "solution.patch", task.decoys[0]):
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                (
                    "import repogym, sys; assert repogym.__file__.startswith("
                    f"{str(tests / 'vendor')!r}), repogym.__file__; "
                    "from repogym.integrations.harbor import main; "
                    "sys.exit(main())"
                ),
                "verify",
                "--task-toml",
                str(tests / "repogym.toml"),
                "--tests",
                str(tests / "hidden"),
                "--repo",
                str(folder / "environment" / "repo"),
                "--diff",
                str(diff),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd="/tmp",
            timeout=300,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        results.append(json.loads(run.stdout))
    assert results[0]["reward"] == 1.0 and results[0]["resolved"]
    assert results[1]["reward"] < 1.0


def test_an_export_whose_dockerfile_lost_its_repository_names_the_fix(exported, tmp_path):
    _, folder = exported["retry-zero"]
    bare = tmp_path / "bare"
    shutil.copytree(folder, bare)
    (bare / "environment" / "Dockerfile").write_text("FROM ubuntu\nRUN git clone x /workspace\n")
    with pytest.raises(TaskError, match=r"Dockerfile: no `COPY <folder> /workspace`"):
        import_task(bare, tmp_path / "out")


def test_export_writes_only_fields_of_harbors_task_config(exported):
    """Every key of an exported task.toml is a TaskConfig field: validating it and dumping
    what was set gives the same document (an unknown key would be dropped silently)."""
    import tomllib

    wheel = _harbor_wheel()
    sys.path.insert(0, str(wheel))
    try:
        from harbor.models.task.config import TaskConfig
    finally:
        sys.path.remove(str(wheel))

    def as_set(model: object) -> object:
        if hasattr(model, "model_fields_set"):  # None: a legacy field a validator cleared
            return {
                k: as_set(getattr(model, k))
                for k in model.model_fields_set
                if getattr(model, k) is not None
            }
        if isinstance(model, list):
            return [as_set(v) for v in model]
        return getattr(model, "value", model)

    for _task, folder in exported.values():
        data = tomllib.loads((folder / "task.toml").read_text())
        assert as_set(TaskConfig.model_validate(data)) == data, folder


# -- Harbor tasks made outside repogym, in Harbor's layout --------------------------------
CALC = "def add(a, b):\n    return a + b\n\n\ndef divide(a, b):\n    return a / b\n"
SOLVE = """#!/bin/bash
set -e
cat > /app/calc.py <<'PY'
def add(a, b):
    return a + b


def divide(a, b):
    if b == 0:
        raise ValueError("division by zero")
    return a / b
PY
"""
# Partial credit, in reward.json: the fraction of the two checks that pass.
TEST_SH = """#!/bin/bash
cd /app
python3 -m pytest -q -p no:cacheprovider -rA /tests/test_calc.py > /logs/verifier/log 2>&1
passed=$(grep -c '^PASSED' /logs/verifier/log)
python3 -c "import json; print(json.dumps({'reward': $passed / 2}))" > /logs/verifier/reward.json
cat /logs/verifier/log
"""
TEST_CALC = """import sys

import pytest

sys.path.insert(0, "/app")
from calc import add, divide  # noqa: E402


def test_add():
    assert add(2, 3) == 5


def test_divide_by_zero():
    with pytest.raises(ValueError):
        divide(1, 0)
"""
TASK_TOML = """schema_version = "1.4"

[task]
name = "acme/{name}"
version = "1.0.0"
keywords = ["python"]

[metadata]
difficulty = "easy"
category = "programming"
tags = ["bugfix"]

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 300.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
{extra}"""


def harbor_task(
    root: Path, name: str, *, dockerfile: str, files: dict[str, str], extra_toml: str = ""
) -> Path:
    """A Harbor task folder in Harbor's layout (task.toml, instruction.md,
    environment/Dockerfile, solution/solve.sh, tests/test.sh)."""
    folder = root / name
    texts = {
        "task.toml": TASK_TOML.format(name=name, extra=extra_toml),
        "environment/Dockerfile": dockerfile,
        **files,
    }
    for rel, text in texts.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    for script in ("solution/solve.sh", "tests/test.sh"):
        if (folder / script).exists():
            (folder / script).chmod(0o755)
    return folder


def calc_task(root: Path) -> Path:
    return harbor_task(
        root,
        "calc-fix",
        dockerfile="FROM python:3.11-slim\nWORKDIR /app\nCOPY app/ /app/\n",
        files={
            "environment/app/calc.py": CALC,
            "solution/solve.sh": SOLVE,
            "tests/test.sh": TEST_SH,
            "tests/test_calc.py": TEST_CALC,
            "instruction.md": "divide(1, 0) must raise ValueError; add() must keep working.\n",
        },
    )


@pytest.mark.docker
def test_foreign_harbor_task_imports_validates_and_keeps_partial_rewards(docker_engine, tmp_path):
    """A task made outside repogym: its FROM cannot be pulled here (built from the local
    base image), its oracle is solve.sh, its verifier test.sh with a partial reward."""
    from repogym.grading.grader import grade
    from repogym.integrations.harbor_tasks import harbor_meta, sandbox_options
    from repogym.sandbox import make_sandbox
    from repogym.sandbox.workspace import TemplateCache

    task = import_task(calc_task(tmp_path / "harbor"), tmp_path / "out")
    meta = harbor_meta(task)
    assert meta["workdir"] == "/app" and meta["image"].startswith("repogym-harbor/calc-fix:")
    assert meta["substituted"] == {"python:3.11-slim": "repogym/python:bookworm"}
    assert (task.repo_dir / "calc.py").read_text() == CALC  # the image's /app
    assert "raise ValueError" in task.solution_patch.read_text()  # what solve.sh changed
    assert task.statement.startswith("divide(1, 0)")
    (report,) = validate_tasks_in_docker(task, docker_engine)
    assert report.ok, report.failures
    templates = TemplateCache()
    try:

        def factory(spec):
            return make_sandbox(
                "docker", spec, base_url=docker_engine.base_url, **sandbox_options(task)
            )

        noop = grade(task, templates.get(task.repo_dir), "", mode="partial", make_sandbox=factory)
    finally:
        templates.close()
    assert noop.reward == 0.5  # add passes, divide by zero does not: Harbor's 0.5 kept
    assert not noop.untrusted and not noop.infra_error


def validate_tasks_in_docker(task, docker_engine):
    from repogym.integrations.harbor_tasks import sandbox_options
    from repogym.quality.validate import validate_tasks

    return validate_tasks(
        [task],
        sandbox="docker",
        reruns=1,
        sandbox_options={**sandbox_options(task), "base_url": docker_engine.base_url},
    )


def test_unsupported_harbor_tasks_are_refused_naming_the_file(tmp_path):
    from repogym.integrations.harbor_tasks import read_harbor_task

    base = calc_task(tmp_path / "ok")
    read_harbor_task(base)  # the well-formed one reads
    cases = {
        "multi-step task": ("task.toml", '[[steps]]\nname = "one"\n'),
        "docker-compose": ("environment/docker-compose.yaml", "services: {}\n"),
        "separate verifier": ("task.toml", "[verifier.environment]\ncpus = 1\n"),
        "Windows task": ("task.toml", None),
    }
    for i, (what, (rel, text)) in enumerate(cases.items()):
        folder = tmp_path / f"c{i}"
        shutil.copytree(base, folder)
        if rel == "task.toml" and text is None:
            toml = folder / "task.toml"
            toml.write_text(toml.read_text().replace("cpus = 1", 'os = "windows"\ncpus = 1'))
        elif rel == "task.toml":
            toml = folder / "task.toml"
            toml.write_text(toml.read_text() + text)
        else:
            (folder / rel).write_text(text)
        with pytest.raises(TaskError, match=what.split()[0]):
            read_harbor_task(folder)
    for rel in ("tests/test.sh", "solution/solve.sh", "environment/Dockerfile"):
        folder = tmp_path / rel.replace("/", "-")
        shutil.copytree(base, folder)
        (folder / rel).unlink()
        with pytest.raises(TaskError, match=re.escape(rel) + ": missing"):
            read_harbor_task(folder)
    folder = tmp_path / "no-workdir"
    shutil.copytree(base, folder)
    (folder / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    with pytest.raises(TaskError, match="no usable working directory"):
        read_harbor_task(folder)
    folder = tmp_path / "needs"
    shutil.copytree(base, folder)
    (folder / "tests" / "test.sh").write_text("curl -LsSf https://x | sh\nuvx pytest\n")
    toml = folder / "task.toml"
    toml.write_text(
        toml.read_text().replace("timeout_sec = 300.0", 'timeout_sec = 300.0\nuser = "agent"')
    )
    missing = read_harbor_task(folder).missing
    assert any("curl" in m and "no network" in m for m in missing)
    assert any("[agent].user = 'agent'" in m for m in missing)


@pytest.mark.docker
def test_offline_builds_name_the_step_that_needs_the_network(docker_engine, tmp_path):
    from repogym.integrations.harbor_image import ImageError

    files = {"solution/solve.sh": SOLVE, "tests/test.sh": TEST_SH, "instruction.md": "x\n"}
    needs = harbor_task(
        tmp_path,
        "needs-net",
        files=files,
        dockerfile=(
            "FROM python:3.11-slim\nRUN apt-get update && apt-get install -y curl\nWORKDIR /app\n"
        ),
    )
    with pytest.raises(
        ImageError,
        match=r"needs-net: environment/Dockerfile: the build failed "
        r"at `RUN apt-get update && apt-get install -y curl`.*"
        r"no network.*replaced by repogym/python:bookworm",
    ):
        import_task(needs, tmp_path / "out", base_url=docker_engine.base_url)
    copies = harbor_task(
        tmp_path,
        "copies",
        files=files,
        dockerfile=(
            "FROM python:3.11-slim\nCOPY --from=ghcr.io/astral-sh/uv:latest /uv /bin/\n"
            "WORKDIR /app\n"
        ),
    )
    with pytest.raises(
        ImageError,
        match=r"copies from image 'ghcr.io/astral-sh/uv:latest'.*"
        r"cannot be pulled",
    ):
        import_task(copies, tmp_path / "out", base_url=docker_engine.base_url)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# Code test.sh imports writes reward 1 into both of Harbor's reward files at import, and
# leaves a process (holding test.sh's output pipe) that rewrites them after test.sh wrote its own.
REWARD_WRITER = """

def _reward_writer():
    import json, os
    d = "/logs/verifier"

    def plant():
        for name, text in (("reward.json", json.dumps({"reward": 1.0})), ("reward.txt", "1\\n")):
            try:
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            except OSError:
                pass

    plant()


_reward_writer()
"""
TEST_SH_TXT = """#!/bin/bash
cd /app
python3 -m pytest -q -p no:cacheprovider /tests/test_calc.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


@pytest.mark.docker
def test_code_test_sh_imports_cannot_write_the_reward(docker_engine, tmp_path):
    """Harbor's usual test.sh (reward.txt from pytest's exit code): an agent patch whose
    module writes reward 1 to both reward files when test.sh's pytest imports it scores what
    the unchanged repository scores (the old reader took the reward.json test.sh never
    writes). A process that outlives pytest and keeps writing can still win the race with
    test.sh's last write (docs/grading.md, what remains): not asserted here."""
    from repogym.grading.grader import grade
    from repogym.integrations.harbor_tasks import sandbox_options
    from repogym.sandbox import make_sandbox
    from repogym.sandbox.workspace import TemplateCache, make_diff

    folder = harbor_task(
        tmp_path / "harbor",
        "calc-txt",
        dockerfile="FROM python:3.11-slim\nWORKDIR /app\nCOPY app/ /app/\n",
        files={
            "environment/app/calc.py": CALC,
            "solution/solve.sh": SOLVE,
            "tests/test.sh": TEST_SH_TXT,
            "tests/test_calc.py": TEST_CALC,
            "instruction.md": "divide(1, 0) must raise ValueError.\n",
        },
    )
    task = import_task(folder, tmp_path / "out", base_url=docker_engine.base_url)
    attack = make_diff(task.repo_dir, {"calc.py": CALC + REWARD_WRITER})
    templates = TemplateCache()
    try:

        def factory(spec):
            return make_sandbox(
                "docker", spec, base_url=docker_engine.base_url, **sandbox_options(task)
            )

        got = {
            name: grade(
                task, templates.get(task.repo_dir), diff, mode="partial", make_sandbox=factory
            ).reward
            for name, diff in (
                ("noop", ""),
                ("attack", attack),
                ("gold", task.solution_patch.read_text()),
            )
        }
    finally:
        templates.close()
    assert got == {"noop": 0.0, "attack": 0.0, "gold": 1.0}


def test_a_test_sh_that_writes_no_reward_at_noop_is_noted():
    """Where test.sh writes no reward file (a `set -e` script stopping at the failing test),
    a file planted by code it ran would stand: the import says so in [harbor].missing."""
    from repogym.integrations.harbor_tasks import reward_notes

    assert reward_notes(0.0, 1.0) == []
    [note] = reward_notes(None, 1.0)
    assert "wrote no reward file on the unchanged repository" in note and "Fix:" in note
    assert len(reward_notes(None, None)) == 2
