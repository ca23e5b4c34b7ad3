"""Hidden verifier tests for retry()."""

import pytest
from retry import retry


class Flaky:
    """A callable that fails ``failures`` times with OSError, then returns ``"done"``."""

    def __init__(self, failures: int):
        self.failures = failures
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise OSError(f"attempt {self.calls} failed")
        return "done"


def no_sleep(seconds: float) -> None:
    """Stand-in for time.sleep so the tests never wait."""


def test_zero_disables_retries():
    fn = Flaky(failures=1)
    with pytest.raises(OSError):
        retry(fn, retries=0, sleep=no_sleep)
    assert fn.calls == 1

    ok = Flaky(failures=0)
    assert retry(ok, retries=0, sleep=no_sleep) == "done"
    assert ok.calls == 1


def test_positive_count_makes_exactly_that_many_retries():
    for retries in (1, 2, 5):
        always = Flaky(failures=100)
        # Once every attempt has failed, the last attempt's exception is raised.
        with pytest.raises(OSError, match=f"attempt {retries + 1} failed"):
            retry(always, retries=retries, sleep=no_sleep)
        assert always.calls == retries + 1

    recovers = Flaky(failures=2)
    assert retry(recovers, retries=2, sleep=no_sleep) == "done"
    assert recovers.calls == 3

    waits = []
    with pytest.raises(OSError):
        retry(Flaky(failures=100), retries=3, delay=0.5, backoff=3.0, sleep=waits.append)
    assert waits == [0.5, 1.5, 4.5]


def test_default_is_preserved():
    always = Flaky(failures=100)
    waits = []
    with pytest.raises(OSError):
        retry(always, delay=1.0, sleep=waits.append)
    assert always.calls == 4
    assert waits == [1.0, 2.0, 4.0]

    no_delay = []
    with pytest.raises(OSError):
        retry(Flaky(failures=100), sleep=no_delay.append)
    assert no_delay == [0.0, 0.0, 0.0]

    unlisted = []

    def fn():
        unlisted.append(1)
        raise KeyError("not retried")

    with pytest.raises(KeyError):
        retry(fn, exceptions=(OSError,), sleep=no_sleep)
    assert len(unlisted) == 1


def test_negative_count_is_rejected():
    fn = Flaky(failures=0)
    with pytest.raises(ValueError):
        retry(fn, retries=-1, sleep=no_sleep)
    assert fn.calls == 0
