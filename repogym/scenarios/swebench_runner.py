"""SWE-bench instances whose tests are not pytest's: the repository's own runner, swebench's parser.

Most of SWE-bench Verified is django (``./tests/runtests.py``, ids such as
``test_add (calc_tests.tests.CalcTests)``) and sympy (``bin/test``, ids such as
``test_add``). repogym grades with pytest, so such an instance is imported with one
generated pytest file among its hidden tests, ``test_repogym_swebench.py``:

- once per grading it runs the instance's **own test command** at the repository root
  (from the row's ``eval_script``, the lines between swebench's ``>>>>> Start Test
  Output`` and ``>>>>> End Test Output`` markers; for a django or sympy row without one,
  the command swebench 4 ran for that repository, with the test files of ``test_patch``
  as its arguments);
- it reads the command's output with **swebench's own log parser** (the row's
  ``log_parser``, else swebench's ``MAP_REPO_TO_PARSER_PY[repo]``), whose module is copied
  from the installed swebench (MIT licence, copied beside it) into the hidden tests,
  ``_repogym_swebench/``: the sandbox has no swebench of its own;
- each listed test of the instance is one pytest test, passing exactly when swebench would
  count it: a FAIL_TO_PASS test PASSED or XFAIL, a PASS_TO_PASS test also SKIPPED; a run
  that exited non-zero with no failure in its log is not trusted (every test fails), as in
  swebench 5's ``get_logs_eval``.

The task's ``[swebench]`` table keeps ``log_parser``, ``test_command`` and ``tests`` (each
generated node id -> the instance's own test id), which ``repogym grade``'s swebench
report uses to name tests as the instance does. What this does not defend: the runner's
log is printed by code the agent changed, so a fix that prints ``test_x ... ok`` can
forge a line, exactly as in SWE-bench itself; the canaries guard the pytest layer only.
"""

from __future__ import annotations

import json
import posixpath
import re
import shutil
from pathlib import Path

RUNNER_FILE = "test_repogym_swebench.py"
VENDOR_DIR = "_repogym_swebench"
#: swebench's marker lines around the test command in an eval script.
_START, _END = ">>>>> Start Test Output", ">>>>> End Test Output"
#: What swebench 4 ran for these repositories (MAP_REPO_VERSION_TO_SPECS' test_cmd, the
#: same for every version in SWE-bench Verified), for rows that carry no eval_script.
_KNOWN_COMMANDS = {
    "django/django": "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
    "sympy/sympy": "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C "
    "--verbose",
}
_PYTHON_PARSERS = "swebench.harness.log_parsers.python"


class RunnerError(ValueError):
    """The instance's runner or parser cannot be set up (the message says the fix)."""


def parser_name(row: dict, repo: str) -> str:
    """The swebench parser of ``row``: its ``log_parser``, else swebench's map for ``repo``.

    Raises:
        RunnerError: swebench is not installed, the parser is unknown, or it is not one of
            swebench's Python parsers (the only ones a Python sandbox can run).
    """
    try:
        from swebench.harness.log_parsers import PARSER_REGISTRY
        from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY
    except ImportError as e:
        raise RunnerError(
            "non-pytest instances are graded with swebench's log parsers. Fix: "
            "pip install 'repogym[swebench]'"
        ) from e
    name = row.get("log_parser")
    if not name:
        fn = MAP_REPO_TO_PARSER_PY.get(repo)
        if fn is None:
            raise RunnerError(
                f"swebench has no log parser for {repo!r} and the row names "
                "none. Fix: add log_parser (a swebench parser name, e.g. "
                "parse_log_django) to the row"
            )
        name = fn.__name__
    fn = PARSER_REGISTRY.get(name)
    if fn is None:
        raise RunnerError(
            f"log_parser {name!r} is not one of swebench's parsers. Fix: use one "
            f"of {sorted(PARSER_REGISTRY)}"
        )
    if fn.__module__ != _PYTHON_PARSERS:
        raise RunnerError(
            f"log_parser {name!r} parses a non-Python runner's output; repogym's "
            "sandboxes run Python tasks. Fix: import Python instances only"
        )
    return fn.__name__


def _django_label(path: str) -> str:
    return path.removeprefix("tests/").removesuffix(".py").replace("/", ".")


