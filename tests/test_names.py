"""One word per concept: the glossary's homes exist, and the old names still import.

docs/ARCHITECTURE.md's glossary names a home for each word; the renamed modules and
classes keep their old import paths as aliases of the same objects (not copies), so that
existing code and patches keep working.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Old module -> the module it now is.
MOVED = {
    "repogym.scenarios.environment": "repogym.scenarios.dependencies",
    "repogym.scenarios.reports": "repogym.scenarios.bug_reports",
    "repogym.cli.reports": "repogym.cli.printing",
    "repogym.harness.backends": "repogym.harness.executors",
    "repogym.grading.grading_run": "repogym.grading.grading_run",
}


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_module_path_is_the_new_module(old: str, new: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(new)


def test_old_class_and_attribute_names_are_the_new_ones() -> None:
    from repogym.grading import grading_run
    from repogym.scenarios import Verifier, dependencies
    from repogym.scenarios.registry import builtin_tasks
    from repogym.scenarios.task import TestSpec

    assert Verifier is TestSpec
    assert dependencies.EnvironmentSpec is dependencies.DependencySpec
    assert dependencies.EnvironmentUnavailable is dependencies.DependenciesUnavailable
    assert dependencies.BuiltEnvironment is dependencies.BuiltDependencies
    assert grading_run.verifier_argv is grading_run.launcher_argv
    assert grading_run.verifier_env is grading_run.launcher_env
    task = builtin_tasks()[0]
    assert task.verifier is task.test_spec and task.environment is task.dependencies
    assert task.sandbox_environment() == task.sandbox_dependencies()
    assert [f.name for f in dataclasses.fields(task)][-2:] == ["test_spec", "dependencies"]


def test_every_home_the_glossary_names_exists() -> None:
    """Each path in the glossary's table exists."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    table = text[text.index("## Glossary") : text.index("## Three journeys")]
    paths = set(re.findall(r"`(repogym/[\w/.]+?)/?`", table))
    assert len(paths) > 10
    missing = [p for p in sorted(paths) if not (ROOT / p).exists()]
    assert missing == []
