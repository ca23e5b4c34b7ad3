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


def test_negative_count_is_rejected():
    fn = Flaky(failures=0)
    with pytest.raises(ValueError):
        retry(fn, retries=-1, sleep=no_sleep)
    assert fn.calls == 0
