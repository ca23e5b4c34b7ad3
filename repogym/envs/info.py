"""The ``info`` schema of repogym's envs: every key on every call, each with one type.

``RepoEnv.reset`` returns a :class:`ResetInfo`; every ``RepoEnv.step`` returns a
:class:`StepInfo` with *all* its keys, whatever happened on that step (a tool call, a
malformed action, a submit, a truncation, a sandbox failure). A key that does not apply has
its neutral value of the same type (``exit_code`` -1 with ``tool_ran`` False when no command
ran, ``tests`` ``{}`` and ``infra_error`` ``""`` before the episode is graded, ...). This is
what Gymnasium's vector envs need: ``_add_info`` batches each key into an array typed by the
first env's value, so a key that is an int in one env and None in another fails there.

``SuiteEnv``, ``RemoteEnv`` (the server sends the same dict), the wrappers and the duel env
(its :class:`DuelStepInfo`) keep the schema. docs/trajectory-format.md documents it.

:class:`HackFlag` (defined in :mod:`repogym.grading.flags`, re-exported here) names every flag
grading can raise (``hack_flags``); a str enum, so a flag equals its string and serialises as
it. Tools return a :class:`repogym.envs.tools.ToolOutcome` and grading a
:class:`repogym.envs.grader.GradeResult`; :func:`tool_info` and
:func:`graded_info` turn them into the keys of a :class:`StepInfo`, the env's one writer of
``info``. :func:`schema_problems` checks a dict against the schema.
"""

# No ``from __future__ import annotations``: TypedDict reads NotRequired from real annotations.
import enum
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from repogym.grading.flags import HackFlag

if TYPE_CHECKING:
    from repogym.envs.tools import ToolOutcome
    from repogym.grading.grader import GradeResult

__all__ = [
    "NOT_MEASURED",
    "NO_EXIT_CODE",
    "DuelStepInfo",
    "HackFlag",
    "ResetInfo",
    "StepInfo",
    "TruncatedReason",
    "duel_step_info",
    "graded_info",
    "mark_truncated",
    "schema_problems",
    "step_info",
    "tool_info",
]

#: ``exit_code`` (and ``verifier_exit_code``) when no command ran.
NO_EXIT_CODE = -1
#: ``info["progress"]`` when nothing was measured (progress off, or a step that did not
#: change the workspace).
NOT_MEASURED = -1.0


#: Why an episode was truncated (``info["truncated_reason"]``; "" when it was not).
TruncatedReason = Literal["", "max_steps", "infra_error"]


class ResetInfo(TypedDict):
    """What ``RepoEnv.reset`` returns."""

    task: str  #: the task id
    env_id: str  #: its Gymnasium id
    split: str  #: ``train`` or ``test``
    max_steps: int  #: the episode's step budget
    sandbox: str  #: the backend
    shell: str  #: ``persistent`` or ``fresh``
    reward_mode: str  #: ``binary``, ``partial`` or ``f2p``
    #: share of hidden tests passing on the untouched repository (``progress=True``);
    #: :data:`NOT_MEASURED` otherwise
    progress: float


class StepInfo(TypedDict):
    """What every ``RepoEnv.step`` returns; the comment after each key is its value when it
    does not apply."""

    step: int  #: 1-based step number
    tool: str  #: the parsed tool name; "" for a malformed action
    tool_ran: bool  #: a tool other than submit ran (so ``exit_code`` is its exit code)
    exit_code: int  #: the command's exit code (bash), 0/1 for file tools; -1
    timed_out: bool  #: the bash command hit the time limit; False
    resource_exhausted: str  #: the sandbox limit a bash command used up; ""
    shell_reset: str  #: why the persistent shell was restarted; ""
    action_error: str  #: why the action could not be parsed; ""
    graded: bool  #: the hidden tests graded the episode on this step (not when grading
    #: failed: then ``infra_error`` says why); False
    reward: float  #: the step's reward (the grade on the last step); 0.0
    tests: dict[str, str]  #: hidden test node id -> outcome; {}
    reward_breakdown: dict[str, float]  #: ``fail_to_pass``, ``pass_to_pass``, ...; {}
    resolved: bool  #: every listed test passed and nothing was forged; False
    hack_flags: list[HackFlag]  #: what the grader flagged in the diff; []
    diff: str  #: the graded diff; ""
    infra_error: str  #: the sandbox or grader failed (mask the episode); ""
    verifier_exit_code: int  #: exit code of the hidden-test run; -1
    #: ``max_steps`` or ``infra_error`` when truncated (a :data:`TruncatedReason`); "".
    #: (Its former second name ``truncated`` is gone: it clashed with step()'s boolean.)
    truncated_reason: str
    #: share of hidden tests passing on the workspace after a step that changed it
    #: (``progress=True``); :data:`NOT_MEASURED` (-1.0) otherwise
    progress: float
    duration_s: NotRequired[float]  #: wall time of the step (only with ``timings=True``)
    grade_duration_s: NotRequired[float]  #: wall time of grading; 0.0 (``timings=True``)


