"""The import graph of the package: no cycles, imports point one way, commands in the CLI;
every sandbox backend implements the one sandbox contract; no library module installs a
signal handler (only the entry points do).

Every ``import`` counts, at module level or inside a function (a function-level import is
a dependency all the same; it only runs later). The layers, lowest first::

    sandbox <- scenarios <- grading <- envs <- {agents, quality, server}
        <- {integrations, harness} <- cli

``repogym/version.py`` may be imported by any part; the package root (``repogym/__init__``)
only re-exports, and no module imports it for a name. Left out: ``scenarios/probe``
(scripts copied into sandboxes and run there by their own interpreter, never imported by
the package) and ``scenarios/builtin`` (the tasks' own code).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import repogym
from repogym.sandbox import BACKENDS
from repogym.sandbox.base import Sandbox
from repogym.sandbox.limits import default_signals

ROOT = Path(repogym.__file__).resolve().parent
SCRIPTS = (ROOT / "scenarios" / "probe", ROOT / "scenarios" / "builtin")

#: package -> the packages it may import (besides itself and ``version``).
ALLOWED: dict[str, set[str]] = {
    "sandbox": set(),
    "scenarios": {"sandbox"},
    "grading": {"sandbox", "scenarios"},
    "envs": {"sandbox", "scenarios", "grading"},
    "agents": {"sandbox", "scenarios", "grading", "envs"},
    "quality": {"sandbox", "scenarios", "grading", "envs"},
    "server": {"sandbox", "scenarios", "grading", "envs"},
    "integrations": {"sandbox", "scenarios", "grading", "envs", "agents"},
    "harness": {"sandbox", "scenarios", "grading", "envs", "agents"},
    "cli": {
        "sandbox",
        "scenarios",
        "grading",
        "envs",
        "agents",
        "quality",
        "server",
        "integrations",
        "harness",
    },
    "version": set(),
    "<root>": {"envs", "scenarios"},
}


def module_name(path: Path) -> str:
    parts = ("repogym", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<root>"


def modules() -> dict[str, Path]:
    return {
        module_name(p): p
        for p in sorted(ROOT.rglob("*.py"))
        if not any(s in p.parents for s in SCRIPTS)
    }


def imports(path: Path, known: set[str]) -> set[str]:
    """The repogym modules ``path`` imports (``from a import b`` counts ``a.b`` when that is
    a module, else ``a``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                for a in node.names
            ]
        else:
            continue
        out |= {n for n in names if n == "repogym" or n.startswith("repogym.")}
    return out


MODULES = modules()
GRAPH = {m: imports(p, set(MODULES)) for m, p in MODULES.items()}


def test_imports_point_one_way():
    wrong = []
    for mod, deps in GRAPH.items():
        src = package_of(mod)
        for dep in deps:
            dst = package_of(dep)
            if dst not in (src, "version") and dst not in ALLOWED[src]:
                wrong.append(f"{mod} imports {dep} ({src} -> {dst})")
            if dep == "repogym" and mod != "repogym":
                wrong.append(f"{mod} imports the package root (name the module instead)")
    assert not wrong, "\n".join(sorted(wrong))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    # a package's __init__ that re-exports its modules is not a cycle with them
    graph = {
        m: {d for d in deps if not (m.startswith(d + ".") and MODULES[d].name == "__init__.py")}
        for m, deps in GRAPH.items()
    }
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_function_level_cycle(tmp_path):
    """The check above can fail: a function-level import back is a cycle."""
    a = tmp_path / "a.py"
    a.write_text("import repogym.b\n")
    b = tmp_path / "b.py"
    b.write_text("def f():\n    import repogym.a\n")
    graph = {
        "repogym.a": imports(a, {"repogym.a", "repogym.b"}),
        "repogym.b": imports(b, {"repogym.a", "repogym.b"}),
    }
    assert _cycles(graph) == [["repogym.a", "repogym.b"]]


def test_commands_live_in_the_cli():
    stray = [str(p.relative_to(ROOT)) for p in ROOT.rglob("cmd_*.py") if p.parent != ROOT / "cli"]
    assert stray == []


def test_commands_do_not_import_each_other():
    """What several commands share lives in ``cli/options.py`` (options), ``cli/reports.py``
    (printing) and ``cli/running.py`` (a benchmark run), never in another command."""
    bad = [
        f"{mod} imports {dep}"
        for mod, deps in GRAPH.items()
        if mod.startswith("repogym.cli.cmd_")
        for dep in deps
        if dep.startswith("repogym.cli.cmd_") and dep != mod
    ]
    assert not bad, "\n".join(bad)


