"""Per-episode workspaces built from a prepared template.

A *template* is a task's ``repo/`` copied once into a temp folder and made into exactly one
git commit (fixed author, committer and date, so the hash is the same everywhere) with
nothing else in ``.git``: no reflog, no hooks, no tags, no remotes. A *workspace* is a
writable view of a template for one episode:

- as root: an overlayfs (template as lower layer) whose upper layer lives on a size-capped
  tmpfs, so creation costs two ``mount(2)`` calls and writes never reach the template;
- otherwise: a copy of the template into tmpfs (``/dev/shm``), never a hardlink copy.

Both are removed by an explicit, idempotent ``close()``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Self

SANDBOX_UID = 65534
TEMPLATE_PREFIX = "repogym-tpl-"
WORKSPACE_PREFIX = "repogym-ws-"
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
_libc = ctypes.CDLL(None, use_errno=True)
_MNT_DETACH = 2


def temp_root() -> Path:
    """Where templates and workspaces live: tmpfs when the machine has it."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


def _mount(source: str, target: Path, fstype: str, data: str) -> None:
    rc = _libc.mount(source.encode(), str(target).encode(), fstype.encode(), 0, data.encode())
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype} on {target}: {os.strerror(err)}")


def _umount(target: Path) -> None:
    if _libc.umount2(str(target).encode(), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (22, 2):  # EINVAL: not a mount point; ENOENT: already gone
            raise OSError(err, f"umount {target}: {os.strerror(err)}")


def _chown_tree(root: Path, uid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        os.lchown(dirpath, uid, uid)
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, uid)


def make_template(repo_dir: Path, dest: Path) -> None:
    """Copy ``repo_dir`` to ``dest`` and make it one commit with nothing else in ``.git``."""
    shutil.copytree(repo_dir, dest, symlinks=True)
    git = ["git", "-c", "init.defaultBranch=main", "-c", "core.hooksPath=/dev/null"]
    env = dict(_GIT_ENV)
    for args in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-q", "--no-verify",
                                                         "--allow-empty", "-m", "Initial commit"]):
        subprocess.run(git + args, cwd=dest, env=env, check=True, capture_output=True)
    gitdir = dest / ".git"
    for name in ("hooks", "logs", "description", "info", "branches", "COMMIT_EDITMSG",
                 "ORIG_HEAD"):
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
    if os.geteuid() == 0:
        _chown_tree(dest, SANDBOX_UID)


class TemplateCache:
    """Templates for one environment instance, made lazily and removed on ``close()``."""

    def __init__(self) -> None:
        self._root: Path | None = None
        self._templates: dict[Path, Path] = {}
        self._lock = threading.Lock()

    def get(self, repo_dir: Path) -> Path:
        """The prepared template for a task's ``repo/`` folder."""
        repo_dir = repo_dir.resolve()
        with self._lock:
            if repo_dir not in self._templates:
                if self._root is None:
                    self._root = Path(tempfile.mkdtemp(prefix=f"{TEMPLATE_PREFIX}{os.getpid()}-",
                                                       dir=temp_root()))
                    os.chmod(self._root, 0o755)
                dest = self._root / str(len(self._templates))
                make_template(repo_dir, dest)
                self._templates[repo_dir] = dest
            return self._templates[repo_dir]

    def close(self) -> None:
        with self._lock:
            if self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
            self._templates.clear()


class Workspace:
    """A writable copy of a template, owned by the sandbox uid.

    Attributes:
        path: The folder bound at ``/workspace`` inside the sandbox.
        tmp: The episode's ``/tmp`` (kept between commands, removed with the workspace).
        overlay: True when built with overlayfs (root), False for a tmpfs copy.
    """

    def __init__(self, template: Path, size_mb: int = 1024) -> None:
        self.template = template
        self._root = Path(tempfile.mkdtemp(prefix=f"{WORKSPACE_PREFIX}{os.getpid()}-",
                                           dir=temp_root()))
        self._mounts: list[Path] = []
        self.overlay = os.geteuid() == 0
        try:
            if self.overlay:
                self._make_overlay(size_mb)
            else:
                self.path = self._root / "merged"
                shutil.copytree(template, self.path, symlinks=True)
            self.tmp = self._root / "tmp"
            self.tmp.mkdir()
            os.chmod(self.tmp, 0o1777)
        except BaseException:
            self.close()
            raise

    def _make_overlay(self, size_mb: int) -> None:
        os.chmod(self._root, 0o755)
        _mount("tmpfs", self._root, "tmpfs", f"size={size_mb}m,mode=0755")
        self._mounts.append(self._root)
        upper, work, merged = (self._root / n for n in ("upper", "work", "merged"))
        for d in (upper, work, merged):
            d.mkdir()
        os.chown(upper, SANDBOX_UID, SANDBOX_UID)
        _mount("overlay", merged, "overlay",
               f"lowerdir={self.template},upperdir={upper},workdir={work}")
        self._mounts.append(merged)
        self.path = merged

    def close(self) -> None:
        """Unmount and delete. Idempotent."""
        while self._mounts:
            _umount(self._mounts.pop())
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None  # type: ignore[assignment]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _owner_alive(name: str, prefix: str) -> bool:
    pid = name[len(prefix):].split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def collect_garbage() -> list[Path]:
    """Unmount and delete workspaces and templates whose owning process is gone.

    A process killed with SIGKILL cannot run ``close()``; its folders carry its pid, so
    ``repogym gc`` can find them. Returns what was removed.
    """
    removed = []
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for prefix in (WORKSPACE_PREFIX, TEMPLATE_PREFIX):
        for root in temp_root().glob(prefix + "*"):
            if _owner_alive(root.name, prefix):
                continue
            for m in sorted((m for m in mounts if m.startswith(str(root))), reverse=True):
                _umount(Path(m))
            shutil.rmtree(root, ignore_errors=True)
            removed.append(root)
    return removed
