"""The sandbox side of forks: a workspace started as a copy of another (SandboxSpec.copy_of),
a persistent shell's saved state, and reading a file of the sandbox's /tmp from the host."""

from __future__ import annotations

import pytest

from repogym.sandbox import Limits, SandboxError, SandboxSpec, make_sandbox
from repogym.sandbox.workspace import TemplateCache

#: Every kind of change an episode can make to its files.
CHANGES = (
    "rm README.md; rm -rf tests; mkdir tests && echo new > tests/only.txt; "  # opaque folder
    "echo edited >> retry.py; chmod 700 retry.py; ln -s retry.py link; mkfifo pipe; "
    "echo a > hard1; ln hard1 hard2; mkdir -p deep/er && echo d > deep/er/f; "
    "echo t > /tmp/t; mkfifo /tmp/p"
)
STATE = (
    "ls -A; ls tests; cat tests/*; stat -c '%n %a %F %h' retry.py link pipe hard1 deep/er/f; "
    "readlink link; tail -1 retry.py; ls -A /tmp; cat /tmp/t"
)


@pytest.fixture(scope="module")
def template(retry_task):
    cache = TemplateCache()
    yield cache.get(retry_task.repo_dir)
    cache.close()


def test_a_copy_holds_every_change_and_stays_apart(template):
    with make_sandbox("bwrap", SandboxSpec(template, Limits())) as sb:
        assert sb.run(CHANGES).exit_code == 0
        want = sb.run(STATE)
        with make_sandbox("bwrap", SandboxSpec(template, Limits(), copy_of=sb.workspace)) as copy:
            got = copy.run(STATE)
            assert (got.stdout, got.exit_code) == (want.stdout, want.exit_code)
            assert "only.txt" in got.stdout and "README.md" not in got.stdout
            assert copy.diff() == sb.diff()
            copy.run("echo more >> hard1; rm -rf deep")
            assert sb.run("cat hard2; ls deep").stdout == "a\ner\n"
        assert sb.run(STATE).stdout == want.stdout


def test_a_shells_state_is_saved_without_touching_it(template):
    with make_sandbox("bwrap", SandboxSpec(template, Limits())) as sb:
        sh = sb.shell()
        assert not sh.save_state("/tmp/none")  # no shell started yet: nothing to save
        sh.run("cd tests && export A='x y' && f() { echo f$1; } && set -u")
        assert sh.save_state("/tmp/saved")
        assert sh.run("pwd; echo $A; f 1").stdout == "/workspace/tests\nx y\nf1\n"
        script = sb.take_tmp_file("saved")
        assert sb.run("ls /tmp").stdout == ""  # taken: removed
        fresh = sb.shell()
        fresh.run(script)
        assert fresh.run("pwd; echo $A; f 2; echo ${NOPE-unset}").stdout == (
            "/workspace/tests\nx y\nf2\nunset\n"
        )
        assert fresh.run("echo $NOPE").exit_code != 0  # set -u came along


def test_take_tmp_file_follows_no_link_and_opens_no_fifo(template):
    with make_sandbox("bwrap", SandboxSpec(template, Limits())) as sb:
        sb.run("ln -s /etc/passwd /tmp/link; mkfifo /tmp/fifo; echo ok > /tmp/plain")
        for name in ("link", "fifo"):
            with pytest.raises(SandboxError):
                sb.take_tmp_file(name)
        with pytest.raises(FileNotFoundError):
            sb.take_tmp_file("absent")
        with pytest.raises(ValueError):
            sb.take_tmp_file("../workspace/retry.py")
        assert sb.take_tmp_file("plain") == "ok\n"
