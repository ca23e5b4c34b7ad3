"""A task's dependencies: the third-party packages its repository needs, built once.

A task declares them in task.toml (docs/authoring.md)::

    [environment]
    requirements = ["hypothesis>=6", "freezegun"]   # pip specifiers (PEP 508)
    requirements_file = "requirements-test.txt"   # optional, relative to the task folder
    python = ">=3.9"                              # optional constraint on the interpreter
    setup = ["..."]                               # optional shell commands, run at build time
    exclude = ["attrs"]                           # distributions removed after installing

Built dependencies are a folder of installed packages (``pip install --target``), keyed by a
hash of its spec and of the interpreter it is built for (implementation, ``major.minor``,
platform), under ``<cache>/envs/<key>/``: ``site/`` (what sandboxes bind read-only) and
``env.json`` (the spec, the interpreter, the installed distributions). It is built with
network by :func:`build` (``repogym env build``) and used without: every sandbox started
from the task's template binds ``site/`` (:class:`repogym.sandbox.base.PackageSite`), so
reset copies nothing. Tasks whose specs are equal share one folder.

pytest is always part of a task's dependencies (the sandbox's own version unless the requirements
name one), so a grading run and the agent's ``python -m pytest`` run one consistent set of
packages. The package under test must not be installed: a grading run resolves every name
an environment provides from the environment, so an installed copy would shadow the
workspace's and the tests would test the wrong code. ``exclude`` removes such a
distribution when a requirement pulls it in, and :func:`check_conflicts` refuses an
environment that provides a top-level name the repository also has.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import importlib.metadata as md
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from repogym.sandbox.base import WORKSPACE, PackageSite
from repogym.sandbox.runtime import cache_dir
from repogym.sandbox.staging import staged_dir

#: The keys ``[environment]`` may hold.
ENV_KEYS = ("requirements", "requirements_file", "python", "setup", "exclude")
#: Changes when the layout of a built environment changes (old builds are then rebuilt).
LAYOUT = 1
_PIP_ERROR = re.compile(
    r"(?:No matching distribution found for|Could not find a version that "
    r"satisfies the requirement|Cannot install|conflict is caused by"
    r"|ResolutionImpossible|error: subprocess-exited-with-error"
    r"|Failed to build|Invalid requirement)",
    re.IGNORECASE,
)
#: (environment, repo, paths) already checked by check_conflicts (a reset re-checks nothing).
_NO_CONFLICT: set[tuple[Path, Path, tuple[str, ...]]] = set()
_SATISFIES = re.compile(r"satisfies the requirement (\S+)|distribution found for (\S+)")


class SpecError(ValueError):
    """A malformed ``[environment]`` table: the key, what is wrong and the fix."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{problem}. Fix: {fix}")
        self.key, self.problem, self.fix = key, problem, fix


class DependenciesUnavailable(RuntimeError):
    """Dependencies cannot be built or used here; the message names the cause and the fix."""


