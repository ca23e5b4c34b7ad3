"""One episode format: the chat template, exact tokens appended turn by turn, the loud prefix
check, stops, and the harness ``hf`` agent rendering exactly what the trainers render."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from repogym.agents.chat import ChatFormat, ChatFormatError, Stops
from repogym.agents.engines import HFEngine, Request
from repogym.agents.policy import load_policy
from repogym.harness.baselines import make_agent


@pytest.fixture(scope="module")
def tok(qwen_dir: Path):
    return AutoTokenizer.from_pretrained(qwen_dir, local_files_only=True)


def test_turns_render_with_the_chatml_template_and_tokens_only_grow(tok) -> None:
    fmt = ChatFormat(tok)
    assert fmt.observation_role == "tool" and fmt.end_of_turn == tok.convert_tokens_to_ids(
        "<|im_end|>"
    )
    dlg = fmt.start("Fix the bug in retry.py")
    first = fmt.decode(dlg.pending)
    assert first.startswith("<|im_start|>system\nYou are a software engineer")
    assert first.endswith(
        "<|im_start|>user\nFix the bug in retry.py<|im_end|>\n<|im_start|>assistant\n"
    )
    completion = fmt.encode('{"tool": "bash", "args": {"command": "ls"}}') + [fmt.end_of_turn]
    assert dlg.add_completion(completion) == ['{"tool": "bash", "args": {"command": "ls"}}']
    before = list(dlg.ids)
    dlg.observe("retry.py\ntests/\n")
    assert dlg.ids == before  # nothing generated is re-tokenised
    assert fmt.decode(dlg.pending) == (
        "\n<|im_start|>tool\nretry.py\ntests/\n<|im_end|>\n<|im_start|>assistant\n"
    )
    obs = [t for t, m in zip(dlg.pending, dlg.pending_mask, strict=True) if m]
    assert fmt.decode(obs) == "retry.py\ntests/\n"
    # The whole conversation, rendered again, is exactly the tokens' text.
    full = fmt.render(dlg.messages, generation_prompt=True)
    assert fmt.decode(dlg.ids + dlg.pending) == full


def test_a_completion_cut_by_the_token_budget_gets_the_end_of_turn_as_scaffold(tok) -> None:
    fmt = ChatFormat(tok)
    dlg = fmt.start("task")
    dlg.add_completion(fmt.encode("I will look"))  # no end-of-turn token: cut by max tokens
    dlg.observe("ok")
    assert fmt.decode(dlg.pending).startswith("<|im_end|>\n<|im_start|>tool\nok")


def _rewriting(tok):
    """A ChatML template that rewrites assistant turns (upper-cases them) and trims them."""
    tok = AutoTokenizer.from_pretrained(tok.name_or_path, local_files_only=True)
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        "{{ m['content'] | trim | upper if m['role'] == 'assistant' "
        "else m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return tok


def test_a_template_that_rewrites_history_falls_back_to_delta_rendering(tok) -> None:
    fmt = ChatFormat(_rewriting(tok))
    dlg = fmt.start("task")
    dlg.add_completion(fmt.encode("ls -la \n") + [fmt.end_of_turn])
    before = list(dlg.ids)
    dlg.observe("out")
    assert dlg.delta_rendered and dlg.ids == before  # the generated tokens are kept as they are
    assert fmt.decode(dlg.pending) == "\n<|im_start|>tool\nout<|im_end|>\n<|im_start|>assistant\n"
    obs = [t for t, m in zip(dlg.pending, dlg.pending_mask, strict=True) if m]
    assert fmt.decode(obs) == "out"
    dlg.add_completion(fmt.encode("cat a.py"))  # cut by the token budget: no end of turn
    dlg.observe("x = 1\n", final=True)
    assert fmt.decode(dlg.pending) == "<|im_end|>\n<|im_start|>tool\nx = 1\n<|im_end|>\n"
    with pytest.raises(ChatFormatError, match="rewrites earlier turns"):
        strict = ChatFormat(_rewriting(tok), strict=True).start("task")
        strict.add_completion(fmt.encode("ls -la \n") + [fmt.end_of_turn])
        strict.observe("out")


def test_fallback_template_without_a_chat_template(tok) -> None:
    tok = AutoTokenizer.from_pretrained(tok.name_or_path, local_files_only=True)
    tok.chat_template = None
    fmt = ChatFormat(tok)
    assert fmt.observation_role == "tool" and fmt.end_of_turn == tok.eos_token_id
    dlg = fmt.start("hello")
    assert fmt.decode(dlg.pending).endswith("User: hello\n\nAssistant: ")
    dlg.add_completion(fmt.encode("ls") + [tok.eos_token_id])
    dlg.observe("a.py")
    assert fmt.decode(dlg.pending) == "\n\nTool: a.py\n\nAssistant: "


def test_multi_token_stop_strings_and_closing_fence() -> None:
    stops = Stops(frozenset({7}), ("</tool_call>",), closing_fence=True)
    assert stops.hit('<tool_call>{"name": "bash"}</tool_call>')
    assert not stops.hit("```bash\nls\n") and stops.hit("```bash\nls\n```")
    assert not stops.hit("<tool_call>{")


def test_engine_ends_a_completion_at_the_token_that_completes_a_stop_string(qwen_dir) -> None:
    policy = load_policy(qwen_dir, device="cpu")
    engine = HFEngine(policy, Stops(frozenset(), ("e",)))
    torch.manual_seed(0)
    gens = engine.generate([Request(i, policy.encode("hello"), 30) for i in range(6)])
    assert any(g.finish_reason == "stop" for g in gens)
    for g in gens:
        text = policy.tokenizer.decode(g.token_ids)
        if g.finish_reason == "stop":
            assert "e" in text and "e" not in policy.tokenizer.decode(g.token_ids[:-1])
        else:
            assert len(g.token_ids) == 30 and "e" not in text


def test_hf_agent_renders_exactly_the_trainers_prompt(qwen_dir: Path, tok) -> None:
    agent = make_agent("hf", model=str(qwen_dir), max_new_tokens=8)
    agent.reset({"seed": 0})
    action = agent.act("Fix the bug.")
    first = list(agent.dialogue.ids)
    fmt = ChatFormat(tok)
    dlg = fmt.start("Fix the bug.")
    assert agent.dialogue.ids[: len(dlg.pending)] == dlg.pending  # same first prompt, token ids
    assert agent.messages[-1] == {"role": "assistant", "content": action}
    agent.act("retry.py\n")
    dlg.add_completion(first[len(dlg.pending) :])
    dlg.observe("retry.py\n")
    assert agent.dialogue.ids[: len(dlg.ids) + len(dlg.pending)] == dlg.ids + dlg.pending


def test_tool_schemas_reach_templates_that_render_tools(tok) -> None:
    tok = AutoTokenizer.from_pretrained(tok.name_or_path, local_files_only=True)
    tok.chat_template = (
        "{% if tools %}<tools>{% for t in tools %}{{ t['function']['name'] }} "
        "{% endfor %}</tools>\n{% endif %}" + tok.chat_template
    )
    fmt = ChatFormat(tok)
    text = fmt.decode(fmt.start("task").pending)
    assert text.startswith("<tools>bash read write edit submit </tools>\n<|im_start|>system")
    assert "<tools>" not in fmt.decode(ChatFormat(tok, tools=None).start("task").pending)
