"""Episodes as exact token ids, collated into batches, and rollout files (the data layer).

An :class:`Episode` holds, per agent turn, the tokens appended to the context before the
completion (``prompt_ids``: the first prompt, later the rendered observation of the previous
step), the completion's token ids as generated and their behaviour log-probabilities. Its
training sequence is the concatenation ``prompt_0 + completion_0 + prompt_1 + completion_1 +
... + final_ids``: never re-tokenised text (:meth:`Episode.layout`). :func:`collate` pads
episodes into a :class:`~repogym.agents.batch.Batch` (re-exported here), the one input of
every trainer, whose per-token tensors follow the alignment convention described in
:mod:`repogym.agents.batch`; :func:`write_rollouts` saves episodes as
``OUT/rollouts/*.jsonl`` in the trajectory schema that ``repogym show`` renders, and
:func:`read_rollout` loads one back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from repogym.agents.batch import Batch
from repogym.envs.wrappers import SCHEMA as TRAJECTORY_SCHEMA

__all__ = [
    "ROLLOUT_FORMAT",
    "Batch",
    "Episode",
    "Layout",
    "Turn",
    "collate",
    "read_rollout",
    "write_rollouts",
]

ROLLOUT_FORMAT = "repogym.rollout/1"
"""The ``format`` key of rollout files (trajectory-schema files with exact token ids)."""


@dataclass
class Turn:
    """One agent turn, as token ids exactly as generated.

    Attributes:
        prompt_ids: Tokens appended to the context before this completion (turn 0: the whole
            first prompt; later: the previous observation as the chat template renders it).
        completion_ids: The sampled tokens (the policy loss is on these).
        logprobs: Their behaviour log-probabilities (same length).
        prompt_obs_mask: 1 on the tokens of ``prompt_ids`` that hold environment output (the
            Echo loss predicts them), 0 on the template's scaffold; empty means all 0.
        action: The text the environment was given.
        observation: The environment's reply as shown to the policy ("" if none followed).
        finish_reason: ``stop`` (a stop token or string) or ``length`` (token budget).
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    prompt_obs_mask: list[int] = field(default_factory=list)
    action: str = ""
    observation: str = ""
    finish_reason: str = "stop"


@dataclass
class Layout:
    """One episode as one token sequence (lists of equal length ``T``).

    Attributes:
        input_ids: The training sequence.
        prompt_mask: 1 on the first prompt's tokens.
        action_mask: 1 on completion tokens.
        obs_mask: 1 on observation tokens.
        old_logp: Behaviour log-probabilities on completion tokens, 0 elsewhere.
        turn_index: The turn number on completion tokens, -1 elsewhere.
        state_pos: Per turn, the position of the last token before its completion.
        final_pos: The last token's position (the state after the last action).
    """

    input_ids: list[int]
    prompt_mask: list[int]
    action_mask: list[int]
    obs_mask: list[int]
    old_logp: list[float]
    turn_index: list[int]
    state_pos: list[int]
    final_pos: int


