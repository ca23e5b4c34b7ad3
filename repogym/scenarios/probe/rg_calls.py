"""The calls a test makes into the package, recorded (runs inside the sandbox, stdlib only).

Used by ``rg_probe`` with ``RG_PROBE_CALLS=<config.json>``: while a test runs (setup, call,
teardown), every call from test code (the config's ``tests`` files and ``conftest.py``)
into the package's code (any other file of the working folder) is recorded with its
arguments as they were at the call and its outcome (the value returned, or the exception
raised). Values are rendered as Python source when their ``repr`` reads back as an
expression whose names can be imported; an object an earlier recorded call returned (or
constructed) is rendered as a reference to it (``{"ref": n}``), so a sequence of calls can
be replayed as a script. Nothing here changes what the test does.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import os
import sys

#: Longest rendered value.
MAX_REPR = 300
#: Most calls recorded per test.
MAX_CALLS = 400
_CO_NOT_PLAIN = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async gen
_PRIMITIVES = (int, float, complex, str, bytes, bool, type(None))
_OPERATORS = {
    "__eq__": "==",
    "__ne__": "!=",
    "__lt__": "<",
    "__le__": "<=",
    "__gt__": ">",
    "__ge__": ">=",
    "__add__": "+",
    "__sub__": "-",
    "__mul__": "*",
    "__truediv__": "/",
    "__floordiv__": "//",
    "__mod__": "%",
    "__pow__": "**",
    "__and__": "&",
    "__or__": "|",
    "__xor__": "^",
    "__lshift__": "<<",
    "__rshift__": ">>",
    "__matmul__": "@",
}
_BUILTIN_CALLS = {
    "__len__": "len",
    "__str__": "str",
    "__repr__": "repr",
    "__hash__": "hash",
    "__bool__": "bool",
    "__int__": "int",
    "__float__": "float",
    "__abs__": "abs",
    "__bytes__": "bytes",
    "__iter__": "list",
    "__reversed__": "list(reversed",
}
_SUGAR = {*_OPERATORS, "__contains__", "__getitem__", "__setitem__"}


class Recorder:
    """Records one test's boundary calls (see the module docstring)."""

    def __init__(self, root: str, tests: set[str]) -> None:
        self.root = root
        self.tests = tests
        self.calls: list[dict] = []
        self.objects: dict[int, tuple[int, object]] = {}  # id -> (ref number, the object)
        self._codes: dict[object, bool] = {}

    # -- which code is which ---------------------------------------------------------
    def _rel(self, filename: str) -> str | None:
        return filename[len(self.root) :] if filename.startswith(self.root) else None

    def is_test_code(self, code) -> bool:
        rel = self._rel(code.co_filename)
        return rel is not None and (rel in self.tests or os.path.basename(rel) == "conftest.py")

    def is_package_code(self, code) -> bool:
        if code not in self._codes:
            rel = self._rel(code.co_filename)
            self._codes[code] = (
                rel is not None
                and rel not in self.tests
                and os.path.basename(rel) != "conftest.py"
                and not code.co_name.startswith("<")
                and not code.co_flags & _CO_NOT_PLAIN
            )
        return self._codes[code]

    # -- the trace function ---------------------------------------------------------
    def trace(self, frame, event, arg):
        if len(self.calls) >= MAX_CALLS:
            sys.settrace(None)  # enough: stop paying for a trace call per frame
            return None
        if event != "call":
            return None
        code = frame.f_code
        caller = frame.f_back
        if caller is None or not self.is_package_code(code) or not self.is_test_code(caller.f_code):
            return None
        try:
            record = self._describe(frame)
        except Exception as e:  # a rendering failure is recorded, never raised
            record = {"opaque": f"{type(e).__name__}: {e}"[:200]}
        record["line"] = f"{self._rel(caller.f_code.co_filename)}:{caller.f_lineno}"
        self.calls.append(record)
        state: dict = {"exc": None}

        def local(frame, event, arg):
            if event == "exception":
                state["exc"] = arg[1]
            elif event == "line":
                state["exc"] = None  # caught inside the function: it carried on
            elif event == "return":
                self._finish(record, frame, arg, state["exc"])
            return local

        return local

    # -- describing a call ----------------------------------------------------------
    def _describe(self, frame) -> dict:
        code = frame.f_code
        module = frame.f_globals.get("__name__", "")
        qual = code.co_qualname
        record: dict = {"function": f"{module}.{qual}", "qualname": qual, "imports": []}
        if "<locals>" in qual:
            record["opaque"] = "a nested function"
            return record
        owner_parts, name = qual.split(".")[:-1], qual.split(".")[-1]
        mod = sys.modules.get(module)
        owner = mod
        for part in owner_parts:
            owner = getattr(owner, part, None)
        raw = (
            (owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None))
            if owner is not None
            else None
        )
        values = self._arguments(frame)
        if not owner_parts:
            func = raw
            head = self._import(func, record) if func is not None else None
            if head is None:
                record["opaque"] = f"{qual} is not importable"
                return record
            record["text"] = f"{head}({self._args(frame, values, func, record)})"
            record["kind"] = "call"
            return record
        return self._method(record, frame, owner, raw, name, values)

    def _method(self, record: dict, frame, owner, raw, name: str, values: list) -> dict:
        code = frame.f_code
        if isinstance(raw, staticmethod):
            head = self._import(owner, record)
            record.update(
                kind="call",
                text=f"{head}.{name}({self._args(frame, values, raw.__func__, record)})",
            )
            return record
        if not values:
            record["opaque"] = "a method without self"
            return record
        func = (
            raw.__func__
            if isinstance(raw, classmethod)
            else (raw if inspect.isfunction(raw) else None)
        )
        rest = values[1:]
        if isinstance(raw, classmethod):
            head = self._import(values[0][1], record)
            record.update(
                kind="call", text=f"{head}.{name}({self._args(frame, rest, func, record, skip=1)})"
            )
            return record
        if name == "__init__":  # self is not built yet: the call is the class's
            head = self._import(type(values[0][1]), record)
            record.update(
                kind="init", text=f"{head}({self._args(frame, rest, func, record, skip=1)})"
            )
            return record
        this = self.render(values[0][1], record)
        if isinstance(raw, property):
            if raw.fget is not None and raw.fget.__code__ is code:
                record.update(kind="get", text=f"{this}.{name}")
            elif raw.fset is not None and raw.fset.__code__ is code and rest:
                record.update(kind="set", text=f"{this}.{name} = {self.render(rest[0][1], record)}")
            else:
                record["opaque"] = "a property deleter"
            return record
        plain = [p for p, _ in rest if not p.startswith("*")] == [p for p, _ in rest]
        args = [self.render(v, record) for _, v in rest] if plain and name in _SUGAR else []
        if name in _OPERATORS and len(args) == 1:
            text = f"{this} {_OPERATORS[name]} {args[0]}"
        elif name == "__contains__" and len(args) == 1:
            text = f"{args[0]} in {this}"
        elif name == "__getitem__" and len(args) == 1:
            text = f"{this}[{args[0]}]"
        elif name == "__setitem__" and len(args) == 2:
            record.update(kind="set", text=f"{this}[{args[0]}] = {args[1]}")
            return record
        elif name in _BUILTIN_CALLS and not rest:
            call = _BUILTIN_CALLS[name]
            text = f"{call}({this})" + (")" if "(" in call else "")
        elif name == "__call__":
            text = f"{this}({self._args(frame, rest, func, record, skip=1)})"
        elif name.startswith("__") and name.endswith("__"):
            head = self._import(owner, record)
            text = f"{head}.{name}({this}, {self._args(frame, rest, func, record, skip=1)})"
        else:
            text = f"{this}.{name}({self._args(frame, rest, func, record, skip=1)})"
        record.update(kind="call", text=text.replace(", )", ")"))
        return record

    def _arguments(self, frame) -> list[tuple[str, object]]:
        """(parameter, value) of the call, ``*args`` and ``**kwargs`` as ``*``/``**``."""
        code = frame.f_code
        n = code.co_argcount + code.co_kwonlyargcount
        names = list(code.co_varnames[:n])
        if code.co_flags & 0x04:
            names.append("*" + code.co_varnames[n])
            n += 1
        if code.co_flags & 0x08:
            names.append("**" + code.co_varnames[n])
        f_locals = frame.f_locals
        return [(p, f_locals.get(p.lstrip("*"))) for p in names]

    def _args(self, frame, values: list, func, record: dict, skip: int = 0) -> str:
        """The argument list of a call: positional parameters positionally, those left at
        their default left out (and the ones after such a parameter given by name),
        ``*args`` after them, keyword-only parameters and ``**kwargs`` by name."""
        code = frame.f_code
        positional = code.co_argcount - skip
        defaults = getattr(func, "__defaults__", None) or ()
        kwdefaults = getattr(func, "__kwdefaults__", None) or {}
        pos = list(values[:positional])
        kwonly = values[positional : positional + code.co_kwonlyargcount]
        stars = values[positional + code.co_kwonlyargcount :]
        star = next((v for p, v in stars if p.startswith("*") and not p.startswith("**")), ())
        double = next((v for p, v in stars if p.startswith("**")), {})
        first_default = positional - len(defaults)

        def at_default(i: int, value: object) -> bool:
            j = i - first_default
            return 0 <= j < len(defaults) and value is defaults[j]

        out: list[str] = []
        by_name = False  # after a parameter left at its default, the rest go by name
        for i, (p, v) in enumerate(pos):
            if not star and at_default(i, v):
                by_name = True
            elif by_name:
                out.append(f"{p}={self.render(v, record)}")
            else:
                out.append(self.render(v, record))
        out += [self.render(x, record) for x in star or ()]
        out += [
            f"{p}={self.render(v, record)}"
            for p, v in kwonly
            if not (p in kwdefaults and kwdefaults[p] is v)
        ]
        out += [f"{k}={self.render(x, record)}" for k, x in (double or {}).items()]
        return ", ".join(out)

    # -- values ---------------------------------------------------------------------
    def render(self, value: object, record: dict) -> str:
        """Source text for ``value``: a reference, or its repr (imports added to
        ``record``); an object that cannot be written marks the record opaque."""
        known = self.objects.get(id(value))
        if known is not None and known[1] is value:
            record.setdefault("refs", []).append(known[0])
            return f"_v{known[0]}"
        text, imports = source(value)
        if text is None:
            record["opaque"] = f"an argument of type {type(value).__name__}"
            return "..."
        record["imports"] += imports
        return text

    def register(self, value: object) -> int | None:
        if isinstance(value, _PRIMITIVES):
            return None
        if id(value) not in self.objects:
            self.objects[id(value)] = (len(self.objects), value)
        return self.objects[id(value)][0]

    def _finish(self, record: dict, frame, value: object, exc: BaseException | None) -> None:
        if exc is not None:
            cls = type(exc)
            info = {
                "raised": cls.__qualname__,
                "message": str(exc)[:MAX_REPR],
                "module": cls.__module__,
            }
            head = _public(cls)
            if head is not None:
                info["import"] = head
            record["outcome"] = info
            return
        if record.get("kind") == "init":
            this = frame.f_locals.get(code_self(frame))
            value = this
        text, imports = source(value)
        record["outcome"] = {
            "returned": text,
            "imports": imports,
            "type": type(value).__name__,
            "repr": safe_repr(value)[:MAX_REPR],
        }
        if record.get("kind") in ("call", "init", "get"):
            ref = self.register(value)
            if ref is not None:
                record["outcome"]["ref"] = ref

    def _import(self, obj: object, record: dict) -> str | None:
        found = _public(obj)
        if found is None:
            return None
        record["imports"].append(found)
        return found[1]


