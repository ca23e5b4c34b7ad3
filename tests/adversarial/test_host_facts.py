"""Attack class 9: host facts in ``/proc/self/mountinfo``, from an episode and from graded code.

A mount table names the host paths its mounts come from. Leases give them neutral names (no
pid, no home, no cache folder, no checkout): what still shows is listed in docs/sandboxes.md
and allowed here, and nothing else may appear.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import gymnasium as gym

from repogym.sandbox.runtime import cache_dir
from tests.adversarial.conftest import close_and_check, probe
from tests.conftest import call

MOUNTS = r"""
def _rg_mounts():
    import json
    raise RuntimeError("RGPROBE " + json.dumps({"lines": open("/proc/self/mountinfo").read()
                                                .splitlines()}))


_rg_mounts()
"""

#: Host paths a sandbox's mount table may name; docs/sandboxes.md lists them. repogym's own
#: are the lease's folder (``u<n>``: passwd, templates, workspaces, the grader's folder, the
#: docker backend's transfers) and the shared runtime (``rt/<key>``: pytest's site, /etc).
LEASE = re.compile(
    r"^(/dev/shm)?/repogym(-\d+)?/(u\d+/(passwd|g\w+|t/\d+|w/[0-9a-f]+\.ro"
    r"|w/[0-9a-f]+/(upper|work))|rt/[0-9a-f]+/(site-packages|etc/[\w.]+))$"
)
EXACT = {
    "/",
    "/newroot",
    "/usr",
    "/tmp",
    "/xfer",
    "/bus",
    "/fs",
    "/irq",
    "/sys",
    "/null",
    "/zero",
    "/full",
    "/random",
    "/urandom",
    "/tty",
    "/usr/bin/tini-static",
}
PREFIXES = (
    "/etc/",
    "/usr/share/zoneinfo/",
    "/docker/",
    "/var/lib/repogym-docker/",
    "/var/lib/docker/",
)
#: repogym's cache: the sandbox's root file system and the interpreter's copy.
CACHED = re.compile(
    "^"
    + re.escape(str(cache_dir()))
    + r"/(rootfs/bookworm-[0-9a-f]+/(usr|etc/[\w.]+)|python/[0-9a-f]+)$"
)


def _host_paths(lines: list[str]) -> set[str]:
    """Every host path a mount table names: each mount's root, and overlay layer options."""
    paths = set()
    for line in lines:
        left, right = line.split(" - ")
        paths.add(left.split()[3])
        for opt in right.split()[2].split(","):
            key, _, value = opt.partition("=")
            if key in ("lowerdir", "upperdir", "workdir"):
                paths.update(value.split(":"))
    return paths


def _check(lines: list[str]) -> None:
    text = "\n".join(lines)
    home = str(Path.home())
    checkout = str(Path(__file__).resolve().parents[2])
    assert "repogym-ws-" not in text and f"{home}/.cache" not in text
    assert checkout not in text and "site-packages/repogym" not in text
    prefix = str(Path(sys.base_prefix).resolve())
    for path in _host_paths(lines):
        parts = set(path.split("/"))
        assert str(os.getpid()) not in parts and str(os.getppid()) not in parts, path
        # the host interpreter's prefix (a pyenv folder under a home) never shows: the
        # sandbox binds a copy of the interpreter from repogym's cache
        assert path != prefix and not path.startswith(prefix + "/"), path
        if LEASE.match(path) or CACHED.match(path):
            continue
        assert path in EXACT or path.startswith(PREFIXES), path


def test_an_episodes_mount_table_names_only_neutral_or_listed_host_paths(backend):
    env = gym.make("repogym/retry-zero-v0", sandbox=backend)
    try:
        env.reset(seed=0)
        obs, *_ = env.step(call("bash", command="cat /proc/self/mountinfo"))
    finally:
        close_and_check(env)
    lines = [x for x in obs.splitlines() if " - " in x]
    assert len(lines) > 5, obs
    _check(lines)


def test_the_verifiers_mount_table_names_only_neutral_or_listed_host_paths(attacker, backend):
    res = attacker.grade(backend, attacker.appended(MOUNTS))
    lines = probe(res)["lines"]
    assert any("grader" in x or "/run/repogym/ro" in x for x in lines), lines
    _check(lines)
