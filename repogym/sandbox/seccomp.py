"""The syscall policy every sandboxed command runs under, for bwrap and docker alike.

Namespaces separate what a process can see; they do not separate kernel state that is keyed
by user or that reaches the kernel's own attack surface. The policy refuses exactly that:

- the kernel keyrings (``add_key``, ``keyctl``, ``request_key``): a user keyring outlives
  the processes that wrote it and is shared by everything running as the same uid;
- new namespaces (``unshare``, ``setns``, ``clone``/``clone3`` with ``CLONE_NEW*``):
  an unprivileged user namespace hands out full capabilities inside it;
- tracing, eBPF, perf events, io_uring, userfaultfd, kernel modules, mounts, kexec, reboot,
  swap, clocks, ``open_by_handle_at`` and the like (the privileged or risky calls Docker's
  default profile refuses too);
- extended attributes on files (``setxattr`` family): on the workspace's tmpfs they would
  pin memory outside the workspace's size cap.

Everything else is allowed. Refused calls fail with ``EPERM`` (``ENOTSUP`` for xattrs,
``ENOSYS`` for ``clone3`` so that libc falls back to ``clone``, whose flags can be checked).
The same :data:`POLICY` is compiled to BPF with libseccomp (through ``pyseccomp``) for
bwrap's ``--seccomp``, and rendered as a Docker seccomp profile for the docker backend.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import json
import os

from repogym.sandbox.base import SandboxError

#: ``clone`` flags that create namespaces (the first argument on x86-64 and arm64).
CLONE_NEW_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
    "CLONE_NEWTIME": 0x00000080,
}


@dataclasses.dataclass(frozen=True)
class Rule:
    """Refuse ``syscalls`` with ``errno`` (the reason says why, for docs and tests)."""

    syscalls: tuple[str, ...]
    errno: int
    reason: str


POLICY: tuple[Rule, ...] = (
    Rule(
        ("add_key", "keyctl", "request_key"),
        errno.EPERM,
        "kernel keyrings are shared by every process of a uid and outlive them",
    ),
    Rule(("unshare", "setns"), errno.EPERM, "no new namespaces (user namespaces give caps)"),
    Rule(("clone3",), errno.ENOSYS, "its flags cannot be checked; libc falls back to clone"),
    Rule(
        ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp"),
        errno.EPERM,
        "no tracing or reading other processes' memory",
    ),
    Rule(
        (
            "bpf",
            "perf_event_open",
            "userfaultfd",
            "io_uring_setup",
            "io_uring_enter",
            "io_uring_register",
            "fanotify_init",
            "lookup_dcookie",
        ),
        errno.EPERM,
        "kernel attack surface with no use in a test run",
    ),
    Rule(
        (
            "init_module",
            "finit_module",
            "delete_module",
            "kexec_load",
            "kexec_file_load",
            "reboot",
            "swapon",
            "swapoff",
            "acct",
            "quotactl",
            "syslog",
            "uselib",
            "settimeofday",
            "clock_settime",
            "clock_adjtime",
            "adjtimex",
            "ioperm",
            "iopl",
            "name_to_handle_at",
            "open_by_handle_at",
            "personality",
        ),
        errno.EPERM,
        "privileged calls (as in Docker's default profile)",
    ),
    Rule(
        (
            "mount",
            "umount2",
            "pivot_root",
            "move_mount",
            "open_tree",
            "fsopen",
            "fsmount",
            "fsconfig",
            "fspick",
            "mount_setattr",
            "chroot",
        ),
        errno.EPERM,
        "the sandbox's mounts are fixed",
    ),
    Rule(
        ("setxattr", "lsetxattr", "fsetxattr"),
        errno.ENOTSUP,
        "xattrs on tmpfs pin memory outside the workspace's size cap",
    ),
)


def _filter():
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as e:  # OSError: libseccomp.so.2 missing
        raise SandboxError(
            f"the seccomp filter cannot be built: {e}. Fix: `apt-get install -y "
            "libseccomp2` and `pip install pyseccomp`"
        ) from e
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for rule in POLICY:
        for name in rule.syscalls:
            try:
                f.add_rule(sc.ERRNO(rule.errno), name)
            except (ValueError, RuntimeError, OSError):
                continue  # not a syscall on this architecture
    for flag in CLONE_NEW_FLAGS.values():
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    return f


@functools.cache
def bpf_program() -> bytes:
    """The policy compiled to a BPF program (what ``bwrap --seccomp FD`` reads)."""
    with os.fdopen(os.memfd_create("repogym-seccomp-build", os.MFD_CLOEXEC), "w+b") as f:
        _filter().export_bpf(f)
        f.seek(0)
        data = f.read()
    if not data or len(data) % 8:
        raise SandboxError(
            "libseccomp exported an empty or malformed BPF program. Fix: "
            "update libseccomp2 and pyseccomp"
        )
    return data


def bpf_fd() -> int:
    """A fresh memfd holding :func:`bpf_program`, positioned at its start (caller closes)."""
    fd = os.memfd_create("repogym-seccomp", os.MFD_CLOEXEC)
    os.write(fd, bpf_program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def docker_profile() -> str:
    """The policy as a Docker seccomp profile (JSON), for ``security_opt=["seccomp=..."]``."""
    syscalls = [
        {"names": list(r.syscalls), "action": "SCMP_ACT_ERRNO", "errnoRet": r.errno} for r in POLICY
    ]
    syscalls += [
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": errno.EPERM,
            "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
        }
        for flag in CLONE_NEW_FLAGS.values()
    ]
    return json.dumps(
        {
            "defaultAction": "SCMP_ACT_ALLOW",
            # Native architectures only: another ABI's calls are refused
            # outright, as libseccomp does for bwrap.
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
            "syscalls": syscalls,
        }
    )
