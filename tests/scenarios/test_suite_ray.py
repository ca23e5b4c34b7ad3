"""`repogym suite fetch --ray` and `suite build --ray`: packages spread over a (local) Ray.

Real Ray, real sandboxes, real sdists: the fetch validates a sample of two packages as two
Ray tasks and records them where a plain fetch does; a package whose build fails comes back
as its message while the others go on; an exception in a Ray task reaches the caller as
itself; a package fetched on a node that does not see the suite's folder is an error that
names the fix.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from repogym.quality.suite_build import FetchReport, merge_report
from repogym.scenarios.suites import SuiteError, read_index
from tests.scenarios.test_realpy import SAMPLE, _cache, _cli

pytest.importorskip("ray")  # the `ray` extra; CI installs it

RAY_FETCH = (
    f"suite fetch realpy --packages {','.join(SAMPLE)} --per-package 1 --workers 1 --reruns 1 "
    "--no-adversarial --ray local"
).split()


def test_a_fetch_on_ray_records_every_package_as_a_plain_fetch_does(tmp_path):
    env = _cache(tmp_path)
    res = _cli(RAY_FETCH, env)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    assert "2/2 tasks validated (2 now, 0 before, 0 failed)" in res.stdout, res.stdout
    index = read_index(tmp_path / "cache" / "suites" / "realpy")
    assert {i["package"] for i in index.values()} == set(SAMPLE)
    assert all(i.get("seals", {}).get("f2p") for i in index.values()), index
    assert all("p2p_reaching" in i.get("scope", {}) for i in index.values()), index
    # what Ray recorded is what a plain fetch records: one without Ray, resuming, finds
    # nothing left to do
    again = _cli(RAY_FETCH[:-2], env)
    assert "2/2 tasks validated (0 now, 2 before, 0 failed)" in again.stdout, again.stdout


def test_a_build_on_ray_reports_each_failed_package_and_goes_on(tmp_path):
    env = _cache(tmp_path)
    res = _cli(
        [
            "suite",
            "build",
            "scratch",
            "--package",
            "repogym-no-such-package-a==0.0.1",
            "--package",
            "repogym-no-such-package-b==0.0.1",
            "--split",
            "train",
            "--kind",
            "none",
            "--manifests",
            str(tmp_path / "manifests"),
            "--workers",
            "1",
            "--ray",
            "local",
        ],
        env,
        timeout=600,
    )
    assert res.returncode == 1, res.stdout + res.stderr[-3000:]
    for name in ("repogym-no-such-package-a", "repogym-no-such-package-b"):
        assert res.stderr.count(f"{name}==0.0.1: ") == 1, res.stderr[-3000:]
    assert not (tmp_path / "manifests").exists() or not any((tmp_path / "manifests").iterdir())


def test_an_exception_in_a_ray_task_reaches_the_caller_as_itself():
    from repogym.quality.ray_map import ray_map

    def inverse(x: int) -> float:
        return 1 / x

    got = []
    with pytest.raises(ZeroDivisionError):
        for item, value in ray_map(inverse, [1, 0], address="local"):
            got.append((item, value))
    assert got in ([], [(1, 1.0)])


def test_a_package_fetched_where_the_suite_folder_is_not_seen_is_an_error(tmp_path):
    report, part = FetchReport(), FetchReport(validated=["schema-1"], seconds={"validate": 3.0})
    with pytest.raises(SuiteError, match="every node mounts") as info:
        merge_report(report, part, tmp_path, "schema")
    assert "schema-1" in str(info.value) and str(tmp_path) in str(info.value)
    assert report.validated == []  # nothing merged from a package whose tasks are lost


def _record(root: str, package: str, ids: list[str]) -> None:
    from repogym.scenarios import suites

    entry = suites.load_suite("realpy").select([package])[0]
    for task in entry.tasks:
        if task.id in ids:
            suites.record_validated(Path(root), entry, task, Path(root) / task.id, True)


def test_packages_recorded_at_once_by_several_processes_lose_no_task(tmp_path):
    """Ray tasks of one fetch record into one index at the same time."""
    from repogym.scenarios import suites

    entries = suites.load_suite("realpy").select(list(SAMPLE))
    jobs = [(str(tmp_path), e.name, [t.id for t in e.tasks]) for e in entries]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_record, args=job) for job in jobs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert set(read_index(tmp_path)) == {t.id for e in entries for t in e.tasks}
