"""Attack class 7: kernel state that namespaces do not separate.

Every command, the verifier's included, runs under repogym's seccomp policy. Probed here from
an episode and from code the grader imports with the hidden tests present: the keyrings
(``add_key`` with the hidden tests in it, ``keyctl`` from a later episode), new namespaces
(``unshare -U -r``, ``unshare -m``, ``clone`` with ``CLONE_NEWUSER`` through ctypes,
``clone3``, ``setns``), ``ptrace`` of pid 1, ``process_vm_readv``, ``bpf``,
``perf_event_open``, ``io_uring``, ``userfaultfd``, mounts, ``chroot``, ``setxattr``, and the
same calls through the i386 ABI (``int 0x80``), which bypasses a native-only filter unless
foreign architectures are killed. On the host, the lease's uid never gets a key.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import gymnasium as gym
import pytest

from tests.adversarial.conftest import close_and_check, probe
from tests.conftest import call

pytestmark = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "aarch64"),
    reason="syscall numbers are given for x86_64 and aarch64",
)

SYSCALLS = r"""
import ctypes, errno, json, os, platform, signal, subprocess, sys

X86 = platform.machine() == "x86_64"
NR = dict(add_key=248, request_key=249, keyctl=250, unshare=272, setns=308, clone3=435,
          ptrace=101, process_vm_readv=310, bpf=321, perf_event_open=298,
          io_uring_setup=425, userfaultfd=323, mount=165, umount2=166, chroot=161,
          setxattr=188, open_by_handle_at=304, clone=56) if X86 else dict(
          add_key=217, request_key=218, keyctl=219, unshare=97, setns=268, clone3=435,
          ptrace=117, process_vm_readv=270, bpf=280, perf_event_open=241,
          io_uring_setup=425, userfaultfd=282, mount=40, umount2=39, chroot=51, setxattr=5,
          open_by_handle_at=265, clone=220)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SECRET = ctypes.c_char_p(SECRET_TEXT)
buf = ctypes.create_string_buffer(256)
ARGS = {
    "add_key": (b"user", b"rg-hidden", SECRET, len(SECRET_TEXT), -4),  # @u (user keyring)
    "request_key": (b"user", b"rg-hidden", None, 0),
    "keyctl": (0, -4, 0),                     # KEYCTL_GET_KEYRING_ID @u
    "unshare": (0x10000000,),                 # CLONE_NEWUSER
    "setns": (os.open("/proc/self/ns/uts", os.O_RDONLY), 0),
    "clone3": (None, 0),
    "ptrace": (16, 1, 0, 0),                  # PTRACE_ATTACH to pid 1
    "process_vm_readv": (1, None, 0, None, 0, 0),
    "bpf": (0, buf, 64),                      # BPF_MAP_CREATE
    "perf_event_open": (buf, 0, -1, -1, 0),
    "io_uring_setup": (4, buf),
    "userfaultfd": (0,),
    "mount": (b"none", b"/tmp", b"tmpfs", 0, None),
    "umount2": (b"/tmp", 2),
    "chroot": (b"/tmp",),
    "setxattr": (b"/tmp/rg-x", b"user.rg", b"v", 1, 0),
    "open_by_handle_at": (-100, buf, 0),
}
open("/tmp/rg-x", "w").close()
out = {}
for name, args in ARGS.items():
    ctypes.set_errno(0)
    r = libc.syscall(NR[name], *args)
    out[name] = "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
pid = libc.syscall(NR["clone"], 0x10000000 | signal.SIGCHLD, 0, 0, 0, 0)
if pid == 0:
    os._exit(0)
out["clone(CLONE_NEWUSER)"] = "ok" if pid > 0 else errno.errorcode[ctypes.get_errno()]
if pid > 0:
    os.waitpid(pid, 0)
for cmd in (["unshare", "-U", "-r", "id", "-u"], ["unshare", "-m", "true"],
            ["unshare", "-n", "true"]):
    done = subprocess.run(cmd, capture_output=True, text=True)
    out[" ".join(cmd)] = "ok" if done.returncode == 0 else "refused"
if X86:  # keyctl(GET_KEYRING_ID, @u) through the i386 ABI: the process must be killed
    code = (b"\xb8" + (288).to_bytes(4, "little") + b"\xbb\x00\x00\x00\x00"
            b"\xb9\xfc\xff\xff\xff\xcd\x80\xc3")
    child = ("import ctypes, mmap\nm = mmap.mmap(-1, 4096, prot=7)\nm.write(%r)\n"
             "f = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))"
             "\nprint(f())" % code)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    out["int 0x80 keyctl"] = ("killed" if done.returncode == -signal.SIGSYS else
                              "returned " + done.stdout.strip())
"""

#: What each probe must give: errno names from the policy, or a refusal.
EXPECTED = {
    **{
        n: "EPERM"
        for n in (
            "add_key",
            "request_key",
            "keyctl",
            "unshare",
            "setns",
            "ptrace",
            "process_vm_readv",
            "bpf",
            "perf_event_open",
            "io_uring_setup",
            "userfaultfd",
            "mount",
            "umount2",
            "chroot",
            "open_by_handle_at",
            "clone(CLONE_NEWUSER)",
        )
    },
    "clone3": "ENOSYS",
    "setxattr": "ENOTSUP",
    "unshare -U -r id -u": "refused",
    "unshare -m true": "refused",
    "unshare -n true": "refused",
}
if platform.machine() == "x86_64":
    EXPECTED["int 0x80 keyctl"] = "killed"


def _script(secret: str) -> str:
    return SYSCALLS.replace("SECRET_TEXT", repr(secret.encode()))


def _key_users() -> set[int]:
    return {int(line.split(":")[0]) for line in Path("/proc/key-users").read_text().splitlines()}


def test_an_episode_reaches_no_kernel_state(backend):
    env = gym.make("repogym/retry-zero-v0", sandbox=backend)
    try:
        env.reset(seed=0)
        uid = env.unwrapped._templates.lease.uid
        env.step(
            call(
                "write",
                path="/tmp/probe.py",
                content=_script("hidden") + "print(json.dumps(out))\n",
            )
        )
        obs, *_ = env.step(call("bash", command="python3 /tmp/probe.py"))
    finally:
        close_and_check(env)
    import json

    seen = json.loads(obs.splitlines()[0])
    assert seen == EXPECTED
    if os.geteuid() == 0:
        assert uid not in _key_users()


def test_code_the_grader_imports_cannot_keep_the_hidden_tests(attacker, backend):
    """With the hidden tests present, the agent's code tries to store them in a keyring
    (for a later or concurrent episode to read): every call is refused."""
    payload = (
        "def _rg_keep():\n"
        "    import glob\n"
        "    text = ''.join(open(p).read() for p in glob.glob('tests/*.py'))\n"
        + "\n".join(
            "    " + line
            for line in _script("x")
            .replace("SECRET = ctypes.c_char_p(b'x')", "SECRET = ctypes.c_char_p(text.encode())")
            .replace("len(b'x')", "len(text.encode())")
            .splitlines()
        )
        + "\n    raise RuntimeError('RGPROBE ' + json.dumps(out))\n\n\n_rg_keep()\n"
    )
    res = attacker.grade(backend, attacker.appended(payload))
    assert res.infra_error is None and res.reward <= attacker.noop(backend).reward
    assert probe(res) == EXPECTED
    if os.geteuid() == 0:
        assert attacker.lease.uid not in _key_users()