@dataclass
class Episode:
    """One episode as the policy saw it, with its outcome.

    Attributes:
        task: Task id.
        prompt: The first observation's text (what the first prompt was rendered from).
        turns: The agent's turns.
        final_ids: Tokens after the last completion (its observation), not a turn's prompt.
        final_obs_mask: 1 on the environment-output tokens of ``final_ids``.
        reward: The episode's return (the last step's reward in RepoEnv).
        terminated: Ended by ``submit``.
        truncated: Cut by the step budget or an infrastructure error.
        graded: The environment graded the final state (``submit``, or RepoEnv's graded
            truncation at the step budget): the episode is over for the critic.
        infra_error: Set when the sandbox or grader failed: masked out of every loss.
        resolved: Every hidden test passed.
        group: Index of the group of samples of one task (GRPO's baseline).
        masked: Kept out of every loss though valid (overlong filtering); it still counts in
            its group's baseline.
        info: Anything else (hack flags, diff, policy version, context notes).
    """

    task: str
    prompt: str = ""
    turns: list[Turn] = field(default_factory=list)
    final_ids: list[int] = field(default_factory=list)
    final_obs_mask: list[int] = field(default_factory=list)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    graded: bool = False
    infra_error: str | None = None
    resolved: bool = False
    group: int = 0
    masked: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def overlong(self) -> bool:
        """It ran out of tokens: the context budget, or a last completion cut at its budget."""
        cut = bool(self.turns) and self.turns[-1].finish_reason == "length"
        return bool(self.info.get("context_full")) or cut

    @property
    def valid(self) -> bool:
        """False for an infrastructure failure: such an episode stays out of every loss."""
        return not self.infra_error

    @property
    def bootstrap(self) -> bool:
        """True when the critic must bootstrap with ``V(s_T)``: cut without being graded."""
        return self.truncated and not self.terminated and not self.graded

    def context_ids(self) -> list[int]:
        """Every token so far: the prompts and completions of the turns (no ``final_ids``)."""
        ids: list[int] = []
        for turn in self.turns:
            ids += turn.prompt_ids + turn.completion_ids
        return ids

    def token_ids(self) -> list[int]:
        """The training sequence: :meth:`context_ids` and then ``final_ids``."""
        return self.context_ids() + self.final_ids

    def layout(self) -> Layout:
        """The training sequence with its masks (the completion ids are used as they are).

        Raises:
            ValueError: If a turn has a different number of completion tokens and logprobs.
        """
        out = Layout([], [], [], [], [], [], [], 0)
        for k, turn in enumerate(self.turns):
            if len(turn.completion_ids) != len(turn.logprobs):
                raise ValueError(
                    f"turn {k} of episode {self.task!r} has {len(turn.completion_ids)} tokens "
                    f"but {len(turn.logprobs)} logprobs; they must match one to one"
                )
            obs = turn.prompt_obs_mask or [0] * len(turn.prompt_ids)
            _extend(out, turn.prompt_ids, obs=obs, prompt=int(k == 0))
            out.state_pos.append(len(out.input_ids) - 1)
            n = len(turn.completion_ids)
            out.input_ids += turn.completion_ids
            out.prompt_mask += [0] * n
            out.action_mask += [1] * n
            out.obs_mask += [0] * n
            out.old_logp += list(turn.logprobs)
            out.turn_index += [k] * n
        final_obs = self.final_obs_mask or [0] * len(self.final_ids)
        _extend(out, self.final_ids, obs=final_obs, prompt=0)
        out.final_pos = max(len(out.input_ids) - 1, 0)
        return out


def _extend(out: Layout, ids: list[int], *, obs: list[int], prompt: int) -> None:
    """Append non-action tokens (a prompt or an observation) to ``out``."""
    n = len(ids)
    out.input_ids += ids
    out.prompt_mask += [prompt] * n
    out.action_mask += [0] * n
    out.obs_mask += [0] * n if prompt else list(obs)
    out.old_logp += [0.0] * n
    out.turn_index += [-1] * n


def collate(episodes: Sequence[Episode], pad_id: int) -> Batch:
    """Lay out and right-pad episodes into a :class:`Batch` (on the CPU).

    Args:
        episodes: At least one episode.
        pad_id: The pad token id.

    Raises:
        ValueError: For an empty list.
    """
    if not episodes:
        raise ValueError("collate() needs at least one episode")
    lays = [e.layout() for e in episodes]
    width = max(1, max(len(x.input_ids) for x in lays))
    k_max = max(1, max(len(x.state_pos) for x in lays))
    valid = torch.tensor([e.valid for e in episodes])
    in_loss = torch.tensor([e.valid and not e.masked for e in episodes])

    def pad(name: str, value: float, dtype: torch.dtype) -> torch.Tensor:
        rows = [getattr(x, name) + [value] * (width - len(x.input_ids)) for x in lays]
        return torch.tensor(rows, dtype=dtype)

    return Batch(
        input_ids=pad("input_ids", pad_id, torch.long),
        attention_mask=torch.tensor(
            [[1] * len(x.input_ids) + [0] * (width - len(x.input_ids)) for x in lays]
        ),
        prompt_mask=pad("prompt_mask", 0, torch.long),
        action_mask=pad("action_mask", 0, torch.long) * in_loss[:, None],
        obs_mask=pad("obs_mask", 0, torch.long) * in_loss[:, None],
        old_logp=pad("old_logp", 0.0, torch.float32),
        turn_index=pad("turn_index", -1, torch.long),
        rewards=torch.tensor([float(e.reward) for e in episodes]),
        valid=valid,
        groups=torch.tensor([e.group for e in episodes]),
        bootstrap=torch.tensor([e.bootstrap for e in episodes]),
        state_pos=torch.tensor([x.state_pos + [-1] * (k_max - len(x.state_pos)) for x in lays]),
        n_turns=torch.tensor([len(x.state_pos) for x in lays]),
        final_pos=torch.tensor([x.final_pos for x in lays]),
    )


