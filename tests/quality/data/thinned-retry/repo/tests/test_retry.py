"""Visible tests for retry()."""

from retry import retry


def test_returns_value_of_first_success():
    calls = []

    def fn():
        calls.append(1)
        return "ok"

    assert retry(fn, sleep=lambda s: None) == "ok"
    assert len(calls) == 1


def test_unlisted_exception_is_not_retried():
    calls = []

    def fn():
        calls.append(1)
        raise KeyError("boom")

    try:
        retry(fn, exceptions=(OSError,), sleep=lambda s: None)
    except KeyError:
        pass
    assert len(calls) == 1
