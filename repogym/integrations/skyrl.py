"""SkyRL-Gym: repogym tasks as a ``BaseTextEnv`` (needs ``repogym[skyrl]``).

Importing this module registers ``"repogym"`` in skyrl-gym's registry, so a SkyRL dataset
row with ``env_class: repogym`` and ``extra_info: {"task": "<id>"}`` (see :func:`skyrl_rows`)
is played by :class:`RepoGymTextEnv`: ``init`` resets the task and returns the prompt with
the env's first observation, each ``step`` takes the model's raw text (one tool call, as
RepoEnv parses it), and the last step's reward comes from the hidden tests.

verl: see :mod:`repogym.integrations.verl` (an ``AgentLoopBase`` over the same env).
"""

from __future__ import annotations

from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from repogym.envs import make_suite_env

ENV_ID = "repogym"
_METRIC_KEYS = ("resolved", "steps", "reward")


def skyrl_rows(split: str | None = None) -> list[dict[str, Any]]:
    """SkyRL dataset rows (one per task): ``prompt``, ``env_class``, ``reward_spec``,
    ``extra_info``."""
    from repogym.integrations.trl import task_rows

    return [
        {
            "prompt": r["prompt"],
            "env_class": ENV_ID,
            "reward_spec": {"method": "rule", "ground_truth": None},
            "extra_info": {"task": r["task"], "split": r["split"]},
        }
        for r in task_rows(split)
    ]


class RepoGymTextEnv(BaseTextEnv):
    """One repogym episode as a SkyRL text env.

    Args:
        env_config: Optional mapping with ``remote`` (a ``repogym serve`` URL), ``sandbox``,
            ``reward_mode``, ``max_steps``.
        extras: The dataset row's fields; ``extra_info.task`` (or ``task``) names the task;
            ``max_turns`` (or ``extra_info.max_turns``), as skyrl-train passes it, is the
            episode's step budget (it wins over ``env_config.max_steps``): the last turn is
            graded, as at a step budget in repogym.
    """

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__()
        config = dict(env_config or {})
        extras = extras or {}
        self.task = (extras.get("extra_info") or {}).get("task") or extras.get("task")
        if not self.task:
            raise ValueError(
                "the row names no task. Fix: put extra_info = {'task': '<id>'} "
                "in the dataset row (see repogym.integrations.skyrl.skyrl_rows)"
            )
        self.seed = (extras.get("extra_info") or {}).get("seed")
        budget = _max_turns(extras) or config.get("max_steps")
        remote = config.get("remote")
        local = {} if remote else {"sandbox": config.get("sandbox", "bwrap")}
        self.env = make_suite_env(
            remote=remote,
            reward_mode=config.get("reward_mode", "binary"),
            max_steps=budget,
            **local,
        )
        self.max_turns = int(budget or 30)
        self._metrics: dict[str, Any] = {}

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        obs, info = self.env.reset(seed=self.seed, options={"task": self.task})
        self.turns = 0
        self.max_turns = int(info.get("max_steps") or self.max_turns)
        messages = [dict(m) for m in prompt]
        if messages and messages[-1].get("role") == "user":
            messages[-1]["content"] = f"{messages[-1]['content']}\n\n{obs}"
        else:
            messages.append({"role": "user", "content": obs})
        return messages, {"task": self.task}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """One turn. ``metadata`` is the env's step info plus ``loss_masked``: True when the
        sandbox or grader failed (``infra_error``), the episode then ends (``done``) and is
        to be left out of the loss, not scored (its ``reward`` is 0.0 only because the
        output's type wants a float)."""
        self.turns += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        done = bool(terminated or truncated)
        masked = bool(info.get("infra_error"))
        if done:
            self._metrics = {
                "resolved": float(bool(info.get("resolved"))),
                "steps": self.turns,
                "reward": 0.0 if masked else float(reward),
                "infra_error": float(masked),
            }
        return BaseTextEnvStepOutput(
            observations=[] if done else [{"role": "user", "content": obs}],
            reward=0.0 if masked else float(reward),
            done=done,
            metadata={**info, "loss_masked": masked},
            postprocessed_action=action,
        )

    def get_metrics(self) -> dict[str, Any]:
        return dict(self._metrics)

    def close(self) -> None:
        self.env.close()


def _max_turns(extras: dict[str, Any]) -> int | None:
    """skyrl-train's ``max_turns`` of a row (top level or in ``extra_info``), or None."""
    value = extras.get("max_turns", (extras.get("extra_info") or {}).get("max_turns"))
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or int(value) != value
        or value < 1
    ):
        raise ValueError(f"max_turns={value!r}. Fix: give a whole number of turns >= 1")
    return int(value)


def register() -> None:
    """Register ``repogym`` with skyrl-gym (done on import; safe to call again)."""
    if ENV_ID not in skyrl_gym.registry:
        skyrl_gym.register(id=ENV_ID, entry_point="repogym.integrations.skyrl:RepoGymTextEnv")


register()
