"""Templates and per-episode workspaces, inside a :class:`~repogym.sandbox.leases.Lease`.

A **template** is a task's ``repo/`` copied once into a lease folder and made into exactly
one git commit (fixed author, committer and date, so the hash is the same everywhere) with
nothing else in ``.git``: no reflog, no hooks, no tags, no remotes. It belongs to the
lease's uid, the uid every sandbox started from it runs as. A **workspace** is a writable
view of a template for one sandbox:

- as root: an overlayfs (template as lower layer) whose upper layer lives on a tmpfs capped
  in bytes and inodes, so creation costs two ``mount(2)`` calls and writes never reach the
  template;
- otherwise: a copy of the template into tmpfs (``/dev/shm``), never a hardlink copy.

A workspace can also start as a copy of another live one of the same template (a fork):
as root its overlay's upper layer (what the agent changed, deletions included) and its
``/tmp`` are copied before the overlay is mounted, so a fork costs what the episode
changed, not the repository's size.

Everything is removed by explicit, idempotent ``close()`` calls.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Self

from repogym.sandbox.leases import SANDBOX_GID, Lease, lease_at, lease_of, mount, umount
from repogym.sandbox.types import PackageSite, SandboxError

#: File changes for :func:`make_diff`: path -> new text, None (delete) or "->target" (symlink).
Changes = dict[str, str | None]
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "repogym",
    "GIT_AUTHOR_EMAIL": "repogym@localhost",
    "GIT_COMMITTER_NAME": "repogym",
    "GIT_COMMITTER_EMAIL": "repogym@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin",
}


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        os.lchown(dirpath, uid, gid)
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, gid)


def make_template(repo_dir: Path, dest: Path, uid: int | None = None) -> None:
    """Copy ``repo_dir`` to ``dest`` and make it one commit with nothing else in ``.git``.

    As root the copy is owned by ``uid`` (the lease's) and group ``nogroup``.
    """
    shutil.copytree(repo_dir, dest, symlinks=True)
    git = ["git", "-c", "init.defaultBranch=main", "-c", "core.hooksPath=/dev/null"]
    env = dict(_GIT_ENV)
    for args in (
        ["init", "-q"],
        ["add", "-A", "-f"],
        ["commit", "-q", "--no-verify", "--allow-empty", "-m", "Initial commit"],
    ):
        subprocess.run(git + args, cwd=dest, env=env, check=True, capture_output=True)
    gitdir = dest / ".git"
    for name in ("hooks", "logs", "description", "info", "branches", "COMMIT_EDITMSG", "ORIG_HEAD"):
        p = gitdir / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    (gitdir / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
    )
    for dirpath, _, filenames in os.walk(dest):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, 0o755 if os.stat(p).st_mode & 0o111 else 0o644)
    if os.geteuid() == 0 and uid is not None:
        _chown_tree(dest, uid, SANDBOX_GID)


def make_diff(repo_dir: Path, changes: Changes) -> str:
    """The ``git diff`` (as the env's diff would show it) that turns ``repo_dir`` into
    ``repo_dir`` + ``changes``: ``path -> new text``, ``None`` to delete, ``"->target"`` for a
    symlink. ``repo_dir`` is not touched."""
    with tempfile.TemporaryDirectory(prefix="repogym-attack-") as tmp:
        work = Path(tmp) / "repo"
        make_template(repo_dir, work)
        for rel, content in changes.items():
            path = work / rel
            if content is None:
                if path.is_file() or path.is_symlink():
                    path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():
                path.unlink()
            if content.startswith("->"):
                os.symlink(content[2:], path)
            else:
                path.write_text(content, encoding="utf-8")
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": tmp,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
        }
        git = ["git", "-c", "core.hooksPath=/dev/null", "-c", "safe.directory=*"]
        subprocess.run(
            [*git, "add", "-A", "-f"], cwd=work, env=env, check=True, capture_output=True
        )
        res = subprocess.run(
            [*git, "diff", "--cached", "--binary", "--no-color", "--no-renames", "HEAD"],
            cwd=work,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        return res.stdout


def _environment_file(template: Path) -> Path:
    # Beside the template in the lease folder (never inside a sandbox).
    return template.with_name(template.name + ".env.json")


def template_dependencies(template: Path) -> PackageSite | None:
    """The environment a template was made with (:meth:`TemplateCache.get`), if any."""
    try:
        data = json.loads(_environment_file(Path(template)).read_text())
    except FileNotFoundError:
        return None
    return PackageSite(Path(data["site"]), data["python"])


class TemplateCache:
    """Templates for one owner, under one lease taken on first use; ``close()`` frees both.

    Every sandbox started from these templates runs as the lease's uid. :meth:`share` gives
    another owner (a forked env) a handle on the same templates: the lease is freed when
    every handle has closed.
    """

    def __init__(self) -> None:
        self._state = _Templates()

    @property
    def lease(self) -> Lease:
        """The lease (taken now if this cache has none yet)."""
        with self._state.lock:
            return self._state.ensure_lease()

    def get(self, repo_dir: Path, environment: PackageSite | None = None) -> Path:
        """The prepared template for a task's ``repo/`` folder, carrying ``environment``
        (bound read-only by every sandbox started from the template)."""
        key = (Path(repo_dir).resolve(), environment)
        state = self._state
        with state.lock:
            if key not in state.templates:
                lease = state.ensure_lease()
                lease.passwd()
                dest = lease.path / "t" / str(len(state.templates))
                make_template(key[0], dest, lease.uid)
                if environment is not None:
                    _environment_file(dest).write_text(
                        json.dumps({"site": str(environment.site), "python": environment.python})
                    )
                state.templates[key] = dest
            return state.templates[key]

    def share(self) -> TemplateCache:
        """Another handle on these templates (and lease), closed on its own."""
        other = TemplateCache()
        with self._state.lock:
            other._state = self._state
            self._state.owners += 1
        return other

    def close(self) -> None:
        """Drop this handle; the last one open frees the lease. Idempotent; the cache can
        be used again afterwards (with a new lease)."""
        state = self._state
        with state.lock:
            if state.owners > 1:  # others still use the templates: only leave them
                state.owners -= 1
                self._state = _Templates()
                return
            if state.lease is not None:
                state.lease.release()
            state.lease = None
            state.templates.clear()


class _Templates:
    """What the handles of one :class:`TemplateCache` share."""

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.templates: dict[tuple[Path, PackageSite | None], Path] = {}
        self.lock = threading.Lock()
        self.owners = 1

    def ensure_lease(self) -> Lease:
        if self.lease is None:
            self.lease = Lease.acquire()
            (self.lease.path / "t").mkdir(mode=0o755)
            (self.lease.path / "w").mkdir(mode=0o755)
        return self.lease


class Workspace:
    """A writable view of a template, owned by the template's (the lease's) uid.

    Attributes:
        path: The folder bound at ``/workspace`` inside the sandbox.
        tmp: The sandbox's ``/tmp`` (kept between commands, removed with the workspace).
        overlay: True when built with overlayfs (root), False for a tmpfs copy.
        uid: The uid the sandbox's commands run as.
        lease_dir: The lease folder the workspace lives in.
        environment: The template's environment (bound read-only), or None.
    """

    def __init__(
        self,
        template: Path,
        size_mb: int = 1024,
        inodes: int = 65536,
        copy_of: Workspace | None = None,
    ) -> None:
        if copy_of is not None and (copy_of.template != Path(template) or copy_of.closed):
            raise ValueError(
                "copy_of must be a live workspace of the same template. Fix: "
                "fork a sandbox that is still open"
            )
        self.template = Path(template)
        self.lease_dir, self.uid = lease_of(self.template)
        self.dependencies = template_dependencies(self.template)
        self._lease = lease_at(self.lease_dir)  # kept alive as long as this workspace
        self._mounts: list[Path] = []
        self._beside: list[Path] = []
        self.overlay = os.geteuid() == 0
        self._root: Path | None = self.lease_dir / "w" / secrets.token_hex(4)
        self._root.mkdir(mode=0o755)
        try:
            if self.overlay:
                self._make_overlay(size_mb, inodes, copy_of)
            elif copy_of is not None:
                assert copy_of._root is not None
                _copy_into(copy_of._root, ("merged", "tmp"), self._root)
                self.path = self._root / "merged"
            else:
                self.path = self._root / "merged"
                shutil.copytree(self.template, self.path, symlinks=True)
            self.tmp = self._root / "tmp"
            if copy_of is None:
                self.tmp.mkdir()
                os.chmod(self.tmp, 0o1777)
        except BaseException:
            self.close()
            raise

    @property
    def closed(self) -> bool:
        return self._root is None

    def _make_overlay(self, size_mb: int, inodes: int, copy_of: Workspace | None) -> None:
        assert self._root is not None
        mount("tmpfs", self._root, "tmpfs", f"size={size_mb}m,nr_inodes={inodes},mode=0755")
        self._mounts.append(self._root)
        upper, work, merged = (self._root / n for n in ("upper", "work", "merged"))
        if copy_of is not None:
            if not copy_of.overlay or copy_of._root is None:
                raise ValueError("copy_of is not an overlay workspace")
            # What the other workspace changed (files, whiteouts for deletions, opaque
            # folders' xattrs) and its /tmp, copied while its overlay is mounted, with
            # nothing of it running.
            _copy_into(copy_of._root, ("upper", "tmp"), self._root)
        else:
            upper.mkdir()
            os.chown(upper, self.uid, SANDBOX_GID)
        work.mkdir()
        merged.mkdir()
        mount(
            "overlay",
            merged,
            "overlay",
            f"lowerdir={self.template},upperdir={upper},workdir={work}",
        )
        self._mounts.append(merged)
        self.path = merged

    def scratch(self, name: str) -> Path:
        """A folder beside the workspace on the same capped tmpfs (never inside the sandbox
        unless bound there), e.g. for what a sandboxed command writes for the host."""
        assert self._root is not None
        path = self._root / name
        path.mkdir(mode=0o755, exist_ok=True)
        return path

    def beside(self, name: str) -> Path:
        """A folder next to the workspace's tmpfs, in the lease folder, for what only the
        host writes (a backend's read-only transfers into the sandbox). The sandbox cannot
        fill it, so a copy into it never fails because the agent filled its workspace.
        Removed by :meth:`close`."""
        assert self._root is not None
        path = self._root.with_name(f"{self._root.name}.{name}")
        path.mkdir(mode=0o755, exist_ok=True)
        self._beside.append(path)
        return path

    def close(self) -> None:
        """Unmount and delete. Idempotent."""
        while self._mounts:
            umount(self._mounts.pop())
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
        while self._beside:
            shutil.rmtree(self._beside.pop(), ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _copy_into(src: Path, names: tuple[str, ...], dst: Path) -> None:
    """Copy the folders ``src/<name>`` into ``dst`` as they are, in one ``cp -a``: symlinks
    as links (never followed), FIFOs and devices as such (never opened), owners, modes,
    xattrs and hard links kept."""
    res = subprocess.run(
        ["cp", "-a", "--", *(f"{src}/{n}" for n in names), f"{dst}/"],
        check=False,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
    )
    if res.returncode != 0:
        raise SandboxError(f"could not copy the workspace {src}: {res.stderr.strip()[-500:]}")
