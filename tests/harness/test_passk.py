"""pass@k and the summary maths against closed forms."""

from __future__ import annotations

import math

import pytest

from repogym.harness.metrics import default_ks, pass_at_k, summarize


@pytest.mark.parametrize("n", [1, 2, 5, 10])
def test_pass_at_1_is_the_fraction_correct(n: int) -> None:
    for c in range(n + 1):
        assert pass_at_k(n, c, 1) == pytest.approx(c / n)


def test_matches_the_binomial_closed_form() -> None:
    for n in range(1, 12):
        for c in range(n + 1):
            for k in range(1, n + 1):
                want = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(want, abs=1e-12), (n, c, k)


def test_known_values() -> None:
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(4, 1, 4) == 1.0  # every draw includes the correct one
    assert pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(200, 3, 100) == pytest.approx(1 - math.comb(197, 100) / math.comb(200, 100))


def test_invalid_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)


def test_default_ks() -> None:
    assert default_ks(1) == [1]
    assert default_ks(4) == [1, 2, 4]
    assert default_ks(5) == [1, 2, 4, 5]


def _row(task: str, sample: int, resolved: bool, **kw) -> dict:
    return {"agent": "a", "task": task, "sample": sample, "resolved": resolved,
            "reward": float(resolved), "steps": 2, "wall_s": 1.0, **kw}


def test_summary_averages_pass_at_k_over_tasks_and_masks_infra_errors() -> None:
    rows = [_row("t1", 0, True), _row("t1", 1, False), _row("t1", 2, False),
            _row("t2", 0, False), _row("t2", 1, False), _row("t2", 2, True),
            _row("t2", 3, False, infra_error="sandbox died"),
            _row("t3", 0, False, agent_error="boom", hack_flags=["conftest"])]
    s = summarize(rows)
    assert s["episodes"] == 8 and s["scored"] == 7 and s["infra_errors"] == 1
    assert s["agent_errors"] == 1 and s["hack_flagged"] == 1
    assert s["resolve_rate"] == pytest.approx(2 / 7)
    # t1: n=3,c=1; t2: n=3,c=1 (infra row masked); t3: n=1,c=0.
    assert s["pass_at_k"][1] == pytest.approx((1 / 3 + 1 / 3 + 0) / 3)
    assert s["pass_at_k"][2] == pytest.approx(2 / 3)  # t3 has too few samples for k=2
    assert s["pass_at_k"][3] == pytest.approx(1.0)
