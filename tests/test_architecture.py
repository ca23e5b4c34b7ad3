"""The import graph of the package: no cycles, imports point one way, commands in the CLI.

Every ``import`` counts, at module level or inside a function (a function-level import is
a dependency all the same; it only runs later). The layers, lowest first::

    sandbox <- scenarios <- envs <- {agents, quality, server} <- {integrations, harness} <- cli

``repogym/version.py`` may be imported by any part; the package root (``repogym/__init__``)
only re-exports, and no module imports it for a name. Left out: ``scenarios/probe``
(scripts copied into sandboxes and run there by their own interpreter, never imported by
the package) and ``scenarios/builtin`` (the tasks' own code).
"""

from __future__ import annotations

import ast
from pathlib import Path

import repogym

ROOT = Path(repogym.__file__).resolve().parent
SCRIPTS = (ROOT / "scenarios" / "probe", ROOT / "scenarios" / "builtin")

#: package -> the packages it may import (besides itself and ``version``).
ALLOWED: dict[str, set[str]] = {
    "sandbox": set(),
    "scenarios": {"sandbox"},
    "envs": {"sandbox", "scenarios"},
    "agents": {"sandbox", "scenarios", "envs"},
    "quality": {"sandbox", "scenarios", "envs"},
    "server": {"sandbox", "scenarios", "envs"},
    "integrations": {"sandbox", "scenarios", "envs", "agents"},
    "harness": {"sandbox", "scenarios", "envs", "agents"},
    "cli": {"sandbox", "scenarios", "envs", "agents", "quality", "server", "integrations",
            "harness"},
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
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))
            if not any(s in p.parents for s in SCRIPTS)}


def imports(path: Path, known: set[str]) -> set[str]:
    """The repogym modules ``path`` imports (``from a import b`` counts ``a.b`` when that is
    a module, else ``a``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known
                     else node.module for a in node.names]
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
    graph = {m: {d for d in deps if not (m.startswith(d + ".") and MODULES[d].name ==
                                          "__init__.py")}
             for m, deps in GRAPH.items()}
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_function_level_cycle(tmp_path):
    """The check above can fail: a function-level import back is a cycle."""
    a = tmp_path / "a.py"
    a.write_text("import repogym.b\n")
    b = tmp_path / "b.py"
    b.write_text("def f():\n    import repogym.a\n")
    graph = {"repogym.a": imports(a, {"repogym.a", "repogym.b"}),
             "repogym.b": imports(b, {"repogym.a", "repogym.b"})}
    assert _cycles(graph) == [["repogym.a", "repogym.b"]]


def test_commands_live_in_the_cli():
    stray = [str(p.relative_to(ROOT)) for p in ROOT.rglob("cmd_*.py")
             if p.parent != ROOT / "cli"]
    assert stray == []


def test_commands_do_not_import_each_other():
    """What several commands share lives in ``cli/options.py`` (options), ``cli/reports.py``
    (printing) and ``cli/running.py`` (a benchmark run), never in another command."""
    bad = [f"{mod} imports {dep}" for mod, deps in GRAPH.items()
           if mod.startswith("repogym.cli.cmd_")
           for dep in deps if dep.startswith("repogym.cli.cmd_") and dep != mod]
    assert not bad, "\n".join(bad)


def test_no_private_name_of_another_package():
    """``from repogym.x import _name`` only inside package ``x``."""
    bad = []
    for mod, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(
                    "repogym") and package_of(node.module) != package_of(mod):
                bad += [f"{mod}: {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, "\n".join(bad)
