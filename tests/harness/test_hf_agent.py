"""The ``hf`` agent with a tiny offline model (repogym.agents.toy.tiny), through a real episode."""

from __future__ import annotations

from pathlib import Path

import pytest

from repogym.harness.baselines import AgentError, make_agent
from repogym.harness.config import RunConfig
from repogym.harness.runner import run


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repogym.agents.toy.tiny import build_tiny, save_tiny

    model, tok = build_tiny(seed=0)
    return save_tiny(model, tok, tmp_path_factory.mktemp("tiny"))


def test_generates_with_the_chat_template_and_counts_tokens(tiny_dir: Path) -> None:
    agent = make_agent("hf", model=str(tiny_dir), max_new_tokens=8)
    agent.reset({"id": "t", "seed": 3})
    assert "<|im_start|>system" in agent.prompt_text()
    action = agent.act("Fix the bug.")
    assert isinstance(action, str)
    assert agent.usage["requests"] == 1 and agent.usage["prompt_tokens"] > 10
    assert 1 <= agent.usage["completion_tokens"] <= 8
    assert agent.messages[-1] == {"role": "assistant", "content": action}
    # Greedy decoding is deterministic: a fresh episode repeats the same reply.
    agent.reset({"id": "t", "seed": 3})
    assert agent.act("Fix the bug.") == action


def test_plain_prompt_without_a_chat_template(tiny_dir: Path) -> None:
    agent = make_agent("hf", model=str(tiny_dir), max_new_tokens=4, temperature=0.8)
    agent.tokenizer.chat_template = None
    agent.reset({"id": "t", "seed": 1})
    agent.messages.append({"role": "user", "content": "hello"})
    assert agent.prompt_text().startswith("System: You are")
    assert agent.prompt_text().endswith("User: hello\n\nAssistant: ")
    agent.messages.pop()
    assert isinstance(agent.act("hello"), str)


def test_runs_episodes_in_the_runner_with_long_prompts_cut_to_fit(
    tiny_dir: Path, tmp_path: Path
) -> None:
    # The statement + tool help exceed the 512-token context: the prompt is cut from the left.
    cfg = RunConfig(
        agent="hf",
        out=tmp_path / "hf",
        task_ids=["retry-zero"],
        max_steps=2,
        agent_args={"model": str(tiny_dir), "max_new_tokens": 16},
    )
    (row,) = run(cfg)
    assert row["agent_error"] is None and row["infra_error"] is None
    assert row["steps"] == 2 and row["truncated"] == "max_steps"
    assert row["usage"]["requests"] == 2 and row["tokens"] > 0
    assert row["usage"]["prompt_tokens"] <= 2 * (512 - 16)


def test_bad_model_folder_is_explained(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="cannot load a model"):
        make_agent("hf", model=str(tmp_path))
    with pytest.raises(AgentError, match="model=PATH"):
        make_agent("hf")
