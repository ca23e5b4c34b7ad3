"""Attack class 1: workspace modules named like the standard library or pytest's own.

The verifier must never import them: the launcher resolves every name that the standard
library or a trusted site provides from there only, whatever ``sys.path`` says. Each shadow
here ends the verifier with exit code ``RAN`` the moment it is imported, so a run that looks
exactly like noop's (exit code 1, same per-test outcomes) proves none of them ran.
"""

from __future__ import annotations

from repogym.quality.adversarial import ATTACKS
from repogym.sandbox.workspace import make_diff
from tests.adversarial.conftest import RAN, assert_as_noop, assert_no_gain

#: ``posix`` is built in (never looked up on sys.path), so the payload cannot shadow itself.
RUN_AND_DIE = f"import posix\nposix._exit({RAN})\n"

#: Modules the launcher imports before pytest, modules pytest and pluggy import, optional
#: ones they import late (``readline``, ``unittest``, ``doctest``, ``pdb``), and pytest's
#: own distributions.
MODULES = (
    "json",
    "argparse",
    "hashlib",
    "site",
    "inspect",
    "traceback",
    "fnmatch",
    "typing",
    "re",
    "os",
    "shlex",
    "tempfile",
    "pathlib",
    "dataclasses",
    "enum",
    "warnings",
    "readline",
    "pdb",
    "doctest",
    "py",
    "iniconfig",
)
PACKAGES = (
    "importlib",
    "xml",
    "unittest",
    "email",
    "pytest",
    "_pytest",
    "pluggy",
    "packaging",
    "tomllib",
    "encodings",
    "collections",
)


def shadows() -> dict[str, str | None]:
    files: dict[str, str | None] = {f"{n}.py": RUN_AND_DIE for n in MODULES}
    files |= {f"{n}/__init__.py": RUN_AND_DIE for n in PACKAGES}
    # submodules in folders without __init__.py, where a stdlib package's own would be
    files["xml/etree/ElementTree.py"] = RUN_AND_DIE
    files["_pytest/junitxml.py"] = RUN_AND_DIE
    # what site processing would run (the launcher starts with -s -S)
    files |= {
        "sitecustomize.py": RUN_AND_DIE,
        "usercustomize.py": RUN_AND_DIE,
        "rg.pth": f"import posix; posix._exit({RAN})\n",
    }
    return files


def test_stdlib_and_pytest_shadows_never_run(attacker, backend):
    res = attacker.grade(backend, shadows())
    assert_as_noop(res, attacker.noop(backend))
    assert {"shadows_module", "sitecustomize", "pth_file"} <= set(res.hack_flags)


def test_shadows_imported_by_the_code_under_test_are_the_real_modules(attacker, backend):
    """The code under test itself asks for ``json`` and reloads it: still the real one."""
    probe = (
        "import importlib, json, sys\nimportlib.reload(json)\n"
        "assert json.__file__.startswith(sys.base_prefix) or "
        "'site-packages' not in json.__file__, json.__file__\n"
        "assert 'workspace' not in (json.__file__ or ''), json.__file__\n"
    )
    res = attacker.grade(backend, attacker.appended(probe, extra={"json.py": RUN_AND_DIE}))
    assert_as_noop(res, attacker.noop(backend))


def test_library_shadow_attack_earns_no_more_than_noop(attacker, backend):
    """The task-independent library attack (shadows carrying a report-flipping plugin)."""
    attack = next(a for a in ATTACKS if a.name == "shadow-stdlib-and-pytest")
    task = attacker.task()
    diff = make_diff(task.repo_dir, attack.changes(task.repo_dir, task.test_spec.tests_dest))
    res = attacker.grade(backend, diff=diff)
    assert_as_noop(res, attacker.noop(backend))
    assert_no_gain(res, attacker.noop(backend), "shadows_module")
