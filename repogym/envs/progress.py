"""Process rewards from the environment: ``info["progress"]`` (``gym.make(id, progress=True)``).

After each step that changed the workspace, the share of the task's hidden tests that pass
on the workspace as it stands: its diff is graded in a fresh sandbox exactly as a
submission would be (:meth:`repogym.envs.session.Session.grade`), without ending the
episode or stopping the shell. Verdicts are cached by diff, so returning to an earlier
state costs nothing. The value is never in an observation. Every step's ``info`` holds the
key with a float: :data:`NOT_MEASURED` (-1.0) when progress is off, when the step could not
change the workspace (``read``, a malformed action) or did not (same diff as the last
measured one), or when grading failed (infrastructure); on the last (graded) step it is the
final verdict's share. ``reset``'s ``info["progress"]`` is the share on the untouched
repository (the baseline a first delta is taken from).
"""

from __future__ import annotations

import copy
from collections.abc import MutableMapping

from repogym.envs.info import NOT_MEASURED, StepInfo
from repogym.envs.session import Session
from repogym.grading import grader
from repogym.sandbox import SandboxError

#: Tools whose call can change the workspace (the others cannot).
CHANGING_TOOLS = frozenset({"bash", "write", "edit"})


def share_passed(tests: dict[str, str]) -> float:
    """The share of ``tests`` (name -> status) that passed; 0.0 for no tests."""
    return sum(s == "passed" for s in tests.values()) / len(tests) if tests else 0.0


class ProgressMeter:
    """Measures one episode's progress; its verdict cache may be shared (forks share it).

    Args:
        cache: (task id, task version, diff, flags) -> share; a new dict if None.
    """

    def __init__(self, cache: MutableMapping[tuple, float] | None = None) -> None:
        self.cache: MutableMapping[tuple, float] = {} if cache is None else cache
        self.last_diff: tuple[str, tuple[str, ...]] = ("", ())

    def fork(self) -> ProgressMeter:
        """A meter for a fork of the episode: the same last diff, the same cache."""
        return copy.copy(self)

    def step(
        self, session: Session | None, info: StepInfo, ended: bool, mode: grader.RewardMode
    ) -> float:
        """The progress to report for a step whose ``info`` is given."""
        if ended:
            if info.get("infra_error") or not isinstance(info.get("tests"), dict):
                return NOT_MEASURED
            return share_passed(info["tests"])
        if (
            session is None
            or session.closed
            or info.get("tool") not in CHANGING_TOOLS
            or info.get("action_error")
        ):
            return NOT_MEASURED
        try:
            return self.measure(session, mode)
        except SandboxError:  # the next step meets the failure and reports it (infra_error)
            return NOT_MEASURED

    def baseline(self, session: Session, mode: grader.RewardMode) -> float:
        """The share passing on the untouched repository (``reset``'s ``info["progress"]``);
        one grading per task, then cached."""
        self.last_diff = ("", ())
        return self._share(session, self.last_diff, mode)

    def measure(self, session: Session, mode: grader.RewardMode) -> float:
        """Grade the workspace as it stands if it changed since the last measure."""
        diff, flags = session.current_diff()
        state = (diff, tuple(flags))
        if state == self.last_diff:
            return NOT_MEASURED
        share = self._share(session, state, mode)
        if share != NOT_MEASURED:  # else measured again at the next changing step
            self.last_diff = state
        return share

    def _share(
        self, session: Session, state: tuple[str, tuple[str, ...]], mode: grader.RewardMode
    ) -> float:
        key = (session.task.id, session.task.version, *state)
        if key not in self.cache:
            result = session.grade(state[0], list(state[1]), mode=mode)
            if result.infra_error:
                return NOT_MEASURED
            self.cache[key] = share_passed(result.tests)
        return self.cache[key]
