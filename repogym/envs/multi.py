"""A two-role PettingZoo environment: a tester reproduces the bug, a fixer fixes it.

Install with the ``multiagent`` extra (``pip install repogym[multiagent]``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, Literal

from gymnasium.utils import seeding

try:
    from pettingzoo import ParallelEnv
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "repogym.envs.multi needs PettingZoo. Fix: pip install 'repogym[multiagent]'"
    ) from e

from repogym.envs.actions import TOOL_HELP, ActionError, error_observation, parse_action
from repogym.envs.info import (
    DuelStepInfo,
    duel_step_info,
    graded_info,
    mark_truncated,
    tool_info,
)
from repogym.envs.repo_env import SuiteEnv, TextSpace
from repogym.grading import grader
from repogym.sandbox import Limits, SandboxError, SandboxSpec
from repogym.sandbox.workspace import TemplateCache, make_diff
from repogym.scenarios.patches import is_test_file, split_diff
from repogym.scenarios.task import Task

TESTER, FIXER = "tester", "fixer"
ReproStatus = Literal["passed", "failed", "error", "missing"]

TESTER_BRIEF = """\
Your role: TESTER. Do not fix the bug. Write a pytest test file at `{path}` that reproduces
the bug: it must FAIL on the repository as it is now and PASS once the bug is fixed. You share
the workspace with a fixer who edits the code at the same time (your action runs first in each
turn). Your test is graded when you submit: it runs in fresh sandboxes (without .git), on the
original repository, with a correct fix, and with some wrong fixes; it is a reproduction only
if it fails on the original, passes with the correct fix and fails with every wrong fix."""

FIXER_BRIEF = """\
Your role: FIXER. Fix the bug in the code. You share the workspace with a tester who writes a
reproducing test at `{path}` (run it with `python -m pytest -q {path}`; do not edit it: it
is never part of your fix). When you submit, your changes (without that file) are graded by
hidden tests, plus a bonus when the tester's test is a valid reproduction and your fix passes
it."""


@dataclasses.dataclass
class ReproResult:
    """What the tester's test did in one fresh sandbox."""

    status: ReproStatus
    exit_code: int | None = None
    output: str = ""