def test_no_private_name_of_another_package():
    """``from repogym.x import _name`` only inside package ``x``."""
    bad = []
    for mod, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("repogym")
                and package_of(node.module) != package_of(mod)
            ):
                bad += [
                    f"{mod}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not bad, "\n".join(bad)


# -- the sandbox contract ---------------------------------------------------------------------
def backend_class(name: str) -> type:
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def _params(fn: object) -> list[tuple[str, object, object, object]]:
    return [
        (p.name, p.kind, p.default, p.annotation) for p in inspect.signature(fn).parameters.values()
    ]


def contract_mismatches(cls: type) -> list[str]:
    """How ``cls`` departs from :class:`Sandbox`: not a subclass, abstract, no ``backend``
    name, or a method of the contract (public, hook or dunder; abstract or not) whose
    parameters (names, kinds, defaults, annotations) differ from the contract's. Return
    annotations may narrow (``_start_shell`` returns the backend's own shell class)."""
    if not (isinstance(cls, type) and issubclass(cls, Sandbox)):
        return [f"{cls!r} does not subclass repogym.sandbox.base.Sandbox"]
    bad = [f"{cls.__name__} leaves {m} abstract" for m in sorted(cls.__abstractmethods__)]
    if not isinstance(getattr(cls, "backend", None), str):
        bad.append(f"{cls.__name__} sets no backend name")
    for name, member in vars(Sandbox).items():
        if not inspect.isfunction(member) or name in ("__init_subclass__",):
            continue
        mine = getattr(cls, name, None)
        if not callable(mine):
            bad.append(f"{cls.__name__}.{name} is not a method")
        elif _params(mine) != _params(member):
            bad.append(
                f"{cls.__name__}.{name}{inspect.signature(mine)} differs from the "
                f"contract's {name}{inspect.signature(member)}"
            )
    return bad


def test_every_backend_implements_the_sandbox_contract():
    assert set(BACKENDS) >= {"bwrap", "docker", "process"}
    bad = {name: contract_mismatches(backend_class(name)) for name in BACKENDS}
    assert all(not b for b in bad.values()), bad
    assert {name: backend_class(name).backend for name in BACKENDS} == {n: n for n in BACKENDS}


def test_the_contract_check_can_fail():
    """A backend whose ``run_with_binds`` lacks ``output_bytes`` (what the old base class
    declared), or that leaves ``run`` abstract, is reported."""
    process = backend_class("process")

    class NoOutputCap(process):
        def run_with_binds(self, command, *, ro=None, rw=None, timeout_s=None, stdin=None):
            raise AssertionError

    class NoRun(Sandbox):
        backend = "norun"

        def run_with_binds(
            self,
            command: str,
            *,
            ro: dict[str, Path] | None = None,
            rw: dict[str, Path] | None = None,
            timeout_s: float | None = None,
            stdin: bytes | None = None,
            output_bytes: int | None = None,
        ):
            raise AssertionError

        def _start_shell(self):
            raise AssertionError

    assert [m.split("(")[0] for m in contract_mismatches(NoOutputCap)] == [
        "NoOutputCap.run_with_binds"
    ]
    assert contract_mismatches(NoRun) == ["NoRun leaves run abstract"]
    assert contract_mismatches(object) != []


def test_a_live_sandbox_has_every_declared_attribute(tmp_path):
    from repogym.sandbox import SandboxSpec, make_sandbox
    from repogym.sandbox.workspace import TemplateCache
    from repogym.scenarios.registry import registered_tasks

    cache = TemplateCache()
    try:
        template = cache.get(registered_tasks()["retry-zero"].repo_dir)
        with pytest.warns(RuntimeWarning, match="NO isolation"):
            sb = make_sandbox("process", SandboxSpec(template))
        with sb:
            missing = [a for a in inspect.get_annotations(Sandbox) if not hasattr(sb, a)]
            assert missing == []
            assert sb.shell().run("echo hi").stdout == "hi\n"
            with sb.frozen():
                pass
    finally:
        cache.close()


# -- signal handlers ----------------------------------------------------------------------------
_IMPORT_ALL = r"""
import importlib, json, shutil, signal, sys, warnings
SIGS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
def handlers():
    return {signal.Signals(s).name: repr(signal.getsignal(s)) for s in SIGS}
before = handlers()
changed, failed = [], []
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ImportError as e:  # an optional dependency that is not installed
        failed.append(f"{name}: {e}")
    if handlers() != before:
        changed.append(name)
from repogym.sandbox import SandboxSpec, make_sandbox
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios.registry import registered_tasks
warnings.simplefilter("ignore", RuntimeWarning)  # the process backend's warning
cache = TemplateCache()
template = cache.get(registered_tasks()["retry-zero"].repo_dir)
made = []
for backend in ["process"] + (["bwrap"] if shutil.which("bwrap") else []):
    sb = make_sandbox(backend, SandboxSpec(template))
    out = sb.shell().run("echo ok").stdout + sb.run("echo ok").stdout
    sb.close()
    made.append(backend if out == "ok\nok\n" else f"{backend} failed: {out!r}")
cache.close()
print(json.dumps({"changed": changed, "failed": failed, "made": made,
                  "before": before, "after": handlers()}))
"""

_CLI = """
import json, signal, sys
def mine(signum, frame):
    pass
if sys.argv[1] == "own":
    signal.signal(signal.SIGHUP, mine)
from repogym.cli import main
main([])  # prints the help: no command, but the entry point ran
def who(h):
    return "python" if h is signal.default_int_handler else getattr(h, "__module__", repr(h))
print(json.dumps({s.name: who(signal.getsignal(s))
                  for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}))
"""


def _python(code: str, *args: str) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        preexec_fn=default_signals,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_no_library_module_installs_a_signal_handler():
    """Importing every module, then making, using and closing real sandboxes (which
    registers their clean-up), leaves SIGTERM, SIGHUP and SIGINT as the program had them."""
    names = sorted(m for m in MODULES if not m.endswith(".__main__"))  # __main__: an entry point
    got = _python(_IMPORT_ALL, json.dumps(names))
    assert got["changed"] == [], got
    assert not [f for f in got["failed"] if f.startswith(("repogym.sandbox", "repogym.envs"))]
    assert got["made"] == ["process"] + (["bwrap"] if shutil.which("bwrap") else []), got
    assert got["after"] == got["before"], got


def test_the_cli_entry_point_installs_the_clean_up_handlers():
    """``repogym`` (``repogym.cli:main``) sets SIGTERM and SIGHUP to the clean-up handlers,
    leaves SIGINT to Python, and keeps a handler the program installed before."""
    cleanup = "repogym.sandbox.cleanup"
    assert _python(_CLI, "default") == {"SIGTERM": cleanup, "SIGHUP": cleanup, "SIGINT": "python"}
    assert _python(_CLI, "own") == {"SIGTERM": cleanup, "SIGHUP": "__main__", "SIGINT": "python"}
