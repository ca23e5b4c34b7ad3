"""Whether the process a leftover names as its owner still is that owner.

Leases are held with ``flock``, so the kernel itself says when their owner is gone. Other
leftovers name their owner by pid: Docker containers (label ``repogym.sandbox.owner =
host:pid``, with ``repogym.sandbox.created``) and the folders and cgroups written by repogym
before leases existed (``/dev/shm/repogym-ws-<pid>-*``, ``repogym-tpl-<pid>-*``, cgroups
``repogym-<pid>-<hex>``). A live pid is not proof of a live owner: the owner may have died
and its pid been reused, or it may have exec'd into another program. :func:`owner_gone`
therefore also treats as gone a process that started after the leftover was made (it cannot
have made it) and a process that is no longer a Python interpreter (repogym is Python).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from repogym.sandbox.leases import remove_tree, temp_root
from repogym.sandbox.limits import CGROUP_ROOT, Cgroup

_LEGACY_DIR = re.compile(r"^repogym-(?:ws|tpl)-(\d+)-")
_LEGACY_CGROUP = re.compile(r"^repogym-(\d+)-[0-9a-f]{8}$")
_PYTHON = re.compile(r"^python[0-9.]*$")
_CONTROLLERS = ("memory", "pids")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def started_at(pid: int) -> float | None:
    """When ``pid`` started (seconds since the epoch), or None if it does not exist."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    btime = next(
        int(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime ")
    )
    return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def owner_gone(pid: int, created: float) -> bool:
    """True unless ``pid`` can still be the repogym process that made a leftover at
    ``created`` (seconds since the epoch).

    Gone: no such process (or a zombie); a process that started after ``created``, with a
    second of slack for clock granularity (a reused pid); a process whose executable is not
    a Python interpreter (it exec'd away). A process of another user whose executable cannot
    be read counts as the owner.
    """
    fields = _stat_fields(pid)
    if fields is None or fields[0] == "Z":
        return True
    start = started_at(pid)
    if start is not None and start > created + 1.0:
        return True
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except PermissionError:
        return False
    except OSError:
        return True
    return not _PYTHON.match(exe.removesuffix(" (deleted)"))


def collect_legacy() -> list[Path]:
    """Remove leftovers of repogym versions before leases whose owner is gone: workspace and
    template folders in the temp folder (with their mounts) and cgroups. A leftover was made
    no later than its modification time, which is what :func:`owner_gone` compares with."""
    removed: list[Path] = []
    for folder in sorted(temp_root().parent.glob("repogym-*-*")):
        m = _LEGACY_DIR.match(folder.name)
        if m and folder.is_dir() and owner_gone(int(m.group(1)), folder.stat().st_mtime):
            remove_tree(folder)
            removed.append(folder)
    for ctl in _CONTROLLERS:
        for group in sorted((CGROUP_ROOT / ctl).glob("repogym-*")):
            m = _LEGACY_CGROUP.match(group.name)
            if m and owner_gone(int(m.group(1)), group.stat().st_mtime):
                Cgroup([group]).remove()
                if not group.exists():
                    removed.append(group)
    return removed
