"""Attack class 2: pytest plugins and the verifier's environment.

Plugin auto-loading is off and the verifier's environment is built from scratch, so neither
an entry point in the workspace nor a variable the agent exported reaches pytest. The
grader's folder can be found (it is mounted at a fixed place while the verifier runs) but
holds nothing the workspace does not: the hidden tests with their canaries, the launcher and
its configuration, never which tests are canaries.
"""

from __future__ import annotations

import gymnasium as gym

from repogym.grading.grading_run import launcher_env
from tests.adversarial.conftest import RAN, assert_as_noop, close_and_check, probe
from tests.conftest import call

PLUGIN = f"import posix\nposix._exit({RAN})\n"
ENTRY_POINT = "[pytest11]\nrg = rg_plugin\n"


def test_entry_point_plugins_in_the_workspace_are_not_loaded(attacker, backend):
    changes = {"rg_plugin.py": PLUGIN}
    for folder in (
        "rg_plugin-1.0.dist-info",
        "rg_plugin.egg-info",
        "tests_support/rg_other-2.0.dist-info",
    ):
        changes[f"{folder}/METADATA"] = "Metadata-Version: 2.1\nName: rg-plugin\nVersion: 1.0\n"
        changes[f"{folder}/entry_points.txt"] = ENTRY_POINT
        changes[f"{folder}/top_level.txt"] = "rg_plugin\n"
    res = attacker.grade(backend, changes)
    assert_as_noop(res, attacker.noop(backend))
    assert "dist_info" in res.hack_flags


def test_variables_and_shell_files_from_the_episode_do_not_reach_the_verifier(attacker, backend):
    env = gym.make("repogym/retry-zero-v0", sandbox=backend)
    try:
        env.reset(seed=0)
        env.step(call("write", path="rg_plugin.py", content=PLUGIN))
        env.step(call("write", path="rc.sh", content="export PYTEST_ADDOPTS='-p rg_plugin'\n"))
        for name in (".bashrc", ".profile", ".bash_profile"):
            env.step(call("write", path=name, content=". /workspace/rc.sh\n"))
        env.step(
            call(
                "bash",
                command=(
                    "export PYTEST_ADDOPTS='-p rg_plugin' PYTEST_PLUGINS=rg_plugin PYTHONPATH=. "
                    "PYTHONSTARTUP=rg_plugin.py PYTHONINSPECT=1 BASH_ENV=/workspace/rc.sh "
                    "ENV=/workspace/rc.sh PYTHONUSERBASE=/workspace"
                ),
            )
        )
        *_, info = env.step(call("submit"))
    finally:
        close_and_check(env)
    noop = attacker.noop(backend)
    assert info["infra_error"] == "" and info["verifier_exit_code"] == 1
    assert info["tests"] == noop.tests and info["reward"] == 0.0


PROBE_ENV = r"""
def _rg_probe():
    import json, os
    roots = [r for r in ("/run/repogym/grader", "/run/repogym/ro/grader") if os.path.isdir(r)]
    files, differ = [], []
    for root in roots:
        for d, _, names in os.walk(root):
            for n in names:
                rel = os.path.relpath(os.path.join(d, n), root)
                files.append(rel)
                if rel.startswith("tests/"):
                    with open(os.path.join(d, n), "rb") as a, open(rel[6:], "rb") as b:
                        if a.read() != b.read():
                            differ.append(rel)
    raise RuntimeError("RGPROBE " + json.dumps({"env": dict(os.environ), "roots": roots,
                                                "files": files, "differ": differ}))


_rg_probe()
"""


def test_verifier_environment_and_grader_folder_hold_nothing_secret(attacker, backend):
    res = attacker.grade(backend, attacker.appended(PROBE_ENV))
    assert res.reward == 0.0 and res.infra_error is None  # the probe failed collection
    seen = probe(res)
    allowed = set(launcher_env("x", "y")) | {"PYTEST_VERSION"}
    assert set(seen["env"]) <= allowed, set(seen["env"]) - allowed
    assert not any("repogym" in v or "grader" in v for v in seen["env"].values()), seen["env"]
    assert len(seen["roots"]) == 1, seen
    others = {f for f in seen["files"] if not f.startswith("tests/")}
    assert others == {
        "verifier/launch.py",
        "verifier/canon.py",
        "verifier/pytest.ini",
        "verifier/conftests.json",
    }
    assert "tests/tests/test_retry.py" in seen["files"]
    assert seen["differ"] == []  # the grader's tests are the workspace's, nothing more