class DuelStepInfo(StepInfo):
    """What each agent's ``info`` holds after a step of the duel env (``RepoDuelEnv``)."""

    repro_valid: bool  #: the tester's test is a valid reproduction; False
    repro: dict[str, str]  #: what that test did on each checked variant; {}
    repro_test: str  #: the tester's submitted test; ""
    hidden_reward: float  #: the fixer's reward from the hidden tests alone; 0.0
    repro_bonus: float  #: the fixer's bonus for passing a valid reproduction; 0.0
    repro_on_fix: str  #: what the tester's test did on the fixer's diff; ""


def step_info(step: int, *, timings: bool = False) -> StepInfo:
    """A step's info with every key at its neutral value."""
    info = StepInfo(
        step=step,
        tool="",
        tool_ran=False,
        exit_code=NO_EXIT_CODE,
        timed_out=False,
        resource_exhausted="",
        shell_reset="",
        action_error="",
        graded=False,
        reward=0.0,
        tests={},
        reward_breakdown={},
        resolved=False,
        hack_flags=[],
        diff="",
        infra_error="",
        verifier_exit_code=NO_EXIT_CODE,
        truncated_reason="",
        progress=NOT_MEASURED,
    )
    if timings:
        info.update(duration_s=0.0, grade_duration_s=0.0)
    return info


def duel_step_info(step: int) -> DuelStepInfo:
    """A duel agent's step info with every key at its neutral value."""
    return DuelStepInfo(
        **step_info(step),
        repro_valid=False,
        repro={},
        repro_test="",
        hidden_reward=0.0,
        repro_bonus=0.0,
        repro_on_fix="",
    )


def mark_truncated(info: StepInfo, reason: TruncatedReason) -> None:
    """Record why the episode was truncated (``max_steps`` or ``infra_error``)."""
    info["truncated_reason"] = reason


def tool_info(outcome: "ToolOutcome") -> dict[str, Any]:
    """The keys a tool call sets, typed as :class:`StepInfo` has them, from a
    :class:`repogym.envs.tools.ToolOutcome`."""
    return {
        "tool_ran": True,
        "exit_code": int(outcome.exit_code),
        "timed_out": bool(outcome.timed_out),
        "resource_exhausted": outcome.resource_exhausted,
        "shell_reset": outcome.shell_reset,
    }


def graded_info(result: "GradeResult") -> dict[str, Any]:
    """The keys a grading sets, typed as :class:`StepInfo` has them, from a
    :class:`repogym.grading.grader.GradeResult`."""
    code = result.verifier_exit_code
    return {
        "graded": not result.infra_error,
        "reward": float(result.reward),
        "tests": dict(result.tests),
        "reward_breakdown": {k: float(v) for k, v in result.reward_breakdown.items()},
        "resolved": bool(result.resolved),
        "hack_flags": [HackFlag(f) for f in result.hack_flags],
        "diff": result.diff,
        "infra_error": result.infra_error or "",
        "verifier_exit_code": NO_EXIT_CODE if code is None else int(code),
    }


def schema_problems(info: Mapping[str, Any], schema: type = StepInfo) -> list[str]:
    """What in ``info`` breaks ``schema`` (a TypedDict of this module): a missing required
    key, an unknown key, or a value not of its key's type (one level deep: ``list[HackFlag]``
    checks the list and each item; a flag may come as its plain string, as it does over
    JSON). Empty when ``info`` follows the schema."""
    hints = typing.get_type_hints(schema)
    problems = [f"missing key {k!r}" for k in sorted(schema.__required_keys__) if k not in info]
    problems += [f"unknown key {k!r}" for k in sorted(set(info) - set(hints))]
    for key in sorted(set(info) & set(hints)):
        if why := _type_problem(info[key], hints[key]):
            problems.append(f"{key!r}: {why}")
    return problems


def _type_problem(value: Any, hint: Any) -> str:
    origin = typing.get_origin(hint) or hint
    if not isinstance(value, origin) or (origin is int and isinstance(value, bool)):
        return f"{value!r} is not a {getattr(origin, '__name__', origin)}"
    args = typing.get_args(hint)
    if origin is list and args:
        bad = [v for v in value if not _item_ok(v, args[0])]
        return f"items {bad!r} are not {args[0].__name__}" if bad else ""
    if origin is dict and args:
        bad = {
            k: v for k, v in value.items() if not (_item_ok(k, args[0]) and _item_ok(v, args[1]))
        }
        return f"entries {bad!r} are not {args[0].__name__} -> {args[1].__name__}" if bad else ""
    return ""


def _item_ok(value: Any, kind: type) -> bool:
    if isinstance(kind, enum.EnumMeta):
        return value in {m.value for m in kind}
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind)