def code_self(frame) -> str:
    return frame.f_code.co_varnames[0] if frame.f_code.co_argcount else "self"


def safe_repr(value: object) -> str:
    try:
        return repr(value)
    except Exception as e:
        return f"<repr failed: {type(e).__name__}>"


def _public(obj: object) -> tuple[str, str] | None:
    """(module, name) to import ``obj`` (a function or class) from: the shortest module path
    (the top-level package first) that holds it under its own name."""
    name = getattr(obj, "__name__", None)
    module = getattr(obj, "__module__", None)
    if not isinstance(name, str) or not isinstance(module, str):
        return None
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        mod = sys.modules.get(".".join(parts[:i]))
        if mod is not None and getattr(mod, name, None) is obj:
            path = ".".join(parts[:i])
            return (path, name) if not path.startswith("_") or i == len(parts) else (module, name)
    return None


def _kinds(value: object, depth: int = 0) -> dict[str, object]:
    """Type name -> type of ``value`` and what it holds (three levels deep)."""
    out = {type(value).__name__: type(value)}
    if depth < 3:
        items: list = []
        if isinstance(value, dict):
            items = [*value.keys(), *value.values()]
        elif isinstance(value, list | tuple | set | frozenset):
            items = list(value)
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            items = list(vars(value).values())
        for item in items[:50]:
            out.update(_kinds(item, depth + 1))
    return out


def source(value: object) -> tuple[str | None, list[tuple[str, str]]]:
    """(Python source that evaluates to a value equal to ``value``, the imports it needs),
    or (None, []) when its repr is not such source."""
    if isinstance(value, type) or inspect.isfunction(value):
        found = _public(value)
        if found is not None and found[0] == "builtins":
            return found[1], []
        return (found[1], [found]) if found else (None, [])
    text = safe_repr(value)
    if len(text) > MAX_REPR or " at 0x" in text:
        return None, []
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, []
    kinds = None
    imports: list[tuple[str, str]] = []
    heads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for name in sorted(heads):
        if hasattr(builtins, name):
            continue
        if name in sys.stdlib_module_names:
            imports.append((name, ""))
            continue
        kinds = kinds if kinds is not None else _kinds(value)
        found = _public(kinds[name]) if name in kinds else None
        if found is None or found[1] != name:
            return None, []
        imports.append(found)
    return text, imports
