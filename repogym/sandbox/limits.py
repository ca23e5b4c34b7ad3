"""Resource limits: rlimits for every command, cgroup v1 memory/pids where writable."""

from __future__ import annotations

import os
import resource
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from repogym.sandbox.types import Limits

CGROUP_ROOT = Path("/sys/fs/cgroup")
_CONTROLLERS = ("memory", "pids")
#: Joined where the kernel has it: lets a sandbox be frozen while a check runs beside it.
_OPTIONAL = ("freezer",)
CGROUP_PREFIX = "repogym-"
#: Memory headroom below which a failed start counts as the sandbox's own exhaustion.
_HEADROOM = 32 << 20


#: Signals whose disposition a sandboxed process starts with at the default, whatever the
#: caller left (``nohup`` and ``cmd &`` in a script start repogym with SIGINT and SIGQUIT
#: ignored, and an ignored signal stays ignored across exec: bash can then not even trap it).
RESET_SIGNALS = tuple(
    s
    for s in (
        signal.SIGHUP,
        signal.SIGINT,
        signal.SIGQUIT,
        signal.SIGTERM,
        signal.SIGPIPE,
        signal.SIGALRM,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGCHLD,
        signal.SIGTSTP,
        signal.SIGTTIN,
        signal.SIGTTOU,
        signal.SIGXCPU,
        signal.SIGXFSZ,
        signal.SIGURG,
    )
)


def default_signals() -> None:
    """In a child before exec: every signal at its default disposition, none blocked."""
    for sig in RESET_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


def rlimit_preexec(limits: Limits, *, cgroup: Cgroup | None) -> Callable[[], None]:
    """A ``preexec_fn`` that joins the cgroup, sets rlimits and default signal dispositions
    (:func:`default_signals`) in the child."""
    procs_files = cgroup.procs_files() if cgroup else []
    mem = limits.memory_mb * 1024 * 1024
    fsize = limits.file_size_mb * 1024 * 1024
    # With a memory cgroup the kernel enforces memory precisely; RLIMIT_AS stays as a
    # generous backstop because it breaks programs that reserve large virtual ranges.
    as_limit = max(mem * 4, 8 << 30) if procs_files else mem
    nproc = limits.pids * 8 if procs_files else limits.pids

    def preexec() -> None:
        default_signals()
        pid = str(os.getpid()).encode()
        for f in procs_files:
            fd = os.open(f, os.O_WRONLY)
            os.write(fd, pid)
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return preexec