# -- the spec ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DependencySpec:
    """A task's dependencies, as task.toml's ``[environment]`` table declares them.

    Attributes:
        requirements: pip specifiers (the file's lines included), sorted, without pytest
            unless the task names it.
        python: A version constraint on the interpreter ("" for any).
        setup: Shell commands run in the build folder after installing.
        exclude: Distribution names removed after installing.
    """

    requirements: tuple[str, ...]
    python: str = ""
    setup: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def effective_requirements(self) -> tuple[str, ...]:
        """The requirements pip installs: pytest added (the sandbox's version) if absent."""
        names = {canonicalize_name(Requirement(r).name) for r in self.requirements}
        if "pytest" in names:
            return self.requirements
        return (*self.requirements, f"pytest=={md.version('pytest')}")

    @functools.cached_property
    def key(self) -> str:
        """The folder name of this spec built for this interpreter."""
        data = {
            "layout": LAYOUT,
            "requirements": self.effective_requirements(),
            "python": self.python,
            "setup": self.setup,
            "exclude": self.exclude,
            "interpreter": interpreter_tag(),
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def summary(self) -> str:
        """A one-line description for messages and tables."""
        reqs = ", ".join(self.requirements) or "pytest only"
        return reqs if len(reqs) <= 80 else reqs[:77] + "..."

    def to_toml(self) -> str:
        """The ``[environment]`` table that loads back as this spec."""
        lines = ["[environment]", f"requirements = {_toml_list(self.requirements)}"]
        if self.python:
            lines.append(f"python = {json.dumps(self.python)}")
        if self.setup:
            lines.append(f"setup = {_toml_list(self.setup)}")
        if self.exclude:
            lines.append(f"exclude = {_toml_list(self.exclude)}")
        return "\n".join(lines) + "\n"


def _toml_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def interpreter_tag() -> str:
    """What a build depends on besides its spec: implementation, ``major.minor``, platform."""
    return f"{sys.implementation.name}-{python_version()}-{sysconfig.get_platform()}"


def python_version() -> str:
    """``major.minor`` of the interpreter environments are built for (this one: the bwrap
    and process sandboxes run the interpreter repogym runs on)."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _strings(table: dict, key: str, fix: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(key, f"expected a list of strings, got {value!r}", fix)
    return tuple(v.strip() for v in value if v.strip())


def _requirement(text: str, where: str) -> str:
    try:
        req = Requirement(text)
    except InvalidRequirement as e:
        raise SpecError(
            where,
            f"{text!r} is not a pip requirement ({e})",
            "write a specifier such as 'hypothesis>=6' (one per entry or line; "
            "pip options and -r includes are not supported)",
        ) from e
    return str(req)


def _file_requirements(path: Path, key: str) -> list[str]:
    if not path.is_file():
        raise SpecError(
            key,
            f"{path} does not exist",
            "create it or correct the path (relative to the task folder)",
        )
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            out.append(_requirement(line, f"{key} ({path.name} line {n})"))
    return out


def parse_spec(table: Any, task_dir: Path) -> DependencySpec:
    """The spec of an ``[environment]`` table.

    Raises:
        SpecError: an unknown key, a value of the wrong type, a requirement pip would not
            accept, a missing requirements file or an invalid ``python`` constraint.
    """
    if not isinstance(table, dict):
        raise SpecError("environment", "expected a table", "write it as [environment]")
    for key in table:
        if key not in ENV_KEYS:
            raise SpecError(key, "unknown key", f"the known keys are: {', '.join(ENV_KEYS)}")
    reqs = [
        _requirement(r, "requirements")
        for r in _strings(table, "requirements", 'e.g. requirements = ["hypothesis>=6"]')
    ]
    if "requirements_file" in table:
        rel = table["requirements_file"]
        if not isinstance(rel, str):
            raise SpecError(
                "requirements_file",
                f"expected a string, got {rel!r}",
                'e.g. requirements_file = "requirements-test.txt"',
            )
        reqs += _file_requirements(task_dir / rel, "requirements_file")
    python = table.get("python", "")
    if not isinstance(python, str):
        raise SpecError("python", f"expected a string, got {python!r}", 'e.g. python = ">=3.9"')
    try:
        SpecifierSet(python)
    except InvalidSpecifier as e:
        raise SpecError(
            "python", f"{python!r} is not a version constraint", 'e.g. python = ">=3.9,<3.13"'
        ) from e
    exclude = _strings(table, "exclude", 'e.g. exclude = ["attrs"]')
    return DependencySpec(
        requirements=tuple(sorted(dict.fromkeys(reqs))),
        python=python,
        setup=_strings(table, "setup", 'e.g. setup = ["python -m pip --version"]'),
        exclude=tuple(sorted({canonicalize_name(x) for x in exclude})),
    )


def check_python(spec: DependencySpec, what: str) -> None:
    """Refuse a ``python`` constraint this interpreter does not meet."""
    version = platform.python_version()
    if spec.python and not SpecifierSet(spec.python).contains(version, prereleases=True):
        raise DependenciesUnavailable(
            f"{what} needs Python {spec.python!r}, but the sandbox interpreter is Python "
            f"{version} ({sys.executable}). Fix: run repogym under a Python that meets the "
            "constraint (the bwrap sandbox runs the interpreter repogym runs on), or relax "
            "[environment] python"
        )


# -- built environments --------------------------------------------------------------------
def envs_dir() -> Path:
    """Where environments are built: ``<cache>/envs``."""
    return cache_dir() / "envs"


@dataclasses.dataclass(frozen=True)
class BuiltDependencies:
    """Built dependencies on disk.

    Attributes:
        root: ``<cache>/envs/<key>``.
        info: The contents of ``env.json``.
    """

    root: Path
    info: dict

    @property
    def site(self) -> Path:
        return self.root / "site"

    @property
    def sandbox(self) -> PackageSite:
        """What a sandbox binds."""
        return PackageSite(self.site, self.info["python"])

    @property
    def distributions(self) -> dict[str, str]:
        """Installed distribution -> version."""
        return dict(self.info.get("distributions", {}))


def built(spec: DependencySpec) -> BuiltDependencies | None:
    """The environment of ``spec`` if it is built here."""
    root = envs_dir() / spec.key
    try:
        info = json.loads((root / "env.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    return BuiltDependencies(root, info)


def locate(spec: DependencySpec, what: str, build_hint: str) -> BuiltDependencies:
    """The built environment of ``spec`` for ``what`` (a task), or a clear error.

    Raises:
        DependenciesUnavailable: the interpreter does not meet ``python``, or the
            environment is not built (the message gives ``repogym env build`` with
            ``build_hint``).
    """
    check_python(spec, what)
    env = built(spec)
    if env is None:
        raise DependenciesUnavailable(
            f"{what}: its environment ({spec.summary()}) is not built here. Fix: "
            f"`repogym env build {build_hint}` (needs network once; episodes then run "
            "without it)"
        )
    return env


def _pip_failure(output: str, spec: DependencySpec) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    names = [m.group(1) or m.group(2) for m in _SATISFIES.finditer(output)]
    culprit = next(
        (
            r
            for r in spec.effective_requirements()
            for n in names
            if canonicalize_name(Requirement(r).name)
            == canonicalize_name(re.split(r"[<>=!~\[; ]", n)[0])
        ),
        None,
    )
    key = [ln for ln in lines if _PIP_ERROR.search(ln)] or lines[-3:]
    head = (
        f"requirement {culprit!r} failed"
        if culprit
        else f"pip could not install the requirements ({spec.summary()})"
    )
    return (
        f"{head}: {' | '.join(key[-4:])[:800]}. Fix: check the name and version on PyPI "
        "(pip index versions NAME) and correct or relax it in [environment] "
        "requirements; a resolution conflict names the packages that disagree"
    )


def _pip_install(spec: DependencySpec, work: Path, log: list[str]) -> None:
    reqs = work / "requirements.txt"
    reqs.write_text("\n".join(spec.effective_requirements()) + "\n")
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--target",
        str(work / "site"),
        "--no-input",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--progress-bar",
        "off",
        "-r",
        str(reqs),
    ]
    try:
        res = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONNOUSERSITE": "1"},
        )
    except OSError as e:
        raise DependenciesUnavailable(
            f"could not run pip ({e}). Fix: install pip for {sys.executable} (python -m ensurepip)"
        ) from e
    log.append(res.stdout + res.stderr)
    if res.returncode != 0:
        if "No module named pip" in res.stderr:
            raise DependenciesUnavailable(
                f"{sys.executable} has no pip. Fix: python -m ensurepip --upgrade"
            )
        raise DependenciesUnavailable(_pip_failure(res.stdout + res.stderr, spec))


def _dist_infos(site: Path) -> dict[str, Path]:
    """canonical name -> its ``.dist-info`` folder."""
    out = {}
    for d in site.glob("*.dist-info"):
        try:
            name = (d / "METADATA").read_text(errors="replace").split("\nName:", 1)[1]
        except (OSError, IndexError):
            continue
        out[canonicalize_name(name.split("\n", 1)[0].strip())] = d
    return out


def _remove_distribution(site: Path, info: Path) -> None:
    record = info / "RECORD"
    rows = record.read_text().splitlines() if record.is_file() else []
    for row in rows:
        rel = row.split(",", 1)[0]
        path = (site / rel).resolve()
        if site.resolve() in path.parents and (path.is_file() or path.is_symlink()):
            path.unlink()
    shutil.rmtree(info, ignore_errors=True)
    for d in sorted((p for p in site.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(d.iterdir()):
            d.rmdir()


def _fix_scripts(site: Path) -> None:
    """Console scripts name the building interpreter; inside a sandbox it is ``python3``."""
    for script in (site / "bin").glob("*") if (site / "bin").is_dir() else []:
        if not script.is_file():
            continue
        data = script.read_bytes()
        if data.startswith(b"#!") and b"python" in data.split(b"\n", 1)[0]:
            script.write_bytes(b"#!/usr/bin/env python3\n" + data.split(b"\n", 1)[1])


def _run_setup(spec: DependencySpec, work: Path, log: list[str]) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work),
        "LANG": "C.UTF-8",
        "REPOGYM_ENV_SITE": str(work / "site"),
        "PYTHONPATH": str(work / "site"),
        "PYTHON": sys.executable,
    }
    for command in spec.setup:
        res = subprocess.run(
            ["/bin/bash", "-c", command],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        log.append(f"$ {command}\n{res.stdout}{res.stderr}")
        if res.returncode != 0:
            tail = (res.stdout + res.stderr).strip()[-600:]
            raise DependenciesUnavailable(
                f"setup command {command!r} exited {res.returncode}: {tail}. Fix: correct it "
                "in [environment] setup (it runs in the build folder with $REPOGYM_ENV_SITE "
                "the packages' folder and $PYTHON the interpreter)"
            )


def _finish(spec: DependencySpec, work: Path, seconds: float) -> dict:
    site = work / "site"
    excluded = []
    for name in spec.exclude:
        if info := _dist_infos(site).get(name):
            _remove_distribution(site, info)
            excluded.append(name)
    _fix_scripts(site)
    for dirpath, dirnames, filenames in os.walk(work):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        os.chmod(dirpath, 0o755)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, 0o755 if os.stat(p).st_mode & 0o111 else 0o644)
    dists = {}
    for name, info in sorted(_dist_infos(site).items()):
        version = (info / "METADATA").read_text(errors="replace").split("\nVersion:", 1)
        dists[name] = version[1].split("\n", 1)[0].strip() if len(version) > 1 else "?"
    return {
        "key": spec.key,
        "layout": LAYOUT,
        "python": python_version(),
        "interpreter": interpreter_tag(),
        "spec": dataclasses.asdict(spec),
        "requirements": list(spec.effective_requirements()),
        "distributions": dists,
        "excluded": excluded,
        "build_s": round(seconds, 2),
        "built_at": int(time.time()),
    }


def build(
    spec: DependencySpec, *, force: bool = False, on_start: Callable[[], None] | None = None
) -> tuple[BuiltDependencies, bool]:
    """Build ``spec``'s environment unless it is built already (safe across processes).

    Args:
        spec: What to install.
        force: Rebuild even if a build exists.
        on_start: Called when a build actually starts (not for an existing one).

    Returns:
        (the environment, whether it was built by this call).

    Raises:
        DependenciesUnavailable: the interpreter does not meet ``python``, pip failed (the
            message names the requirement and the fix) or a setup command failed.
    """
    check_python(spec, f"environment {spec.summary()!r}")
    root = envs_dir() / spec.key
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{spec.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and (existing := built(spec)) is not None:
            return existing, False
        if on_start:
            on_start()
        start = time.monotonic()
        log: list[str] = []
        with staged_dir(root, replace=True) as work:
            _pip_install(spec, work, log)
            _run_setup(spec, work, log)
            info = _finish(spec, work, time.monotonic() - start)
            (work / "build.log").write_text("\n".join(log))
            (work / "env.json").write_text(json.dumps(info, indent=1) + "\n")
    return BuiltDependencies(root, info), True


def lock(env: BuiltDependencies, spec: DependencySpec) -> DependencySpec:
    """``spec`` with its requirements replaced by exact pins of everything ``env`` (its build)
    installed, so a later build installs the same versions, and ``exclude`` kept only for
    what the build had to remove (so packages with the same pins share one environment).
    The existing build is registered under the pinned spec's key too (no second install)."""
    # Sorted as strings, as parse_spec sorts them: the spec a task.toml loads back as must
    # have this key ("pytest-mock==..." sorts before "pytest==...").
    pins = tuple(
        sorted(
            f"{name}=={version}"
            for name, version in env.distributions.items()
            if name not in spec.exclude
        )
    )
    removed = tuple(x for x in spec.exclude if x in env.info.get("excluded", spec.exclude))
    pinned = dataclasses.replace(spec, requirements=pins, exclude=removed)
    alias = envs_dir() / pinned.key
    if not alias.exists() and alias.resolve() != env.root.resolve():
        tmp = envs_dir() / f".{pinned.key}.link"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(env.root.name)
        os.replace(tmp, alias)
    return pinned


def list_built() -> list[BuiltDependencies]:
    """Every environment built here, newest first."""
    out = []
    for env_json in envs_dir().glob("*/env.json") if envs_dir().is_dir() else []:
        if env_json.parent.is_symlink():
            continue  # a pinned spec's alias of another build
        try:
            out.append(BuiltDependencies(env_json.parent, json.loads(env_json.read_text())))
        except ValueError:
            continue
    return sorted(out, key=lambda e: -e.info.get("built_at", 0))


# -- the package under test ------------------------------------------------------------
def top_level_names(folder: Path) -> set[str]:
    """Top-level import names a folder provides (packages, modules, extension modules)."""
    names = set()
    for p in folder.iterdir() if folder.is_dir() else []:
        if (
            p.name.startswith(".")
            or p.name.endswith((".dist-info", ".egg-info"))
            or p.name in ("bin", "__pycache__")
        ):
            continue
        if p.is_dir() and p.name.isidentifier():
            names.add(p.name)
        elif p.suffix in (".py", ".so", ".pyd") and p.name.split(".")[0].isidentifier():
            names.add(p.name.split(".")[0])
    return names


def _owner(site: Path, name: str) -> str:
    for dist, info in _dist_infos(site).items():
        record = info / "RECORD"
        if record.is_file() and any(
            row.startswith((f"{name}/", f"{name}.")) for row in record.read_text().splitlines()
        ):
            return dist
    return name


def _pulled_by(site: Path, dists: Iterable[str], direct: Iterable[str]) -> list[str]:
    """The ``direct`` requirements (names) whose dependencies, followed through the
    installed distributions' metadata, install one of ``dists`` (or are one)."""
    infos = _dist_infos(site)

    @functools.cache
    def needs(name: str) -> frozenset[str]:
        info = infos.get(name)
        out = set()
        text = (info / "METADATA").read_text(errors="replace") if info else ""
        for line in text.splitlines():
            if line.startswith("Requires-Dist:"):
                with contextlib.suppress(InvalidRequirement):
                    out.add(canonicalize_name(Requirement(line.split(":", 1)[1]).name))
        return frozenset(out)

    targets, found = {canonicalize_name(d) for d in dists}, []
    for req in direct:
        with contextlib.suppress(InvalidRequirement):
            name = canonicalize_name(Requirement(req).name)
            seen, todo = {name}, [name]
            while todo:
                for n in needs(todo.pop()) - seen:
                    seen.add(n)
                    todo.append(n)
            if targets & seen:
                found.append(name)
    return sorted(set(found))


def check_conflicts(
    env: BuiltDependencies, repo_dir: Path, paths: Iterable[str] = (), what: str = "the task"
) -> None:
    """Refuse an environment that installs a top-level module the repository itself has
    (at its root or under ``paths``, e.g. ``src`` or ``/workspace/src``): a grading run would
    import the installed copy and never test the repository's code.

    Raises:
        DependenciesUnavailable: naming the module, the distribution and the fix.
    """
    paths = tuple(
        str(PurePosixPath(p).relative_to(WORKSPACE)) if p.startswith(WORKSPACE + "/") else p
        for p in paths
    )
    key = (env.root, Path(repo_dir), paths)
    if key in _NO_CONFLICT:
        return
    ours = top_level_names(repo_dir)
    for p in paths:
        ours |= top_level_names(repo_dir / p)
    clash = sorted(ours & top_level_names(env.site))
    if not clash:
        _NO_CONFLICT.add(key)
    else:
        dists = sorted({_owner(env.site, n) for n in clash})
        direct = env.info.get("requirements", ())
        pulling = _pulled_by(env.site, dists, direct)
        drop = (
            f": `repogym history`, `synth --pypi` and `suite build` take "
            f"{' '.join('--no-requirement ' + r for r in pulling)}"
            if pulling
            else ""
        )
        raise DependenciesUnavailable(
            f"{what}: its environment installs {', '.join(clash)} (from {', '.join(dists)}), "
            f"which repo/ also provides; a grading run would test the installed copy. Fix: "
            f"add exclude = {_toml_list(dists)} to [environment] (or drop the requirement "
            f"that pulls it in{drop})"
        )


# -- old names, kept for existing imports ----------------------------------------------------
#: Old name of :class:`DependencySpec`.
EnvironmentSpec = DependencySpec
#: Old name of :class:`DependenciesUnavailable`.
EnvironmentUnavailable = DependenciesUnavailable
#: Old name of :class:`BuiltDependencies`.
BuiltEnvironment = BuiltDependencies
