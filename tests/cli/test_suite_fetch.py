"""``repogym suite fetch``'s summary counts the packages it fetched, not the whole suite."""

from __future__ import annotations

from repogym import cli
from repogym.quality import suite_build
from repogym.scenarios import suites


def test_the_seal_floor_line_counts_only_the_fetched_tasks(monkeypatch, capsys):
    """Fetching one package of a suite whose other packages are withheld: the line says
    what this fetch's tasks are (1 served, 1 withheld), not 1 - 3."""
    report = suite_build.FetchReport(validated=["inflection-1"], already=["inflection-2"])
    monkeypatch.setattr(suite_build, "fetch", lambda *a, **k: report)
    held = {"inflection-2": "under the floor", "jmespath-1": "stale", "parse-3": "stale"}
    monkeypatch.setattr(suites, "withheld_tasks", lambda *a, **k: held)
    assert cli.main(["suite", "fetch", "realpy", "--packages", "inflection"]) == 0
    out = capsys.readouterr().out
    assert "realpy: seal floor: 1 served, 1 withheld" in out, out