# --------------------------------------------------------------------------------------------
# Rollout files
# --------------------------------------------------------------------------------------------


def _records(ep: Episode, step: int, decode: Callable[[list[int]], str]) -> list[dict]:
    """The header, step and summary records of one episode."""
    header = {
        "type": "header",
        "schema": TRAJECTORY_SCHEMA,
        "format": ROLLOUT_FORMAT,
        "task": ep.task,
        "train_step": step,
        "group": ep.group,
        "observation": ep.prompt,
        "policy_version": ep.info.get("policy_version"),
    }
    rows: list[dict] = [header]
    last = len(ep.turns)
    for t, turn in enumerate(ep.turns, 1):
        rows.append(
            {
                "type": "step",
                "t": t,
                "action": decode(turn.completion_ids),
                "observation": turn.observation,
                "reward": ep.reward if t == last else 0.0,
                "terminated": ep.terminated and t == last,
                "truncated": ep.truncated and t == last,
                "tool": None,
                "exit_code": None,
                "env_action": turn.action,
                "prompt_text": decode(turn.prompt_ids),
                "prompt_ids": turn.prompt_ids,
                "prompt_obs_mask": turn.prompt_obs_mask,
                "completion_ids": turn.completion_ids,
                "logprobs": turn.logprobs,
                "finish_reason": turn.finish_reason,
            }
        )
    keys = ("hack_flags", "diff", "tests", "truncated_by", "context_full")
    rows.append(
        {
            "type": "summary",
            "steps": last,
            "return": ep.reward,
            "reward": ep.reward,
            "abandoned": False,
            "resolved": ep.resolved,
            "infra_error": ep.infra_error,
            "graded": ep.graded,
            "truncated": ep.info.get("truncated_by"),
            "loss_masked": ep.masked,
            "final_ids": ep.final_ids,
            "final_obs_mask": ep.final_obs_mask,
            "final_text": decode(ep.final_ids),
            **{k: ep.info.get(k) for k in keys},
        }
    )
    return rows


def write_rollouts(
    out: str | Path,
    step: int,
    episodes: Sequence[Episode],
    decode: Callable[[list[int]], str],
    *,
    tag: str = "",
) -> list[Path]:
    """Write each episode to ``out/step-<step>-<tag><n>-<task>.jsonl``; returns the paths.

    ``tag`` tells apart the files of one step written by different processes (``r1-``).

    The files are trajectory files (``repogym show`` renders them) whose step records also
    hold ``prompt_ids``, ``completion_ids``, ``logprobs`` and ``prompt_obs_mask``, and whose
    summary holds ``final_ids``: concatenated in order they are the training sequence.
    """
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, ep in enumerate(episodes):
        path = folder / f"step-{step:05d}-{tag}{n:03d}-{ep.task}.jsonl"
        lines = [json.dumps(r, default=str) for r in _records(ep, step, decode)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def read_rollout(path: str | Path) -> Episode:
    """The episode of a rollout file (tokens, logprobs, masks, outcome).

    Raises:
        ValueError: If the file is not a rollout file.
    """
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    if not rows or rows[0].get("format") != ROLLOUT_FORMAT:
        raise ValueError(
            f"{path} is not a rollout file (format {ROLLOUT_FORMAT!r}). Fix: pass "
            "a file from OUT/rollouts of `repogym train`"
        )
    header, summary = rows[0], rows[-1]
    ep = Episode(
        task=header["task"], prompt=header.get("observation", ""), group=int(header.get("group", 0))
    )
    for r in rows[1:-1]:
        ep.turns.append(
            Turn(
                r["prompt_ids"],
                r["completion_ids"],
                r["logprobs"],
                r.get("prompt_obs_mask") or [],
                r.get("env_action", ""),
                r.get("observation", ""),
                r.get("finish_reason", "stop"),
            )
        )
    ep.final_ids, ep.final_obs_mask = summary["final_ids"], summary.get("final_obs_mask") or []
    ep.reward, ep.resolved = float(summary["reward"]), bool(summary["resolved"])
    ep.infra_error, ep.graded = summary.get("infra_error"), bool(summary.get("graded"))
    ep.masked = bool(summary.get("loss_masked"))
    return ep
