"""``repogym new-task NAME [--dir D]``: scaffold a task folder to edit.

The scaffold is a complete, loadable task with a small example bug (``clamp`` ignores its
upper bound), so ``repogym validate`` can be tried at once: it reports the empty
``solution.patch`` until the gold fix is written. Like the other commands that write tasks,
it prints the task's mutation score, which needs that gold fix too (``--no-mutation`` skips
it; the mutation options are those of ``synth``). See docs/authoring.md.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from repogym.cli.options import add_mutation_options, bad_mutation_args
from repogym.cli.printing import run_mutation

_TOML = '''\
# A repogym task (see docs/authoring.md). Everything here is checked by `repogym validate`.
id = "{id}"            # env id: repogym/{id}-v<version>
version = 0            # bump when the task's behaviour changes
split = "train"        # train | test
tags = ["bugfix"]
max_steps = 30         # step budget before truncation

# What the agent is told: describe the symptom as a user would, not the fix.
# (Or use statement_file = "STATEMENT.md" for a long one.)
statement = """
`clamp(value, low, high)` in `{module}.py` returns values above `high`:
`clamp(15, 0, 10)` gives 15, expected 10.
"""

[verifier]
# Hidden tests: the files in tests/ are copied into this workspace folder at grading time
# (merged over what is there). The agent never sees them during the episode.
tests_dest = "tests"
# Run at the repository root; the grader adds -rA and a junit XML report.
command = "python -m pytest -q -p no:cacheprovider"
timeout_s = 60
# Tests that fail on repo/ as given and pass once fixed (pytest node ids from the root).
fail_to_pass = ["tests/test_{module}.py::test_clamps_to_upper_bound"]
# Tests that pass before and must keep passing: they catch fixes that break other things.
pass_to_pass = [
    "tests/test_{module}.py::test_keeps_values_in_range",
    "tests/test_{module}.py::test_clamps_to_lower_bound",
]
'''

_MODULE = '''\
"""{module}: replace this module with the repository your task starts from."""


def clamp(value: float, low: float, high: float) -> float:
    """Return ``value`` limited to the closed range [low, high]."""
    if value < low:
        return low
    return value
'''

_TEST = '''\
"""Hidden tests: they define what "fixed" means. Test behaviour, not the code."""

from {module} import clamp


def test_clamps_to_upper_bound():
    assert clamp(15, 0, 10) == 10


def test_keeps_values_in_range():
    assert clamp(5, 0, 10) == 5


def test_clamps_to_lower_bound():
    assert clamp(-3, 0, 10) == 0
'''

_README = {
    "alternatives": "Other correct fixes, one unified diff per file (*.patch, git apply -p1\n"
    "against repo/). `repogym validate` checks that each earns full reward.\n",
    "decoys": "Wrong or test-gaming fixes (*.patch): a special case for the example in the\n"
    "statement, a fix that breaks other behaviour, edits to tests. `repogym validate`\n"
    "checks that none earns full reward.\n",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("new-task", help="scaffold a task folder (task.toml, repo/, tests/, ...)")
    p.add_argument("name", help="task id: lowercase letters, digits, '.', '_' and '-'")
    p.add_argument("--dir", default=".", help="parent folder (default: current folder)")
    add_mutation_options(p, gate=True)
    p.set_defaults(func=run)


def scaffold(name: str, parent: Path) -> Path:
    """Write a new task folder ``parent/name`` and return it.

    Raises:
        ValueError: ``name`` is not a valid id, or the folder exists.
    """
    if not re.match(r"^[a-z0-9][a-z0-9._-]*$", name):
        raise ValueError(
            f"{name!r} is not a valid task id. Fix: use lowercase letters, "
            "digits, '.', '_' and '-', starting with a letter or digit"
        )
    root = parent / name
    if root.exists():
        raise ValueError(f"{root} already exists. Fix: pick another name or --dir")
    module = re.sub(r"\W", "_", name)
    if module[0].isdigit():
        module = "m_" + module
    for d in ("repo", "tests", "alternatives", "decoys"):
        (root / d).mkdir(parents=True)
    (root / "task.toml").write_text(_TOML.format(id=name, module=module))
    (root / "repo" / f"{module}.py").write_text(_MODULE.format(module=module))
    (root / "tests" / f"test_{module}.py").write_text(_TEST.format(module=module))
    (root / "solution.patch").write_text("")
    for d, text in _README.items():
        (root / d / "README.md").write_text(text)
    return root


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from repogym.quality.validate_mutation import MIN_SCORE
    from repogym.scenarios.task import load_task

    if bad_mutation_args(args):
        return 2
    try:
        root = scaffold(args.name, Path(args.dir))
    except ValueError as e:
        print(e)
        return 2
    if not args.no_mutation:
        run_mutation([load_task(root)], args, Console(), diffs=False)
    print(f"""created {root}
next:
  1. put the starting repository in {root}/repo/ and the hidden tests in {root}/tests/
  2. list the tests in task.toml (fail_to_pass, pass_to_pass) and write the statement
  3. write the gold fix: solution.patch is empty on purpose; make it with
       cp -r {root}/repo /tmp/fix && cd /tmp/fix && git init -q && git add -A && \\
       git commit -qm base && <edit> && git diff > {root.resolve()}/solution.patch
  4. add decoys/*.patch (wrong fixes) and alternatives/*.patch (other correct fixes)
  5. repogym validate --mutation {root}
     (the mutation score must reach {MIN_SCORE:g}: see "Mutation score" in docs/authoring.md)""")
    return 0
