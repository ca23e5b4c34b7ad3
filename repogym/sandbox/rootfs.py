"""A minimal root file system for the sandboxes: Debian's minbase, built once, offline after.

A sandbox that binds the host's ``/usr`` sees whatever the host installed there: vendored
copies of packages (a cloud SDK's ``third_party/inflection``), Debian's ``python3-*``
packages, docs. Any of them can hold the original lines of a task's bug. So the bwrap
sandbox gets a root of its own: ``debootstrap --variant=minbase`` of Debian bookworm with
git, procps, patch, less, tzdata and the shared libraries the interpreter's extension
modules need, and no Python packages at all (the interpreter is the host's, copied without
its site-packages; see :mod:`repogym.sandbox.runtime`). It is fetched from the Debian
mirror apt already uses and kept in repogym's cache (``<cache>/rootfs/bookworm-<key>``);
the bwrap backend binds its ``/usr`` (and the merged-``/usr`` links) read-only. The docker
backend's image is built the same way, with Debian's Python and pytest added
(:data:`DOCKER_PACKAGES`).

``REPOGYM_ROOTFS`` overrides: a path (another prepared root), or ``host`` (bind the host's
system folders, as a debugging aid: the sandbox then warns that host files are visible).

Command line (root): ``python -m repogym.sandbox.rootfs build|path|status``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from repogym.sandbox.base import SandboxError
from repogym.sandbox.runtime import cache_dir

SUITE = "bookworm"
#: Tools agents use and the shared libraries of the host interpreter's extension modules
#: (ssl, ctypes, sqlite3, readline, curses, lzma, bz2, zlib, uuid, dbm, crypt).
PACKAGES = (
    "git",
    "procps",
    "patch",
    "less",
    "tzdata",
    "libffi8",
    "libsqlite3-0",
    "libssl3",
    "libncursesw6",
    "libtinfo6",
    "libreadline8",
    "libuuid1",
    "libgdbm6",
    "libgdbm-compat4",
    "libnsl2",
    "liblzma5",
    "libbz2-1.0",
    "zlib1g",
    "libexpat1",
    "libcrypt1",
)
#: What the docker backend's default image adds: its interpreter is Debian's.
DOCKER_PACKAGES = ("python3", "python3-pytest", "python-is-python3")
#: A root is complete once this file exists (written last).
_DONE = ".repogym-rootfs"
_INSTALL_HINT = (
    "Fix: run `python -m repogym.sandbox.rootfs build` as root with debootstrap "
    "installed (`apt-get install -y debootstrap`), or `make setup`"
)


def key() -> str:
    """Names the root by what it is made of (a change of the package list rebuilds it)."""
    return hashlib.sha256(f"{SUITE}|{','.join(PACKAGES)}|1".encode()).hexdigest()[:12]


def default_dir() -> Path:
    return cache_dir() / "rootfs" / f"{SUITE}-{key()}"


def find() -> Path | None:
    """The root the sandboxes use: ``$REPOGYM_ROOTFS``, else the built default; None for
    the host's own folders (``REPOGYM_ROOTFS=host``, or no root built yet)."""
    override = os.environ.get("REPOGYM_ROOTFS", "")
    if override == "host":
        return None
    if override:
        path = Path(override)
        if not (path / "usr" / "bin" / "bash").is_file():
            raise SandboxError(
                f"REPOGYM_ROOTFS={override} is not a root file system (no "
                f"usr/bin/bash). {_INSTALL_HINT}, or unset REPOGYM_ROOTFS"
            )
        return path
    path = default_dir()
    return path if (path / _DONE).is_file() else None


def debian_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The Debian archive apt uses (deb822 ``.sources`` or one-line ``.list`` files)."""
    files = sorted((apt_dir / "sources.list.d").glob("*.sources"))
    files += [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.list"))]
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        if f.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                uris = re.search(r"^URIs:\s*(.+)$", stanza, re.MULTILINE)
                suites = re.search(r"^Suites:\s*(.+)$", stanza, re.MULTILINE)
                if uris and suites and SUITE in suites.group(1).split():
                    return uris.group(1).split()[0]
        else:
            for line in text.splitlines():
                m = re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line.strip())
                if m and m.group(2) == SUITE:
                    return m.group(1)
    return "http://deb.debian.org/debian"


def build(
    dest: Path | None = None, mirror: str | None = None, packages: tuple[str, ...] = PACKAGES
) -> Path:
    """Build a root with ``packages`` at ``dest`` (default :func:`default_dir`) unless it is
    there.

    Raises:
        SandboxError: not root, no debootstrap, or debootstrap failed (the message says why).
    """
    dest = dest or default_dir()
    if (dest / _DONE).is_file():
        return dest
    if os.geteuid() != 0:
        raise SandboxError(f"building the sandbox root file system needs root. {_INSTALL_HINT}")
    debootstrap = shutil.which(
        "debootstrap", path=os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin"
    )
    if not debootstrap:
        raise SandboxError(f"debootstrap is not installed. {_INSTALL_HINT}")
    mirror = mirror or debian_mirror()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        res = subprocess.run(
            [
                debootstrap,
                "--variant=minbase",
                f"--include={','.join(packages)}",
                SUITE,
                str(tmp),
                mirror,
            ],
            check=False,
            capture_output=True,
            text=True,
        )
        if res.returncode != 0:
            raise SandboxError(
                f"debootstrap failed (mirror {mirror}): "
                f"{(res.stdout + res.stderr)[-2000:]}. Fix: check that apt can "
                "reach that mirror"
            )
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for p in (tmp / junk).glob("*"):
                if p.is_file():
                    p.unlink()
        os.chmod(tmp, 0o755)
        (tmp / _DONE).write_text(f"{SUITE} {','.join(packages)}\n")
        try:
            tmp.rename(dest)
        except OSError:  # built meanwhile by another process
            if not (dest / _DONE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m repogym.sandbox.rootfs", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("action", choices=["build", "path", "status"])
    args = p.parse_args(argv)
    try:
        if args.action == "build":
            print(build())
        elif args.action == "path":
            print(find() or "host")
        else:
            root = find()
            print(
                f"sandbox root: {root}"
                if root
                else f"sandbox root: none (the host's system folders). {_INSTALL_HINT}"
            )
            return 0 if root else 1
    except SandboxError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
