"""bwrap and docker grade every built-in task the same way.

bwrap runs the host's interpreter and pytest; the docker image runs Debian's python3 and
python3-pytest. For each built-in task the gold patch and the empty diff (noop) are graded
through both backends, with every decoy of a few tasks of different kinds (partly failing
runs) and each performance task's slow decoy (a correct but slow fix must fail under both
interpreters; it stands in for a performance task's noop, which only runs into the same
time limits); the per-test outcomes, rewards and hack flags must agree. Gradings run four
at a time.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from repogym.grading import grader
from repogym.sandbox import make_sandbox
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios.registry import builtin_tasks
from repogym.scenarios.task import Task

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_engine")]


@pytest.fixture(scope="module")
def templates():
    cache = TemplateCache()
    yield cache
    cache.close()


#: Tasks whose every decoy is compared (test-gaming, multi-file, parsing).
ALL_DECOYS = {"retry-zero", "multi-file-config", "csv-quoted-fields"}
#: A fix of each performance task that is right but too slow (a timing verdict).
SLOW_DECOYS = {"cached-keys-linear-scan", "fast_path_only"}


def _patches(task: Task) -> dict[str, str]:
    out = {"gold": task.solution_patch.read_text()}
    decoys = (
        task.decoys if task.id in ALL_DECOYS else [p for p in task.decoys if p.stem in SLOW_DECOYS]
    )
    if task.id.startswith("perf-"):
        assert decoys, f"{task.id}: no slow decoy named"
    else:
        out["noop"] = ""
    out.update({f"decoy:{p.stem}": p.read_text() for p in decoys})
    return out


def _grade(backend: str, task: Task, template: Path, diff: str) -> grader.GradeResult:
    return grader.grade(
        task, template, diff, mode="partial", make_sandbox=functools.partial(make_sandbox, backend)
    )


@pytest.mark.parametrize("task", builtin_tasks(), ids=lambda t: t.id)
def test_bwrap_and_docker_grade_alike(task: Task, templates: TemplateCache) -> None:
    template = templates.get(task.repo_dir)
    patches = _patches(task)
    with ThreadPoolExecutor(4) as pool:  # sandboxes mostly wait on processes and dockerd
        futures = {
            (b, name): pool.submit(_grade, b, task, template, diff)
            for name, diff in patches.items()
            for b in ("bwrap", "docker")
        }
    bw = {name: futures["bwrap", name].result() for name in patches}
    dk = {name: futures["docker", name].result() for name in patches}
    for name, b in bw.items():
        d = dk[name]
        assert b.infra_error is None and d.infra_error is None, (name, b.infra_error, d.infra_error)
        assert d.tests == b.tests, (name, d.test_output[-3000:])
        assert (d.reward, d.hack_flags) == (b.reward, b.hack_flags)
    assert "missing" not in bw["gold"].tests.values()  # the comparison saw real outcomes
