"""Which functions of the working folder run, without tracing (stdlib only; runs inside the
sandbox, loaded by :mod:`rg_probe` when ``RG_PROBE_TRACE=1``).

An import hook compiles each module of the working folder with one more statement at the
top of every function's body (after its docstring) and in every lambda: a call of
``set.add`` (a C function) with the function's number. Line numbers are the source's, since
the statement is added to the module's syntax tree, not to its text, and no bytecode is
written. A tracer (``sys.settrace``, ``sys.setprofile``) puts Python 3.11's interpreter in
its tracing mode for every instruction of every function, the package's and pytest's
alike, and ran suites 3-4 times slower; the added calls cost only where the package's own
functions run.

What it cannot see is told too: a module of the working folder that ran without the hook
(imported before it was installed, or run with ``runpy``/``exec`` from its file) is named
in :data:`unhooked`, and a change in that file is then taken to reach every test.
"""

from __future__ import annotations

import ast
import builtins
import os
import sys
from importlib.machinery import PathFinder, SourceFileLoader

#: The builtin name the added statements call.
HIT = "__rg_reached__"

#: Numbers of the functions run since the last :func:`take`.
hits: set[int] = set()
#: Function number -> ``(file, first line, last line)``: the file relative to the working
#: folder, the first line the first decorator's (as a code object's ``co_firstlineno``).
spans: list[tuple[str, int, int]] = []
#: Files of the working folder the hook compiled.
hooked: set[str] = set()
#: Files of the working folder whose module code ran without the hook.
unhooked: set[str] = set()
#: Numbered files whose module code ran (imported or reloaded) since the last :func:`take`.
executed: set[str] = set()
#: Numbered file -> its number of lines.
lengths: dict[str, int] = {}

_root = ""


class _Marker(ast.NodeTransformer):
    def __init__(self, rel: str) -> None:
        self.rel = rel

    def _number(self, node: ast.AST, first: int) -> ast.Call:
        spans.append((self.rel, first, node.end_lineno or first))
        call = ast.Call(ast.Name(HIT, ast.Load()), [ast.Constant(len(spans) - 1)], [])
        return ast.copy_location(call, node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        self.generic_visit(node)
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        mark = ast.Expr(self._number(node, first))
        body = node.body
        docstring = (
            isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        )
        at = 1 if docstring else 0
        ast.copy_location(mark, body[min(at, len(body) - 1)])
        ast.fix_missing_locations(mark)
        body.insert(at, mark)
        return node

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self.generic_visit(node)
        pair = ast.Tuple([self._number(node, node.lineno), node.body], ast.Load())
        node.body = ast.Subscript(pair, ast.Constant(1), ast.Load())
        ast.copy_location(pair, node)
        ast.copy_location(node.body, node)
        ast.fix_missing_locations(node)
        return node


class _Loader(SourceFileLoader):
    """Compiles a module of the working folder with its functions numbered."""

    def get_code(self, fullname):
        source = self.get_data(self.path)
        try:
            tree = ast.parse(source, self.path)
        except (SyntaxError, ValueError):
            return super().get_code(fullname)  # the error as the module's own import gives it
        rel = self.path[len(_root) :]
        tree = _Marker(rel).visit(tree)
        hooked.add(rel)
        lengths[rel] = source.count(b"\n") + 1
        return compile(tree, self.path, "exec", dont_inherit=True)


class _Finder:
    """Finds what the path finder finds; a source file of the working folder gets the
    numbering loader."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        spec = PathFinder.find_spec(fullname, path, target)
        origin = getattr(spec, "origin", None) or ""
        if (
            spec is None
            or not isinstance(spec.loader, SourceFileLoader)
            or not origin.startswith(_root)
            or not origin.endswith(".py")
        ):
            return None  # the finders after this one decide, as without it
        spec.loader = _Loader(fullname, origin)
        return spec

    @staticmethod
    def invalidate_caches() -> None:
        pass


#: Audit events of the calls that start another process (``os.fork`` also covers
#: ``os.spawn*`` and multiprocessing's fork; ``subprocess.Popen`` every child it starts).
_SPAWN_EVENTS = frozenset(
    {"os.fork", "os.forkpty", "os.system", "os.posix_spawn", "os.exec", "subprocess.Popen"}
)
#: Whether a process was started since the last :func:`take` (a one-item list when it was).
spawned: list[str] = []


def _audit(event: str, args: tuple) -> None:
    if event in _SPAWN_EVENTS:
        if not spawned:
            spawned.append(event)
    elif event == "exec" and args:
        code = args[0]
        name = getattr(code, "co_filename", "")
        if name and not name.startswith(("/", "<")):  # runpy.run_path("calc.py")
            name = os.path.abspath(name)
        if name.startswith(_root) and getattr(code, "co_name", "") == "<module>":
            rel = name[len(_root) :]
            if rel in hooked:
                executed.add(rel)
            else:
                unhooked.add(rel)


def install(root: str) -> None:
    """Number the functions of the modules under ``root`` imported from now on (after
    pytest's own hook, which rewrites the test files' assertions)."""
    global _root
    _root = root
    builtins.__dict__[HIT] = hits.add
    for module in list(sys.modules.values()):  # imported before the hook: not numbered
        name = getattr(module, "__file__", None) or ""
        if name.startswith(root):
            unhooked.add(name[len(root) :])
    at = next(
        (
            i + 1
            for i, f in enumerate(sys.meta_path)
            if type(f).__name__ == "AssertionRewritingHook"
        ),
        0,
    )
    sys.meta_path.insert(at, _Finder)
    sys.addaudithook(_audit)
    # multiprocessing's spawn and forkserver start their children through _posixsubprocess
    # directly, with no audit event of their own
    import _posixsubprocess

    fork_exec = _posixsubprocess.fork_exec

    def counted_fork_exec(*args, **kwargs):
        if not spawned:
            spawned.append("_posixsubprocess.fork_exec")
        return fork_exec(*args, **kwargs)

    _posixsubprocess.fork_exec = counted_fork_exec
    sys.dont_write_bytecode = True


def take(modules: bool = True) -> tuple[list[tuple[str, int, int]], bool]:
    """The spans of the functions run since the last call, and whether a process was
    started (whose calls are not seen); then start again. With ``modules``, a file whose
    module code ran (a test that imports or reloads it) counts whole, as a tracer sees the
    module's own code run: every function in it is defined anew."""
    out = {spans[i] for i in hits}
    if modules:
        out |= {(rel, 0, lengths[rel]) for rel in executed}
    started = bool(spawned)
    hits.clear()
    spawned.clear()
    executed.clear()
    return sorted(out), started


def pending_unhooked() -> list[str]:
    """The files that ran without the hook (see :data:`unhooked`)."""
    return sorted(f for f in unhooked if os.path.isfile(os.path.join(_root, f)))
