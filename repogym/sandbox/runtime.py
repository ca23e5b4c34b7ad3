"""The Python runtime that sandboxed commands see.

Sandboxed commands get the host's base interpreter (``sys.base_prefix``) at
``/opt/python``, but never the host's site-packages: those hold repogym itself and its
built-in tasks (hidden tests, gold patches). What is bound is a copy of the interpreter
(its executable, ``libpython`` and standard library, without ``site-packages``, the
``test`` package, byte code and the static library), made once in repogym's cache with
hard links where it can, so a sandbox's mount table shows a neutral cache path, never the
host prefix (a pyenv folder under a home). In place of site-packages the sandbox sees a
small one holding only pytest and its dependencies, copied once per boot from the host
environment into repogym's tmpfs folder. Files for a minimal ``/etc`` live beside it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata as md
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from repogym.sandbox.leases import temp_root
from repogym.sandbox.staging import staged_dir

#: Distributions copied (with their dependencies) into the sandbox's site-packages.
SANDBOX_DISTRIBUTIONS = ("pytest",)
PYTHON_MOUNT = "/opt/python"

_ETC_FILES = {
    "passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n",
    "group": "root:x:0:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1 localhost\n::1 localhost\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
    "hostname": "sandbox\n",
}


@dataclasses.dataclass(frozen=True)
class Runtime:
    """Host paths that make up the sandbox's Python and ``/etc``.

    Attributes:
        prefix: The host interpreter's base prefix.
        site_packages: The prefix's own site-packages (never visible inside the sandbox).
        python_copy: The interpreter's copy bound at ``/opt/python`` (see the module
            docstring).
        sandbox_site: The folder bound at ``/opt/repogym/site``: pytest and its needs only.
        etc: A folder of minimal ``/etc`` files (passwd, group, hosts).
        python: Interpreter name inside ``/opt/python/bin``.
    """

    prefix: Path
    site_packages: Path
    python_copy: Path
    sandbox_site: Path
    etc: Path
    python: str


def cache_dir() -> Path:
    """repogym's persistent cache folder: ``$REPOGYM_CACHE``, else ``$XDG_CACHE_HOME/repogym``,
    else ``/var/cache/repogym`` for root (a system path, not a home) and
    ``~/.cache/repogym`` for other users."""
    if env := os.environ.get("REPOGYM_CACHE"):
        return Path(env)
    if base := os.environ.get("XDG_CACHE_HOME"):
        return Path(base) / "repogym"
    if os.geteuid() == 0:
        return Path("/var/cache/repogym")
    return Path.home() / ".cache" / "repogym"


def _dist_files(name: str) -> list[tuple[Path, str]]:
    """(absolute source, path relative to site-packages) for one installed distribution."""
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError as e:
        raise RuntimeError(
            f"'{name}' is not installed in {sys.prefix}; the sandbox needs it to run tests. "
            f"Fix: pip install {name}"
        ) from e
    out = []
    for f in dist.files or []:
        if f.suffix == ".pyc" or str(f).startswith(".."):
            continue
        out.append((Path(dist.locate_file(f)).resolve(), str(f)))
    return out


def dependency_closure(names: tuple[str, ...]) -> list[str]:
    """The named distributions and everything they require here (markers evaluated)."""
    from packaging.requirements import Requirement

    seen: dict[str, None] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen[key] = None
        for spec in md.requires(name) or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return sorted(seen)


def _compile(folder: Path, seen_as: str) -> None:
    """Byte-compile ``folder`` (bound read-only at ``seen_as`` in the sandbox) so that no
    sandboxed process compiles pytest or the standard library again: without the ``.pyc``
    files every ``import pytest`` in a sandbox took ~0.8 s. The sources keep their times
    (copied with them), so the checks on import hold; tracebacks name ``seen_as``."""
    import compileall
    import warnings

    with warnings.catch_warnings():  # the standard library's own test data warns
        warnings.simplefilter("ignore")
        compileall.compile_dir(str(folder), ddir=seen_as, quiet=2, workers=1)


def _build_site(dest: Path) -> None:
    with staged_dir(dest) as tmp:
        for name in dependency_closure(SANDBOX_DISTRIBUTIONS):
            for src, rel in _dist_files(name):
                if src.is_file():
                    target = tmp / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, target)
        _compile(tmp, "/opt/repogym/site")
        for root, _, files in os.walk(tmp):
            os.chmod(root, 0o755)
            for f in files:
                os.chmod(os.path.join(root, f), 0o644)


#: Parts of the standard library the copy leaves out (besides ``site-packages``).
_STDLIB_SKIP = {"site-packages", "dist-packages", "test", "__pycache__"}


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(src, dst)


def _build_python(prefix: Path, python: str, dest: Path) -> None:
    """Copy the interpreter under ``prefix`` to ``dest``: ``bin/<python>`` (with ``python3``
    and ``python`` links), its ``libpython`` and the standard library minus
    :data:`_STDLIB_SKIP`, byte code and ``config-*`` (the static library)."""
    with staged_dir(dest) as tmp:
        exe = Path(
            sys._base_executable if hasattr(sys, "_base_executable") else sys.executable
        ).resolve()
        _link_or_copy(exe, tmp / "bin" / python)
        for alias in ("python3", "python"):
            (tmp / "bin" / alias).symlink_to(python)
        (tmp / "lib").mkdir()
        for lib in sorted((prefix / "lib").glob(f"lib{python}*.so*")):
            if lib.is_file() and not lib.is_symlink():
                _link_or_copy(lib, tmp / "lib" / lib.name)
            elif lib.is_symlink():
                (tmp / "lib" / lib.name).symlink_to(os.readlink(lib))
        stdlib = Path(sysconfig.get_path("stdlib", vars={"installed_base": str(prefix)}))
        for dirpath, dirnames, filenames in os.walk(stdlib):
            rel = Path(dirpath).relative_to(stdlib)
            dirnames[:] = [
                d
                for d in dirnames
                if d not in _STDLIB_SKIP and not (rel == Path(".") and d.startswith("config-"))
            ]
            for name in filenames:
                src = Path(dirpath) / name
                if name.endswith(".pyc") or not src.is_file():
                    continue
                _link_or_copy(src, tmp / "lib" / python / rel / name)
        _compile(tmp / "lib" / python, f"/opt/python/lib/{python}")
        for root, _, _ in os.walk(tmp):
            os.chmod(root, 0o755)


def _build_etc(dest: Path) -> None:
    with staged_dir(dest) as tmp:
        for name, text in _ETC_FILES.items():
            (tmp / name).write_text(text)
            os.chmod(tmp / name, 0o644)
        os.chmod(tmp, 0o755)


@functools.cache
def runtime() -> Runtime:
    """The sandbox runtime for this interpreter, built in the cache on first use."""
    versions = "|".join(f"{n}={md.version(n)}" for n in dependency_closure(SANDBOX_DISTRIBUTIONS))
    key = hashlib.sha256(f"{sys.version}|{versions}|pyc".encode()).hexdigest()[:12]
    root = temp_root() / "rt" / key
    root.mkdir(parents=True, exist_ok=True)
    for p in (root.parent, root):
        os.chmod(p, 0o755)
    site = root / "site-packages"
    if not site.is_dir():
        _build_site(site)
    etc = root / "etc"
    if not etc.is_dir():
        _build_etc(etc)
    prefix = Path(sys.base_prefix).resolve()
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(prefix)})).resolve()
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    copies = cache_dir() / "python"
    copies.mkdir(parents=True, exist_ok=True)
    os.chmod(copies, 0o755)
    copy = copies / hashlib.sha256(f"{sys.version}|{prefix}|2".encode()).hexdigest()[:16]
    if not copy.is_dir():
        _build_python(prefix, python, copy)
    return Runtime(
        prefix=prefix,
        site_packages=purelib,
        python_copy=copy,
        sandbox_site=site,
        etc=etc,
        python=python,
    )


def package_data_dirs() -> list[Path]:
    """Host folders that hold repogym's code and task data; never visible in a sandbox."""
    dirs = {Path(__file__).resolve().parents[1]}  # the package this module is part of
    for entry in sys.path:
        p = Path(entry or ".").resolve()
        if p.is_dir() and (p / "repogym").is_dir():
            dirs.add(p / "repogym")
    return sorted(dirs)