class Cgroup:
    """One cgroup v1 group per sandbox under the memory and pids controllers.

    ``Cgroup.create`` returns None where cgroup v1 is not writable (not root, cgroup v2
    only): limits then rest on rlimits alone.
    """

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs

    @classmethod
    def create(cls, limits: Limits, owner: str) -> Cgroup | None:
        """A new group named after its owner (a lease), so leftovers can be found."""
        if os.geteuid() != 0:
            return None
        name = f"{CGROUP_PREFIX}{owner}-{uuid.uuid4().hex[:8]}"
        dirs: list[Path] = []
        try:
            for ctl in _CONTROLLERS:
                base = CGROUP_ROOT / ctl
                if not (base / "cgroup.procs").exists():
                    raise OSError(f"no cgroup v1 {ctl} controller")
                d = base / name
                d.mkdir()
                dirs.append(d)
            mem = str(limits.memory_mb * 1024 * 1024)
            (dirs[0] / "memory.limit_in_bytes").write_text(mem)
            swap = dirs[0] / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(mem)
            (dirs[1] / "pids.max").write_text(str(limits.pids))
            for ctl in _OPTIONAL:
                if (CGROUP_ROOT / ctl / "cgroup.procs").exists():
                    (CGROUP_ROOT / ctl / name).mkdir()
                    dirs.append(CGROUP_ROOT / ctl / name)
        except OSError:
            cls(dirs).remove()
            return None
        return cls(dirs)

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        """Host pids of every process in the group."""
        pids: set[int] = set()
        for d in self.dirs:
            try:
                pids.update(int(p) for p in (d / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return pids

    def kill(self, spare: Callable[[int], bool] | None = None) -> None:
        """SIGKILL every process still in the group (escaped process groups included),
        except those ``spare(pid)`` keeps."""
        for _ in range(20):
            pids = {p for p in self.pids() if spare is None or not spare(p)}
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def freeze(self) -> None:
        """Stop every process of the group until :meth:`thaw` (none can run, fork or see
        anything meanwhile). Uses the freezer controller; without it, SIGSTOP until no
        process of the group is left running.

        Raises:
            OSError: the group could not be frozen.
        """
        state = next((d / "freezer.state" for d in self.dirs if d.parent.name == "freezer"), None)
        if state is not None:
            state.write_text("FROZEN")
            for attempt in range(500):
                if state.read_text().strip() == "FROZEN":
                    return
                time.sleep(0.002 * min(attempt + 1, 10))
            raise OSError(f"{state} did not reach FROZEN")
        for _ in range(50):
            running = [p for p in self.pids() if _state(p) not in ("T", "Z", "X", None)]
            if not running:
                return
            for pid in running:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
        raise OSError("processes of the group kept running")

    def thaw(self) -> None:
        """Let the group's processes run again."""
        state = next((d / "freezer.state" for d in self.dirs if d.parent.name == "freezer"), None)
        if state is not None:
            state.write_text("THAWED")
            return
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def _value(self, controller: str, name: str) -> int | None:
        for d in self.dirs:
            if d.parent.name == controller:
                try:
                    text = (d / name).read_text().strip()
                except OSError:
                    return None
                return None if text == "max" else int(text)
        return None

    def oom_kills(self) -> int:
        """How many processes the memory controller has killed in this group so far."""
        for d in self.dirs:
            if d.parent.name == "memory":
                try:
                    for line in (d / "memory.oom_control").read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill":
                            return int(value)
                except (OSError, ValueError):
                    return 0
        return 0

    def exhausted(self) -> str | None:
        """Which of the group's own limits is used up (``memory``, ``pids``), or None.

        Memory stays charged to the group after its processes exit (tmpfs pages and
        inodes a command wrote), so a start can fail because of what earlier commands of
        the same sandbox did: that is the sandbox's own doing, never an infrastructure fault.
        """
        limit, usage = (self._value("memory", f"memory.{n}_in_bytes") for n in ("limit", "usage"))
        if limit and usage is not None and usage > limit - _HEADROOM:
            return "memory"
        pmax, pcur = self._value("pids", "pids.max"), self._value("pids", "pids.current")
        if pmax and pcur is not None and pcur >= pmax:
            return "pids"
        return None

    def remove(self) -> None:
        """Kill what is left and delete the group (waiting briefly for the kernel to reap)."""
        for attempt in range(100):
            self.kill()
            left = []
            for d in self.dirs:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    left.append(d)
            self.dirs = left
            if not left:
                return
            time.sleep(0.01 * min(attempt + 1, 10))


def _state(pid: int) -> str | None:
    """A process's state letter (``R``, ``S``, ``T``, ...), or None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _groups() -> list[Path]:
    return [
        d
        for ctl in (*_CONTROLLERS, *_OPTIONAL)
        for d in (CGROUP_ROOT / ctl).glob(CGROUP_PREFIX + "*")
    ]


def remove_cgroups(owner: str) -> list[Path]:
    """Kill and remove every group of ``owner`` (a lease name). Groups exist only for root's
    leases: another user's lease of the same name owns none."""
    if os.geteuid() != 0:
        return []
    mine = [d for d in _groups() if d.name.startswith(f"{CGROUP_PREFIX}{owner}-")]
    Cgroup(mine).remove()
    return mine