def test_command(row: dict, repo: str, test_files: list[str]) -> str:
    """The instance's test command (see the module docstring for where it comes from).

    Raises:
        RunnerError: no eval_script markers and a repository swebench 4 had no command for.
    """
    script = row.get("eval_script") or ""
    if script:
        lines = script.splitlines()
        starts = [i for i, line in enumerate(lines) if _START in line]
        ends = [i for i, line in enumerate(lines) if _END in line]
        if not starts or not ends or ends[-1] <= starts[0]:
            raise RunnerError(
                f"eval_script has no '{_START}' ... '{_END}' markers. Fix: give "
                "the script in swebench's form (eval.sh of a task repo)"
            )
        body = [line for line in lines[starts[0] + 1 : ends[-1]] if line.strip()]
        if not body:
            raise RunnerError(
                "eval_script runs nothing between its test output markers. Fix: "
                "put the test command between them"
            )
        return "\n".join(body)
    base = _KNOWN_COMMANDS.get(repo)
    if base is None:
        raise RunnerError(
            f"the row has no eval_script and swebench had no test command for "
            f"{repo!r}. Fix: add eval_script (swebench 5's eval.sh)"
        )
    if not test_files:
        raise RunnerError("test_patch touches no test file to run. Fix: check test_patch")
    args = [_django_label(p) if repo == "django/django" else p for p in test_files]
    return f"{base} {' '.join(args)}"


def node_ids(dest: str, f2p: list[str], p2p: list[str]) -> dict[str, str]:
    """Generated node id -> the instance's test id, FAIL_TO_PASS first."""
    path = RUNNER_FILE if dest == "." else posixpath.join(dest, RUNNER_FILE)
    return {
        **{f"{path}::test_fail_to_pass_{i}": t for i, t in enumerate(f2p)},
        **{f"{path}::test_pass_to_pass_{i}": t for i, t in enumerate(p2p)},
    }


_TEMPLATE = '''\
"""Generated by `repogym import-swebench` for {iid}.

Runs the instance's own test command once, reads its output with swebench's {parser}
(swebench's code, in {vendor}/ with its licence) and grades each listed test as swebench
does. See repogym.scenarios.swebench_runner.
"""

import functools
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "{vendor}"))
from swebench.harness.log_parsers.python import {parser} as _parse  # noqa: E402

del sys.path[0]

COMMAND = {command}
TIMEOUT_S = {timeout}
ROOT = os.getcwd()


@functools.cache
def _statuses():
    """swebench's status map of one run of COMMAND ({{}} when it cannot be trusted)."""
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(sys.executable, os.path.join(tmp, "python"))
        env = dict(os.environ, PATH=tmp + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"))
        try:
            run = subprocess.run(["bash", "-c", COMMAND], cwd=ROOT, env=env, text=True,
                                 errors="replace", capture_output=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"repogym: the test command timed out after {{TIMEOUT_S}} s")
            return {{}}
    log = run.stdout + run.stderr
    print(log[-20000:])
    status = _parse(log, None)
    if run.returncode != 0 and not any(s in ("FAILED", "ERROR") for s in status.values()):
        print(f"repogym: exit code {{run.returncode}} with no failure in the log: not trusted")
        return {{}}
    return status


def _outcome(case, maintained):
    status = _statuses()
    key = case if case in status else None
    if key is None and case.count("[") > case.count("]"):  # swebench's truncated ids
        found = [k for k in status if k.startswith(case)]
        key = found[0] if found else None
    good = {{"PASSED", "XFAIL"}} | ({{"SKIPPED"}} if maintained else set())
    return "passed" if key is not None and status[key] in good else "failed"
'''


def runner_source(
    iid: str, parser: str, command: str, tests: dict[str, str], p2p: set[str], timeout_s: float
) -> str:
    """The generated pytest file (one test per listed test; ``p2p``: PASS_TO_PASS node ids)."""
    text = _TEMPLATE.format(
        iid=iid,
        parser=parser,
        vendor=VENDOR_DIR,
        command=json.dumps(command),
        timeout=float(timeout_s),
    )
    for node, case in tests.items():
        name = node.rsplit("::", 1)[1]
        text += (
            f"\n\ndef {name}():\n    assert _outcome({json.dumps(case)}, "
            f'maintained={node in p2p}) == "passed"\n'
        )
    return text


def vendor_parsers(dest: Path) -> None:
    """Copy swebench's Python log parsers (and what they import, and its licence) to ``dest``."""
    import swebench

    src = Path(swebench.__file__).parent
    files = ("types.py", "harness/constants/__init__.py", "harness/log_parsers/python.py")
    for rel in files:
        (dest / "swebench" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, dest / "swebench" / rel)
    for pkg in ("", "harness", "harness/log_parsers"):
        (dest / "swebench" / pkg / "__init__.py").touch()
    licences = sorted(src.parent.glob(f"swebench-{swebench.__version__}.dist-info/**/LICENSE*"))
    if licences:
        shutil.copyfile(licences[0], dest / "swebench" / "LICENSE")
    (dest / "README").write_text(
        "swebench's log parsers, copied from the installed swebench "
        f"{swebench.__version__} (MIT licence: swebench/LICENSE) by repogym import-swebench.\n"
    )


def is_pytest_ids(ids: list[str]) -> bool:
    """True if every id is a pytest node id (``path::name``)."""
    return all("::" in t and re.match(r"^[^\s:]+\.py::", t) for t in ids)
