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


def test_a_fetch_into_a_log_file_says_each_package_and_task_as_it_goes(monkeypatch, capsys):
    """stderr not a terminal (``suite fetch ... 2> log``): no progress bar is drawn, so each
    event is a line there while the fetch runs, not only the summary at its end."""
    seen: list[str] = []

    def fake_fetch(*a, on_event, **k):
        on_event("package", "inflection 0.5.1 (test_synthetic, text)")
        on_event("task", "inflection-1")
        seen.append(capsys.readouterr().err)  # written before the fetch returns
        on_event("fail", "inflection-2: gold fails")
        on_event("task", "inflection-2")
        return suite_build.FetchReport(validated=["inflection-1"], failed={"inflection-2": "x"})

    monkeypatch.setattr(suite_build, "fetch", fake_fetch)
    monkeypatch.setattr(suites, "withheld_tasks", lambda *a, **k: {})
    assert cli.main(["suite", "fetch", "realpy", "--packages", "inflection"]) == 1
    err = seen[0] + capsys.readouterr().err
    total = sum(len(p.tasks) for p in suites.load_suite("realpy").select(["inflection"]))
    assert f"realpy: 0/{total} inflection 0.5.1 (test_synthetic, text)" in seen[0], seen[0]
    assert f"realpy: 1/{total} inflection-1 done" in seen[0]
    assert "inflection-2: gold fails" in err and f"realpy: 2/{total} inflection-2 done" in err
