"""What a researcher publishes: intervals, paired comparisons and what each run was."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from repogym.harness.config import RunConfig
from repogym.harness.metrics import Z95, paired_comparison, sign_test_p, wilson_interval
from repogym.harness.provenance import REDACTED, endpoint_of, public_args
from repogym.harness.runner import run
from repogym.version import __version__

from .conftest import TASKS, run_cli


def test_wilson_interval_matches_its_closed_forms() -> None:
    z2 = Z95**2
    for n in (1, 2, 10, 31):
        assert wilson_interval(0.0, n) == pytest.approx((0.0, z2 / (n + z2)))
        assert wilson_interval(1.0, n) == pytest.approx((n / (n + z2), 1.0))
    lo, hi = wilson_interval(0.5, 10)
    half = Z95 / (1 + z2 / 10) * math.sqrt(0.25 / 10 + z2 / 400)
    assert (lo, hi) == pytest.approx((0.5 - half, 0.5 + half))
    assert (round(lo, 4), round(hi, 4)) == (0.2366, 0.7634)  # the textbook value
    assert wilson_interval(None, 5) is None and wilson_interval(0.5, 0) is None


def test_sign_test_is_the_exact_binomial_tail() -> None:
    assert sign_test_p(1, 9) == pytest.approx(2 * (1 + 10) / 2**10)
    assert sign_test_p(9, 1) == sign_test_p(1, 9)
    assert sign_test_p(0, 5) == pytest.approx(2 / 32)
    assert sign_test_p(3, 3) == 1.0 and sign_test_p(0, 0) == 1.0


def _rows(agent: str, outcomes: dict[str, list[bool]], **extra: object) -> list[dict]:
    return [
        {"agent": agent, "task": t, "sample": i, "resolved": ok, **extra}
        for t, oks in outcomes.items()
        for i, ok in enumerate(oks)
    ]


def test_paired_comparison_counts_tasks_on_the_common_ones() -> None:
    a = _rows("a", {"t1": [True], "t2": [True], "t3": [False], "t4": [True], "only-a": [True]})
    b = _rows("b", {"t1": [True], "t2": [False], "t3": [True], "t4": [False], "only-b": [False]})
    b.append({"agent": "b", "task": "t5", "sample": 0, "infra_error": "x"})  # not scored
    c = paired_comparison(a, b)
    assert (c["common_tasks"], c["a_better"], c["b_better"], c["both"], c["neither"]) == (
        4,
        2,
        1,
        1,
        0,
    )
    assert c["a_only"] == ["t2", "t4"] and c["b_only"] == ["t3"]
    assert c["p_value"] == pytest.approx(1.0)  # 2 vs 1: no evidence
    assert (c["a_rate"], c["b_rate"]) == (0.75, 0.5)
    # several samples: a task goes to the run with the higher fraction; equal ones are ties
    many = paired_comparison(
        _rows("a", {"t": [True, True, False]}), _rows("b", {"t": [True, False, False]})
    )
    assert (many["a_better"], many["b_better"]) == (1, 0)


def test_compare_command_prints_counts_and_p(tmp_path: Path) -> None:
    for name, oks in (("a", [True] * 10), ("b", [True] + [False] * 9)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.jsonl").write_text(
            "".join(
                json.dumps(r) + "\n"
                for r in _rows(name, {f"t{i}": [ok] for i, ok in enumerate(oks)})
            )
        )
    proc = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "only A resolved (A better): 9   only B resolved (B better): 0" in proc.stdout
    assert "p = 0.003906" in proc.stdout  # 2 / 2**9
    data = json.loads(run_cli("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json").stdout)
    assert data["p_value"] == pytest.approx(2 / 2**9) and data["a"]["label"] == "a"
    proc = run_cli("compare", str(tmp_path / "a"), str(tmp_path / "nothing"))
    assert proc.returncode == 2 and "repogym run --out DIR" in proc.stdout


def test_urls_keep_only_their_host_and_secrets_are_redacted() -> None:
    url = "https://user:s3cret@api.example.com:8443/openai/deployments/x?api-key=abc"
    assert endpoint_of(url) == "https://api.example.com:8443"
    assert endpoint_of("not a url") is None and endpoint_of(3) is None
    args = public_args(
        {
            "base_url": url,
            "api_key": "sk-1",
            "hf_token": "t",
            "max_tokens": 64,
            "api_key_env": "MY_KEY",
            "model": "m",
        }
    )
    assert args == {
        "base_url": "https://api.example.com:8443",
        "api_key": REDACTED,
        "hf_token": REDACTED,
        "max_tokens": 64,
        "api_key_env": "MY_KEY",
        "model": "m",
    }


def test_run_json_records_provenance_and_keeps_the_first_start(tmp_path: Path) -> None:
    out = tmp_path / "r"
    run(RunConfig(agent="random", out=out, task_ids=TASKS[:1], agent_args={"seed": 3}))
    first = json.loads((out / "run.json").read_text())["provenance"]
    assert first["model"] is None and first["endpoint"] is None
    assert first["sampling"] == {"seed": 3} and first["agent_options"]["seed"] == 3
    assert first["tasks"]["count"] == 1 and first["tasks"]["task_ids"] == TASKS[:1]
    assert first["repogym_version"] == __version__
    assert first["repogym_commit"] is None or len(first["repogym_commit"]) == 40
    run(RunConfig(agent="random", out=out, task_ids=TASKS, agent_args={"seed": 3}))
    again = json.loads((out / "run.json").read_text())["provenance"]
    assert again["started_at"] == first["started_at"] and again["tasks"]["count"] == 2
