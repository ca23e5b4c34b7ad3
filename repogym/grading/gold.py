"""Expectations recorded at gold: sealing assertions whose expected value is not a literal.

Real packages' tests compare with values the grader cannot compute by itself: a local
built by the test (``eq_(find_by_attr(f, "d"), d)``), another call's result, an object.
Such an assertion is sealed anyway (:func:`repogym.grading.seal.seal_file` with ``gold``): its
expected side leaves the planted file, the check reports the value of the other side, and
the expectation is **what that side was when the gold patch was graded**. The grader grades
the gold patch twice (different canaries and check numbers) and keeps, per check and test
case, the fingerprints (:func:`repogym.grading.seal.fingerprint`) both runs agreed on; a check
whose values differ between the runs (time, hash seed, addresses in a repr) is dropped and
its test is judged by its other checks and pytest. Records live in repogym's cache, keyed
by the task's files and the grading code, outside every sandbox.

A gold value is as secret as a literal one: the forger must report, for each such check,
what the fixed code computes there. It is weak where it carries a bit (a boolean, None, an
object's default repr): :func:`repogym.grading.seal.informative`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from pathlib import Path

from repogym.grading import seal as sl
from repogym.grading.canaries import Masked
from repogym.grading.grading_run import Channel
from repogym.sandbox.runtime import cache_dir

#: Check key -> the task's test case id -> the sorted fingerprints gold reported.
GoldValues = dict[str, dict[str, list[str]]]
#: Bump when what a record holds changes.
_FORMAT = 1


def from_run(channel: Channel, masked: Masked) -> GoldValues:
    """The gold values one trusted grading run reported, by check key and task case id
    (gold checks' values, and the messages of ``raises`` checks with a pattern)."""
    by_cid = {s.cid: s for s in masked.seals if s.records_gold}
    out: GoldValues = {}
    for (case, cid), got in channel.seals.items():
        s = by_cid.get(cid)
        if s is None:
            continue
        record = sl.size_print if s.op == "contains" else sl.fingerprint
        prints = {record(g) for g in got if not (isinstance(g, dict) and "calls" in g)}
        if prints and None not in prints:
            out.setdefault(s.key, {})[masked.original(case)] = sorted(prints)
    return out


def agreed(runs: list[GoldValues]) -> GoldValues:
    """The values every run reported alike (a check or case one run lacks is dropped)."""
    first, *rest = runs
    out: GoldValues = {}
    for key, cases in first.items():
        for case, prints in cases.items():
            if all(r.get(key, {}).get(case) == prints for r in rest):
                out.setdefault(key, {})[case] = prints
    return out


def resolve(masked: Masked, gold: GoldValues) -> None:
    """Give ``masked``'s gold checks their expectations, per installed test case."""
    seals = []
    for s in masked.seals:
        if s.records_gold:
            cases = {
                masked.installed(case): frozenset(prints)
                for case, prints in gold.get(s.key, {}).items()
            }
            telling = sl.sized if s.op == "contains" else sl.informative
            s = dataclasses.replace(
                s, cases=cases, gold_strong=bool(cases) and all(map(telling, cases.values()))
            )
        seals.append(s)
    masked.seals = seals


def _path(task_digest: str, code_digest: str, kind: str = "gold") -> Path:
    name = hashlib.sha256(f"{kind} {_FORMAT}\0{task_digest}\0{code_digest}".encode()).hexdigest()
    return cache_dir() / kind / f"{name[:32]}.json"


def load(task_digest: str, code_digest: str) -> GoldValues | None:
    """The recorded gold values of a task, or None if none are recorded."""
    data = _read(_path(task_digest, code_digest))
    return data if isinstance(data, dict) else None


def save(task_digest: str, code_digest: str, gold: GoldValues) -> None:
    """Record a task's gold values (atomically: concurrent graders may race)."""
    _write(_path(task_digest, code_digest), gold)


def load_witnessed(task_digest: str, code_digest: str) -> list[str] | None:
    """The fail_to_pass tests whose failure at noop a strong seal showed, as a grading of
    no change recorded them (:func:`save_witnessed`), or None if none is recorded."""
    return _tests(_path(task_digest, code_digest, "witnessed"))


def save_witnessed(task_digest: str, code_digest: str, tests: list[str]) -> None:
    """Record what :func:`load_witnessed` reads (``task_digest`` covers the leak scan's
    findings too, when the grading had them)."""
    _write(_path(task_digest, code_digest, "witnessed"), sorted(tests))


def load_forged(task_digest: str, code_digest: str) -> list[str] | None:
    """The fail_to_pass tests that the strongest task-blind attack passed with no fix, as
    :func:`save_forged` recorded them, or None if none is recorded."""
    return _tests(_path(task_digest, code_digest, "forged"))


def save_forged(task_digest: str, code_digest: str, tests: list[str]) -> None:
    """Record what :func:`load_forged` reads (keyed as :func:`save_witnessed` is)."""
    _write(_path(task_digest, code_digest, "forged"), sorted(tests))


def _tests(path: Path) -> list[str] | None:
    data = _read(path)
    return data if isinstance(data, list) and all(isinstance(t, str) for t in data) else None


def _read(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)
