"""The first stage of ``repogym synth --pypi NAME[==VERSION]``: a real package's source
distribution, ready to mutate (the pipeline is :func:`repogym.quality.synthesis.from_pypi`).

The pipeline downloads the sdist with pip (:mod:`repogym.scenarios.pypi`),
unpacks it as the task repository, derives and builds its dependencies (its install and
test requirements; pinned to what was installed, so the tasks rebuild the same versions),
runs its own tests in the sandbox to find the ones that pass there
(:class:`~repogym.quality.sandboxed_tests.SandboxRunner`; the pytest plugins of its test
requirements are named with ``-p``, as the tasks' command names them), then mutates its
code and writes a bug report per task (:func:`repogym.scenarios.synth.synthesize`). Every
task written is graded by ``repogym validate`` (noop, gold, reruns, decoys) and its
sandbox is scanned for the fix (:func:`repogym.quality.audit.leak_scan`) before it reaches
``out``; the ones that fail are dropped and reported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path

from packaging.requirements import Requirement

from repogym.scenarios import dependencies as deps
from repogym.scenarios import pypi


@dataclasses.dataclass
class PypiSynthesis:
    """What :func:`repogym.quality.synthesis.from_pypi` did.

    Attributes:
        sdist: The downloaded archive.
        dependencies: The tasks' (pinned) dependencies.
        written: Task folders that validated, now under ``out``.
        dropped: Task id -> the validation failures that dropped it.
        passing_tests: How many of the package's tests pass in the sandbox.
        tests: Those tests (what a task's pass_to_pass lists, but its failing ones).
        plugins: The pytest plugins the tasks' command names.
        suite_seconds: Wall time of one run of those tests in the sandbox.
    """

    sdist: pypi.Sdist
    dependencies: deps.DependencySpec
    written: list[Path]
    dropped: dict[str, list[str]]
    passing_tests: int
    tests: list[str] = dataclasses.field(default_factory=list)
    plugins: list[str] = dataclasses.field(default_factory=list)
    suite_seconds: float = 0.0


def prepare(
    project: str,
    work: Path,
    *,
    extra: Iterable[str] = (),
    drop: Iterable[str] = (),
    sha256: str | None = None,
    say: Callable[[str], None] = print,
) -> tuple[pypi.Sdist, Path, deps.DependencySpec, deps.BuiltDependencies, dict[str, str]]:
    """Download and unpack ``project`` under ``work``, derive, build and pin its dependencies.

    Returns:
        (sdist, repository folder, pinned spec, built dependencies, pytest ini options).
    """
    sdist = pypi.download(project, sha256=sha256)
    say(f"sdist {sdist.path.name} (sha256 {sdist.sha256[:12]}...)")
    repo = pypi.unpack(sdist, work / f"{sdist.name}-{sdist.version}")
    spec = pypi.derive_environment(repo, sdist.name, extra=extra, drop=drop)
    built, new = deps.build(
        spec, on_start=lambda: say(f"building the dependencies: {spec.summary()}")
    )
    if not new:
        say(f"dependencies {built.root.name} already built")
    pinned = deps.lock(built, spec)
    ini = pypi.pytest_ini_options(repo)
    deps.check_conflicts(built, repo, ini.get("pythonpath", "").split(), sdist.name)
    return sdist, repo, pinned, built, ini


def plugins_of(
    repo: Path,
    name: str,
    built: deps.BuiltDependencies,
    *,
    extra: Iterable[str] = (),
    drop: Iterable[str] = (),
) -> list[str]:
    """The pytest plugins of the requirements the project declares (and ``extra``) in its
    built dependencies (:func:`repogym.scenarios.pypi.pytest_plugins`)."""
    derived = pypi.derive_environment(repo, name, extra=extra, drop=drop)
    return pypi.pytest_plugins(built.site, [Requirement(r).name for r in derived.requirements])
