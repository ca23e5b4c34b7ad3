"""Leases: exclusive, numbered places for sandbox owners, held with ``flock``.

A **lease** belongs to one owner (an environment, a validation run): a folder
``<root>/u<n>`` on tmpfs and, as root, a uid of its own (``UID_BASE + n``) that every
sandbox of that owner runs as. Concurrent owners therefore never share a uid, so nothing
the kernel accounts per user (processes, inotify instances, pipe buffers, ...) lets one
episode starve another. The lock is held for as long as the owner lives: when the owner
dies, even by SIGKILL, the kernel drops it, and :func:`collect_garbage` (``repogym gc``)
knows that the folder and the lease's cgroups are left over. Names carry no pid and no host
path, so a sandbox's ``/proc/self/mountinfo`` shows only neutral names.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import tempfile
import weakref
from pathlib import Path

from repogym.sandbox import cleanup
from repogym.sandbox.limits import remove_cgroups

#: Group of every sandboxed process and of every template file (``nogroup``).
SANDBOX_GID = 65534
#: As root, lease ``n`` runs its sandboxes as uid ``UID_BASE + n``.
UID_BASE = int(os.environ.get("REPOGYM_UID_BASE", "2000000000"))
MAX_LEASES = 4096
_libc = ctypes.CDLL(None, use_errno=True)
_MNT_DETACH = 2


def temp_root() -> Path:
    """Where leases live: a ``repogym`` folder on tmpfs when the machine has one.

    Root uses ``/dev/shm/repogym``; other users ``/dev/shm/repogym-<uid>`` (never shared).
    """
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    name = "repogym" if os.geteuid() == 0 else f"repogym-{os.geteuid()}"
    root = base / name
    root.mkdir(mode=0o755, exist_ok=True)
    (root / ".locks").mkdir(mode=0o700, exist_ok=True)
    return root


def mount(source: str, target: Path, fstype: str, data: str) -> None:
    rc = _libc.mount(source.encode(), str(target).encode(), fstype.encode(), 0, data.encode())
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype} on {target}: {os.strerror(err)}")


def umount(target: Path) -> None:
    if _libc.umount2(str(target).encode(), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (22, 2):  # EINVAL: not a mount point; ENOENT: already gone
            raise OSError(err, f"umount {target}: {os.strerror(err)}")


def remove_tree(root: Path) -> None:
    """Unmount everything mounted below ``root`` (deepest first), then delete it."""
    prefix = str(root) + "/"
    try:
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        mounts = []
    for m in sorted(
        (m for m in mounts if m == str(root) or m.startswith(prefix)), key=len, reverse=True
    ):
        umount(Path(m))
    shutil.rmtree(root, ignore_errors=True)


class Lease:
    """An exclusive numbered folder (and, as root, uid) held with ``flock``.

    Attributes:
        number: The lease number ``n``.
        path: ``<temp_root>/u<n>``, emptied when the lease is taken.
        uid: The uid its sandboxes run as (``UID_BASE + n`` as root, else this user's).
    """

    def __init__(self, number: int, fd: int) -> None:
        self.number = number
        self._fd: list[int] = [fd]  # shared with the clean-up, which closes it once
        self.path = temp_root() / f"u{number}"
        self.uid = UID_BASE + number if os.geteuid() == 0 else os.getuid()
        self.name = f"u{number}"
        # Released on release(), garbage collection, interpreter exit or a fatal signal.
        self._release = cleanup.register(self, _release, self._fd, self.path, self.name)
        _LEASES[self.path] = self

    @classmethod
    def acquire(cls) -> Lease:
        """Take the lowest free lease, clearing what a dead previous holder left there."""
        locks = temp_root() / ".locks"
        for n in range(MAX_LEASES):
            fd = os.open(locks / f"u{n}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            lease = cls(n, fd)
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                remove_tree(lease.path)  # what a dead previous holder left
                remove_cgroups(lease.name)
                lease.path.mkdir(mode=0o755)
                if os.geteuid() == 0:
                    os.chown(lease.path, 0, 0)
            except BaseException:
                lease.release()
                raise
            return lease
        raise OSError(
            f"all {MAX_LEASES} sandbox leases under {temp_root()} are in use. Fix: "
            "close environments you no longer need, or run `repogym gc`"
        )

    @property
    def held(self) -> bool:
        return bool(self._fd)

    def release(self) -> None:
        """Delete the folder and drop the lock. Idempotent."""
        self._release()

    def passwd(self) -> Path:
        """An ``/etc/passwd`` naming the lease's uid (git and ``id`` want a name)."""
        path = self.path / "passwd"
        if not path.exists():
            path.write_text(
                "root:x:0:0:root:/root:/bin/sh\n"
                f"sandbox:x:{self.uid}:{SANDBOX_GID}:sandbox:/tmp:/bin/sh\n"
                f"nobody:x:65534:{SANDBOX_GID}:nobody:/nonexistent:/bin/sh\n"
            )
            os.chmod(path, 0o644)
        return path


#: Live leases by folder (what keeps a lease alive while something still uses its folder).
_LEASES: weakref.WeakValueDictionary[Path, Lease] = weakref.WeakValueDictionary()


def lease_at(folder: Path) -> Lease | None:
    """The live lease of this process whose folder is ``folder`` (None if there is none).

    A workspace keeps its template's lease alive with it, so that dropping the cache that
    took the lease cannot remove a template a sandbox still uses.
    """
    return _LEASES.get(Path(folder))


def _close_inherited_locks() -> None:
    """A forked child owns none of its parent's leases: close its copies of their locks, so
    the child never keeps a lease looking held after the owner died."""
    for lease in list(_LEASES.values()):
        while lease._fd:
            os.close(lease._fd.pop())


os.register_at_fork(after_in_child=_close_inherited_locks)


def _release(fd: list[int], path: Path, name: str) -> None:
    """Remove a lease's folder (with its mounts) and cgroups, then drop its lock.

    Idempotent (it may run again after a signal interrupted it); the lock goes last, so
    nobody takes the lease while its leftovers are still there.
    """
    try:
        remove_tree(path)
        remove_cgroups(name)
    finally:
        if fd:
            os.close(fd.pop())


def lease_of(template: Path) -> tuple[Path, int]:
    """The lease folder a template lives in, and the uid that owns it."""
    template = Path(template)
    return template.parent.parent, template.stat().st_uid


def collect_garbage() -> list[Path]:
    """Remove what holders that are gone left behind: lease folders (with their mounts) and
    cgroups. Returns what was removed.

    A process killed with SIGKILL cannot run ``close()``, but the kernel drops its lock:
    every lease whose lock can be taken now is left over. The lock is held while its
    leftovers are removed, so a new owner cannot take the lease half-way; only the cgroups of
    leases locked here are touched, so a lease taken meanwhile keeps its own.
    """
    root = temp_root()
    removed: list[Path] = []
    free: list[int] = []
    try:
        for lock in sorted((root / ".locks").glob("u*")):
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            free.append(fd)
            folder = root / lock.name
            if folder.exists():
                remove_tree(folder)
                removed.append(folder)
            removed += remove_cgroups(lock.name)
    finally:
        for fd in free:
            os.close(fd)
    return removed
