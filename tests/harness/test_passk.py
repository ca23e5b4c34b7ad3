"""pass@k and the summary maths against closed forms."""

from __future__ import annotations

import math

import pytest

from repogym.harness.metrics import (
    common_k,
    common_ks,
    default_ks,
    pass_at_k,
    summarize,
    summarize_groups,
)


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
    return {
        "agent": "a",
        "task": task,
        "sample": sample,
        "resolved": resolved,
        "reward": float(resolved),
        "steps": 2,
        "wall_s": 1.0,
        **kw,
    }


def test_summary_averages_pass_at_k_over_tasks_and_masks_infra_errors() -> None:
    rows = [
        _row("t1", 0, True),
        _row("t1", 1, False),
        _row("t1", 2, False),
        _row("t2", 0, False),
        _row("t2", 1, False),
        _row("t2", 2, True),
        _row("t2", 3, False, infra_error="sandbox died"),
        _row("t3", 0, False, agent_error="boom", hack_flags=["conftest"]),
    ]
    s = summarize(rows, ks=[1, 2, 3])
    assert s["episodes"] == 8 and s["scored"] == 7 and s["infra_errors"] == 1
    assert s["agent_errors"] == 1 and s["hack_flagged"] == 1
    assert s["resolve_rate"] == pytest.approx(2 / 7)
    # t1: n=3,c=1; t2: n=3,c=1 (infra row masked); t3: n=1,c=0.
    assert s["pass_at_k"][1] == pytest.approx((1 / 3 + 1 / 3 + 0) / 3)
    assert s["pass_at_k"][2] == pytest.approx(2 / 3)  # t3 has too few samples for k=2
    assert s["pass_at_k"][3] == pytest.approx(1.0)
    # By default one k that every task supports: t3 has a single sample, so only pass@1.
    assert list(summarize(rows)["pass_at_k"]) == [1]


def test_one_k_for_every_group() -> None:
    four = [_row("t1", i, i == 0) for i in range(4)] + [_row("t2", i, False) for i in range(4)]
    two = [_row("t1", i, True) for i in range(2)] + [_row("t2", i, i == 1) for i in range(2)]
    infra = [*two, _row("t2", 2, True, infra_error="x")]  # masked: not a third sample
    assert common_k([four]) == 4 and common_k([four, two]) == 2 and common_k([infra]) == 2
    assert common_ks([four, two]) == [1, 2]
    s = summarize_groups({"four": four, "two": two})
    assert list(s["four"]["pass_at_k"]) == list(s["two"]["pass_at_k"]) == [1, 2]
    # four: t1 n=4,c=1 -> 1 - C(3,2)/C(4,2) = 0.5; t2 -> 0.  two: t1 -> 1, t2 -> 1.
    assert s["four"]["pass_at_k"][2] == pytest.approx(0.25)
    assert s["two"]["pass_at_k"][2] == pytest.approx(1.0)
    assert (
        common_k([four, []]) == 0 and summarize_groups({"a": four, "b": []})["a"]["pass_at_k"] == {}
    )


def test_costs_are_totals_and_means() -> None:
    rows = [
        _row("t1", 0, True, tokens=100, wall_s=2.0),
        _row("t2", 0, False, tokens=300, wall_s=4.0),
    ]
    s = summarize(rows)
    assert s["tokens"] == 400 and s["mean_tokens"] == 200
    assert s["wall_s"] == 6.0 and s["mean_wall_s"] == 3.0
