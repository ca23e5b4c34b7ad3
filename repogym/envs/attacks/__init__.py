"""Attack payloads, one real Python file each, planted as text.

The counterpart of :mod:`repogym.grading.launcher`: code meant to run inside the grading run's
process, written by an attacker. The attack library (:mod:`repogym.quality.adversarial`) and
the ``forger`` baseline agent plant these; the adversarial tests show what they earn.

Each file of this package except this one is a payload: it defines one function
``_rg_<file name>`` that, run inside the grading run's process (appended to a module the
hidden tests import), attacks the grading. repogym never imports the payloads;
:func:`payload` reads one as text and adds the call, so ruff and reviewers see them as
code, not strings.
"""

from __future__ import annotations

from importlib import resources

#: The strongest task-blind attack here (``forger.py``): the one ``repogym run --agent
#: forger`` plants and ``repogym suite fetch`` checks every task against.
STRONGEST = "forger"


def source(name: str) -> str:
    """The text of payload ``name`` (a file of this package, without ``.py``)."""
    path = resources.files(__package__) / f"{name}.py"
    if name.startswith("_") or not path.is_file():
        raise ValueError(f"no attack payload {name!r}. Fix: one of {', '.join(names())}")
    return path.read_text(encoding="utf-8")


def names() -> list[str]:
    """Every payload's name."""
    return sorted(
        p.name[:-3]
        for p in resources.files(__package__).iterdir()
        if p.name.endswith(".py") and not p.name.startswith("_")
    )


def payload(name: str, *args: object) -> str:
    """Payload ``name``'s text followed by a call of its function with ``args`` (each
    written with ``repr``): what is appended to a module."""
    call = f"_rg_{name}({', '.join(map(repr, args))})"
    return f"\n{source(name)}\n\n{call}\n"


def digest_text() -> str:
    """Every payload's text, in order (part of the adversarial cache key)."""
    return "\0".join(source(n) for n in names())