class RepoDuelEnv(ParallelEnv):
    """Two agents, one sandboxed repository: ``tester`` writes a reproducing test, ``fixer`` fixes.

    ## Description
    On ``reset`` one task is drawn (from ``self.np_random``; one sandbox and workspace per
    episode, built by an internal :class:`~repogym.envs.repo_env.SuiteEnv` whose tool
    implementations both agents use). Each ``step`` takes one tool call per live agent and
    runs the tester's first, then the fixer's, in the shared workspace. The tester's test
    lives at ``repro_path`` (default ``tests/test_repro.py``); it is never part of the
    fixer's diff and never mistaken for the hidden tests. Every other change in the shared
    workspace, whoever made it, is part of the fixer's diff.

    ## Action Space
    Per agent, ``TextSpace``: raw text holding one tool call, exactly as in ``RepoEnv``
    (bash, read, write, edit, submit). A malformed action yields an explanatory observation.

    ## Observation Space
    Per agent, ``TextSpace``: after ``reset`` the statement, the role's brief and the tool
    instructions; after each step the tool's output.

    ## Rewards
    0 on every step but an agent's last.
    * tester: 1.0 iff its test (the file at ``repro_path`` when it submits) fails (pytest
      exit code 1) on the pristine repository, passes (exit code 0) with the gold patch, and
      fails with every decoy of the task and with an unrelated edit; each run in a fresh
      sandbox without ``.git``, through the grader's launcher; else 0.
    * fixer: the hidden tests' reward (``repogym.grading.grader.grade`` on its diff, in
      ``reward_mode``) plus ``repro_weight`` when the hidden tests resolve the task (reward
      1), the tester's test is valid (as above) and it passes on the fixer's diff. The tester's test
      is its submitted version, or the file as it stands when the fixer submits if the tester has
      not submitted yet. A fix that only satisfies an invalid test earns nothing extra.

    ## Episode End
    An agent terminates when it submits (and is graded then). Both are truncated, and graded,
    when ``max_steps`` turns have run, or when the sandbox fails (``info["infra_error"]``).

    ## Info
    Each live agent's ``info`` after a step is a :class:`~repogym.envs.info.DuelStepInfo`:
    every key of ``RepoEnv``'s step info plus the duel's own, on every step, one type each.

    ## Arguments
    ``task``: a Task, id or folder, or a sequence of them (one is drawn per reset;
    ``reset(options={"task": id})`` picks one). ``repro_path``, ``repro_weight``,
    ``max_steps`` (default: the task's), ``reward_mode``, ``sandbox``, ``limits``,
    ``max_obs_chars``, ``sandbox_options``, ``render_mode`` ("ansi").

    ## Version History
    * v0: initial release.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "repogym_duel_v0",
        "render_modes": ["ansi"],
        "is_parallelizable": True,
    }

    def __init__(
        self,
        task: Task | str | Path | Sequence[Task | str | Path],
        *,
        repro_path: str = "tests/test_repro.py",
        repro_weight: float = 0.5,
        max_steps: int | None = None,
        reward_mode: grader.RewardMode = "binary",
        sandbox: str = "bwrap",
        limits: Limits | None = None,
        max_obs_chars: int = 16_000,
        sandbox_options: dict[str, Any] | None = None,
        render_mode: str | None = None,
    ) -> None:
        _check_repro_path(repro_path)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unsupported render_mode {render_mode!r}. Fix: use 'ansi' or None")
        tasks = list(task) if isinstance(task, Sequence) and not isinstance(task, str) else [task]
        self._env = SuiteEnv(
            tasks,
            sandbox=sandbox,
            reward_mode=reward_mode,
            limits=limits,
            max_obs_chars=max_obs_chars,
            sandbox_options=sandbox_options,
        )
        self.repro_path = repro_path
        self.repro_weight = float(repro_weight)
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.possible_agents = [TESTER, FIXER]
        self.agents: list[str] = []
        self._spaces = {a: TextSpace() for a in self.possible_agents}
        self._act_spaces = {a: TextSpace() for a in self.possible_agents}
        self._np_random, _ = seeding.np_random()
        self._steps = 0
        self._tester_test: str | None = None
        self._validity: dict[str, tuple[bool, dict[str, Any]]] = {}
        self._transcript: list[str] = []
        #: Templates for the checks of the tester's test, under a lease (so a uid) of their
        #: own: nothing the kernel counts per user is shared with the live episode.
        self._checks = TemplateCache()

    # -- PettingZoo API ------------------------------------------------------------------
    def observation_space(self, agent: str) -> TextSpace:
        return self._spaces[agent]

    def action_space(self, agent: str) -> TextSpace:
        return self._act_spaces[agent]

    @property
    def task(self) -> Task:
        """The current episode's task."""
        return self._env.task

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, dict]]:
        if seed is not None:
            self._np_random, _ = seeding.np_random(seed)
        task_id = (options or {}).get("task")
        if task_id is None:
            pool = self._env.tasks
            task_id = pool[int(self._np_random.integers(len(pool)))].id
        self._env.reset(seed=seed, options={"task": task_id})
        session = self._env.session
        if (session.template / self.repro_path).exists():
            raise ValueError(
                f"task {task_id!r} already has {self.repro_path}. Fix: pass "
                "another repro_path to RepoDuelEnv"
            )
        self.agents = list(self.possible_agents)
        self._steps, self._tester_test, self._validity = 0, None, {}
        base = session.prompt(tools=False).rstrip()
        briefs = {TESTER: TESTER_BRIEF, FIXER: FIXER_BRIEF}
        obs = {
            a: f"{base}\n\n{briefs[a].format(path=self.repro_path)}\n\n{TOOL_HELP}\n"
            for a in self.agents
        }
        self._transcript = [obs[TESTER]]
        info = {"task": task_id, "max_steps": self._budget(), "repro_path": self.repro_path}
        return obs, {a: {**info, "role": a} for a in self.agents}

    def step(self, actions: dict[str, str]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise RuntimeError("step() after the episode ended. Fix: call reset()")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(
                f"no action for live agent(s) {missing}. Fix: pass one action "
                f"for every agent in env.agents ({self.agents})"
            )
        self._steps += 1
        acting = list(self.agents)
        obs = dict.fromkeys(acting, "")
        rew = dict.fromkeys(acting, 0.0)
        term = dict.fromkeys(acting, False)
        trunc = dict.fromkeys(acting, False)
        infos: dict[str, DuelStepInfo] = {a: duel_step_info(self._steps) for a in acting}
        for agent in acting:
            if self._env.session.closed:  # the other agent's turn broke the sandbox
                obs[agent], trunc[agent] = "The episode ended: the sandbox failed.\n", True
                infos[agent]["infra_error"] = "sandbox failed"
                mark_truncated(infos[agent], "infra_error")
                continue
            obs[agent], term[agent], trunc[agent] = self._act(agent, actions[agent], infos[agent])
            self._transcript += [f"[{agent}] $ {actions[agent]}", obs[agent]]
        if self._steps >= self._budget():
            for agent in acting:
                if not (term[agent] or trunc[agent]):
                    obs[agent] += self._finish(agent, infos[agent])
                    trunc[agent] = True
                    if not infos[agent]["truncated_reason"]:
                        mark_truncated(infos[agent], "max_steps")
        for agent in acting:
            rew[agent] = infos[agent]["reward"]
        self.agents = [a for a in acting if not (term[a] or trunc[a])]
        if not self.agents:
            self._env.session.close()
        return obs, rew, term, trunc, infos

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return "\n".join(self._transcript)
        return None

    def close(self) -> None:
        """Stop the sandbox and delete every temp folder. Idempotent."""
        self.agents = []
        self._env.close()
        self._checks.close()

    # -- one agent's turn ----------------------------------------------------------------
    def _budget(self) -> int:
        return self.max_steps or self.task.max_steps

    def _act(self, agent: str, action: str, info: DuelStepInfo) -> tuple[str, bool, bool]:
        """Run one agent's action. Returns (observation, terminated, truncated)."""
        try:
            call = parse_action(action)
            info["tool"] = call.name
            if call.name == "submit":
                obs = self._finish(agent, info)
                failed = bool(info["truncated_reason"])
                return obs, not failed, failed
            outcome = self._env.session.run_tool(call)
            info.update(tool_info(outcome))
            return outcome.observation, False, False
        except ActionError as e:
            info["action_error"] = str(e)
            return error_observation(e), False, False
        except SandboxError as e:
            return self._infra_failure(e, info), False, True

    def _infra_failure(self, err: SandboxError, info: DuelStepInfo) -> str:
        self._env.session.close()
        info.update(infra_error=str(err), reward=0.0, graded=False)
        mark_truncated(info, "infra_error")
        return f"The sandbox failed: {err}\nThe episode ends here.\n"

    def _finish(self, agent: str, info: DuelStepInfo) -> str:
        """Grade ``agent`` (it submitted, or the step budget ran out)."""
        try:
            if agent == TESTER:
                return self._finish_tester(info)
            return self._finish_fixer(info)
        except SandboxError as e:
            return self._infra_failure(e, info)

    def _current_test(self) -> str | None:
        if self._tester_test is not None:
            return self._tester_test
        return self._env.session.file_or_none(self.repro_path)

    def _finish_tester(self, info: DuelStepInfo) -> str:
        test = self._current_test()
        self._tester_test = test if test is not None else ""
        valid, details = self.validate_test(self._tester_test)
        info.update(
            reward=1.0 if valid else 0.0,
            repro_valid=valid,
            repro=dict(details),
            repro_test=self._tester_test,
            infra_error=details.get("infra_error", ""),
            graded=not details.get("infra_error"),
        )
        if details.get("infra_error"):
            return f"Grading failed (infrastructure): {details['infra_error']}\n"
        if not self._tester_test.strip():
            return f"Submitted without a test at {self.repro_path}. Reward: 0.000\n"
        wrong = [v for k, v in details.items() if k not in ("original", "gold")]
        checked = (
            f"; it failed with {sum(v == 'failed' for v in wrong)} of the wrong fixes tried"
            if wrong
            else ""
        )
        return (
            f"Submitted. Your test on the original code: {details['original']}; with a "
            f"correct fix: {details.get('gold', 'not run')}{checked}. "
            f"Reward: {info['reward']:.3f}\n"
        )

    def _finish_fixer(self, info: DuelStepInfo) -> str:
        session = self._env.session
        diff, flags = session.diff()
        diff = drop_path(diff, self.repro_path)
        result = session.grade(diff, flags, mode=self._env.reward_mode)
        test = self._current_test() or ""
        valid, details = self.validate_test(test)
        on_fix = self.run_test(test, grader.filter_diff(diff, self.task.test_spec)[0])
        resolved = result.reward == 1.0 and result.resolved
        bonus = self.repro_weight if valid and resolved and on_fix.status == "passed" else 0.0
        infra = result.infra_error or details.get("infra_error") or ""
        reward = 0.0 if infra else result.reward + bonus
        info.update(graded_info(result))
        info.update(
            reward=float(reward),
            hidden_reward=float(result.reward),
            repro_bonus=float(bonus),
            repro_valid=valid,
            repro_on_fix=on_fix.status,
            infra_error=infra,
            graded=not infra,
        )
        if infra:
            return f"Grading failed (infrastructure): {infra}\n"
        passed = sum(s == "passed" for s in result.tests.values())
        return (
            f"Submitted. Hidden tests passed: {passed}/{len(result.tests)}. The tester's "
            f"test on your fix: {on_fix.status} (valid reproduction: {valid}). "
            f"Reward: {reward:.3f}\n"
        )

    # -- running the tester's test -------------------------------------------------------
    def validate_test(self, test: str) -> tuple[bool, dict[str, Any]]:
        """Whether ``test`` is a real reproduction of the bug.

        It must fail on the pristine repository, pass with the gold fix, and fail with every
        decoy (wrong fixes) and with an unrelated edit (a comment added to every module), so
        a test that only notices that *something* changed is not one. Each run is a fresh
        sandbox without ``.git`` (no ``git diff`` to peek at); only the outcome comes back.
        Results are cached per test text within an episode.
        """
        key = hashlib.sha256(test.encode("utf-8", "surrogatepass")).hexdigest()
        if key not in self._validity:
            runs = {
                "original": "",
                "gold": self.task.solution_patch.read_text(),
                "unrelated": unrelated_edit(self.task),
            }
            # decoys as grading sees them: their test and conftest edits are dropped too
            runs.update(
                {
                    f"decoy:{c.name}": grader.filter_diff(c.read(), self.task.test_spec)[0]
                    for c in self.task.candidates()
                    if c.kind == "decoy"
                }
            )
            want = {"original": "failed", "gold": "passed"}
            seen: dict[str, str] = {}
            try:
                for name, diff in runs.items():  # stop at the first run that disqualifies
                    seen[name] = self.run_test(test, diff).status
                    if seen[name] != want.get(name, "failed"):
                        break
            except SandboxError as e:
                self._validity[key] = (
                    False,
                    {"original": "missing", "gold": "missing", "infra_error": str(e)},
                )
            else:
                ok = len(seen) == len(runs) and all(
                    s == want.get(k, "failed") for k, s in seen.items()
                )
                self._validity[key] = (ok, seen)
        return self._validity[key]

    def run_test(self, test: str, diff: str) -> ReproResult:
        """Run ``test`` (the tester's file) in a fresh sandbox on pristine repo + ``diff``.

        The run has its own uid (a lease of its own, so no per-user kernel counter such as
        inotify instances, processes or message queues is shared with the episode), and
        every process of the live episode is frozen while it runs: a check that sees the
        gold patch has nobody to signal to.
        """
        if not test.strip():
            return ReproResult("missing")
        session = self._env.session
        template = self._checks.get(self.task.repo_dir, self.task.sandbox_dependencies())
        live = session.sandbox if not session.closed else None
        with live.frozen() if live is not None else contextlib.nullcontext():
            return run_repro(
                self.task,
                template,
                diff,
                test,
                self.repro_path,
                make_sandbox=session.make_sandbox,
                limits=session.limits,
            )


def _check_repro_path(path: str) -> None:
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not is_test_file(path):
        raise ValueError(
            f"repro_path {path!r} must be a relative pytest file name like "
            "'tests/test_repro.py'. Fix: pass such a path"
        )


def unrelated_edit(task: Task) -> str:
    """A diff that changes no behaviour: a comment appended to every non-test module."""
    repo = task.repo_dir
    return make_diff(
        repo,
        {
            rel: (repo / rel).read_text(encoding="utf-8", errors="surrogateescape")
            + "\n# reviewed\n"
            for rel in (p.relative_to(repo).as_posix() for p in sorted(repo.rglob("*.py")))
            if not is_test_file(rel)
        },
    )


def drop_path(diff: str, path: str) -> str:
    """``diff`` without the changes to ``path``."""
    return "".join(p.text for p in split_diff(diff) if path not in p.paths)


def run_repro(
    task: Task,
    template: Path,
    diff: str,
    test: str,
    path: str,
    *,
    make_sandbox: grader.SandboxFactory,
    limits: Limits,
) -> ReproResult:
    """Apply ``diff`` to a fresh sandbox, write ``test`` at ``path`` and run only that file.

    The file runs through the grader's launcher (isolated interpreter, the grader's pytest
    configuration, results on the launcher's channel): ``failed`` means tests ran and some
    failed (exit code 1), ``passed`` means every test passed (exit code 0); a collection
    error, no tests, a timeout, a patch that does not apply or a channel that disagrees with
    the exit code is ``error``.

    Raises:
        SandboxError: the sandbox itself failed.
    """
    v = task.test_spec
    limits = dataclasses.replace(limits, timeout_s=v.timeout_s)
    with grader.grading_dir(template) as gdir:
        (gdir / "tests" / path).parent.mkdir(parents=True, exist_ok=True)
        (gdir / "tests" / path).write_text(test, encoding="utf-8", errors="surrogateescape")
        sb = make_sandbox(SandboxSpec(template=template, limits=limits))
        try:
            applied = grader.apply_diff(sb, diff)
            if applied is not None and applied.exit_code != 0:
                return ReproResult("error", applied.exit_code, applied.output[-4000:])
            installed = grader.install_tests(sb, gdir)
            if installed.exit_code != 0:
                return ReproResult("error", installed.exit_code, installed.output[-4000:])
            sb.run("rm -rf .git")  # no history, no `git diff` to tell fixes apart
            run = grader.run_grading(
                sb, gdir, v.pytest_args(), [], v.timeout_s, v.ini_options, extra_files=[path]
            )
        finally:
            sb.close()
    return ReproResult(_repro_status(run), run.exec.exit_code, run.exec.stderr[-4000:])


def _repro_status(run: grader.GradingRun) -> ReproStatus:
    ch, ex = run.channel, run.exec
    if ch is None or ex.timed_out or ex.output_truncated or ch.exit != ex.exit_code:
        return "error"
    outcomes = {ch.status(n) for n in ch.phases}
    if ch.collected or not outcomes or ch.refused:
        return "error"
    if ex.exit_code == 0 and outcomes == {"passed"}:
        return "passed"
    if ex.exit_code == 1 and outcomes & {"failed", "error"}:
        return "failed"
    return "error"


def parallel_env(
    task: Task | str | Path | Sequence[Task | str | Path], **kwargs: Any
) -> RepoDuelEnv:
    """PettingZoo-style constructor: ``repogym.envs.multi.parallel_env("retry-zero")``."""
    return RepoDuelEnv(task, **kwargs)


__all__ = [
    "FIXER",
    "TESTER",
    "RepoDuelEnv",
    "ReproResult",
    "drop_path",
    "parallel_env",
    "run_repro",
]
