"""pytest plugin of repogym's sandboxed test probe (runs inside the sandbox, stdlib only).

Loaded with ``-p rg_probe``; writes one JSON object per line to ``$RG_PROBE_OUT``:
``{"case": node id, "when": phase, "outcome": ..., "message": ...}`` per test phase and
``{"collect": node id}`` per collector that failed.
"""

from __future__ import annotations

import json
import os

_out = None


def _send(**record: object) -> None:
    if _out is not None:
        _out.write(json.dumps(record) + "\n")
        _out.flush()


def pytest_configure(config) -> None:
    global _out
    _out = open(os.environ["RG_PROBE_OUT"], "w", encoding="utf-8")  # noqa: SIM115


def pytest_unconfigure(config) -> None:
    global _out
    if _out is not None:
        _out.close()
        _out = None


def _message(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    return str(report.longrepr or "")[-500:]


def pytest_runtest_logreport(report) -> None:
    _send(case=report.nodeid, when=report.when, outcome=report.outcome,
          message=_message(report) if report.failed else "")


def pytest_collectreport(report) -> None:
    if report.failed:
        _send(collect=report.nodeid)
