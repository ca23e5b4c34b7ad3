"""TRL's GRPOTrainer on repogym tasks, on a CPU, with a tiny offline chat model (a toy demo).

A demo of the plumbing, not of learning: the model is a ~0.5M-parameter Qwen2, randomly
initialised and then taught two scripted rollouts in a few supervised steps. Each rollout
is a real repogym episode in a bwrap sandbox: the env's methods (bash, read, write, edit,
submit) are the model's native tools, listed by Qwen3's chat template; TRL parses the
template's ``<tool_call>`` blocks from the completions (``tokenizer.parse_response``), runs
them as the env's methods and feeds their output back as tool responses, and the reward is
the fraction of the task's hidden tests that pass (``RepoGymToolEnv.get_reward``, repogym's
grader, ``--reward-mode partial``).

The warm start (``--warm-start``) teaches, on exactly the prompt GRPOTrainer renders (tools
in its order, its prefix-preserving training template, the env's first observation), two
rollouts of retry-zero with equal weight: a one-line partial fix then a submit (3/4 hidden
tests pass: reward 0.75), and a plain submit (2/4: 0.5). Sampling at temperature 1 mixes them
within a group, so the rewards differ, the advantages are non-zero and so is the loss. A first
episode driven by the gold patch through the same adapter shows a reward of 1.0.

    python examples/trl_grpo.py                 # 3 GRPO steps, about two minutes on a CPU
    python examples/trl_grpo.py --steps 1 --generations 4
    python examples/trl_grpo.py --env-server http://127.0.0.1:8000   # sandboxes over there

Needs ``pip install 'repogym[trl]' 'torch==2.13.0'``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


# Tool calls in the Qwen3 chat template's format, which TRL parses into calls of the env's
# methods: a one-line partial fix of retry-zero (one more hidden test passes) and a submit.
FIX = "sed -i 's/max(retries, 1) + 1/retries + 1/' retry.py"
WARM_CALLS = (
    f'<tool_call>\n{{"name": "bash", "arguments": {{"command": "{FIX}"}}}}\n</tool_call>',
    '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>',
)
# The scripted rollouts the warm start teaches, as (call, tool name, arguments) turns.
SCRIPTS = (
    ((WARM_CALLS[0], "bash", {"command": FIX}), (WARM_CALLS[1], "submit", {})),
    ((WARM_CALLS[1], "submit", {}),),
)


def trl_template(tok: Any) -> str | None:
    """The chat template GRPOTrainer renders with: the tokenizer's own if it is prefix
    preserving, else TRL's training version of it (as ``GRPOTrainer.__init__`` picks)."""
    from trl.chat_template_utils import (
        get_training_chat_template,
        is_chat_template_prefix_preserving,
    )

    return None if is_chat_template_prefix_preserving(tok) else get_training_chat_template(tok)


def trl_prompt(tok: Any, row: dict[str, Any], env: Any) -> list[int]:
    """The prompt's token ids as GRPOTrainer builds them for ``row``: the env's first
    observation appended to the last message, the env's tools (in TRL's order) in the system
    turn, TRL's template, the generation prompt. ``env`` is reset as TRL resets it."""
    from repogym.integrations.trl import tools_of

    messages = [dict(m) for m in row["prompt"]]
    messages[-1]["content"] += env.reset(**row)
    return tok.apply_chat_template(messages, tools=tools_of(env), chat_template=trl_template(tok),
                                   add_generation_prompt=True, tokenize=True, return_dict=False)


def tool_suffix_ids(tok: Any, name: str, content: str) -> list[int]:
    """The tokens GRPOTrainer appends after a tool call (``_get_tool_suffix_ids``): the end of
    the assistant turn, the tool response, the next generation prompt."""
    template = trl_template(tok)
    call = [{"role": "user", "content": "dummy"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {}}}]}]
    prefix = tok.apply_chat_template(call, chat_template=template, tokenize=True, return_dict=False)
    full = tok.apply_chat_template(call + [{"role": "tool", "name": name, "content": content}],
                                   chat_template=template, add_generation_prompt=True,
                                   tokenize=True, return_dict=False)
    end = max(i for i, t in enumerate(prefix) if t == tok.eos_token_id)
    assert full[:end + 1] == prefix[:end + 1], "the tool suffix is not a continuation"
    return full[end + 1:]


def tiny_chat_model(corpus: list[str] = ()) -> tuple:
    """A ~0.5M-parameter Qwen2 and a BPE tokenizer, built offline, with Qwen3's chat template
    (which lists tools and renders tool calls, so TRL can parse them). ``corpus``: texts
    the tokenizer should encode compactly (the rendered prompts)."""
    from trl.chat_template_utils import qwen3_chat_template

    from repogym.agents.toy.tiny import TinyConfig, build_tiny

    model, tok = build_tiny(vocab_size=2048, config=TinyConfig(max_len=4096),
                            extra_corpus=[*WARM_CALLS, *corpus])
    tok.chat_template = qwen3_chat_template
    tok.eos_token = "<|im_end|>"  # Qwen3's end of turn: TRL stops generating a turn there
    model.generation_config.eos_token_id = tok.eos_token_id
    model.config.eos_token_id = tok.eos_token_id
    return model, tok


def warm_start(model: Any, tok: Any, rows: list[dict[str, Any]], steps: int,
               env_cls: type) -> float:
    """Teach the model :data:`SCRIPTS` on each row's prompt as GRPOTrainer renders it: the
    calls are the labels; the tool responses (from a real episode) and the prompt are not."""
    import torch

    seqs = []
    for row in rows:
        env = env_cls()
        for script in SCRIPTS:
            ids = trl_prompt(tok, row, env)
            labels = [-100] * len(ids)
            for call, name, args in script:
                c = tok(call + tok.eos_token, add_special_tokens=False)["input_ids"]
                ids, labels = ids + c, labels + c
                if name != "submit":
                    s = tool_suffix_ids(tok, name, getattr(env, name)(**args))
                    ids, labels = ids + s, labels + [-100] * len(s)
            seqs.append((ids, labels))
    width = max(len(i) for i, _ in seqs)
    ids = torch.full((len(seqs), width), tok.pad_token_id)
    labels = torch.full((len(seqs), width), -100)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for k, (i, lab) in enumerate(seqs):  # right-padded
        ids[k, :len(i)], labels[k, :len(i)], mask[k, :len(i)] = (
            torch.tensor(i), torch.tensor(lab), 1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return loss.item()


def oracle_check(task_id: str) -> float:
    """Drive the adapter with the task's gold patch: the grader must give 1.0."""
    from repogym.integrations.trl import RepoGymToolEnv
    from repogym.scenarios.registry import registered_tasks

    env = RepoGymToolEnv()
    env.reset(task=task_id, seed=0)
    env.write("/tmp/fix.patch", registered_tasks()[task_id].solution_patch.read_text())
    env.bash("git apply /tmp/fix.patch")
    env.submit()
    return env.get_reward()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=3, help="GRPO optimizer steps")
    p.add_argument("--tasks", nargs="+", default=["retry-zero"],
                   help="tasks (the scripted fix is retry-zero's; elsewhere it fails)")
    p.add_argument("--generations", type=int, default=4, help="rollouts per prompt (group)")
    p.add_argument("--env-server", help="a `repogym serve` URL to run the sandboxes on")
    p.add_argument("--warm-start", type=int, default=80,
                   help="supervised steps teaching the tiny model the scripted rollouts (0: none)")
    p.add_argument("--reward-mode", default="partial", choices=("binary", "partial", "f2p"))
    args = p.parse_args()

    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from repogym.integrations.trl import RepoGymToolEnv, task_rows

    torch.manual_seed(0)
    results: list[dict] = []
    RepoGymToolEnv.remote, RepoGymToolEnv.results, RepoGymToolEnv.max_steps = (
        args.env_server, results, 3)
    RepoGymToolEnv.reward_mode = args.reward_mode
    print(f"oracle through the adapter on {args.tasks[0]}: reward {oracle_check(args.tasks[0])}")

    rows = [r for r in task_rows() if r["task"] in args.tasks]
    # The prompts as TRL renders them (the text does not depend on the vocabulary), so that
    # the tokenizer learns to encode them compactly.
    _, render = tiny_chat_model()
    probe = RepoGymToolEnv()
    corpus = [render.decode(trl_prompt(render, r, probe)) for r in rows]
    model, tok = tiny_chat_model(corpus)
    print(f"prompt: {len(trl_prompt(tok, rows[0], probe))} tokens")
    if args.warm_start:
        loss = warm_start(model, tok, rows, args.warm_start, RepoGymToolEnv)
        print(f"warm start: {args.warm_start} steps, loss {loss:.3f}")
    RepoGymToolEnv.close_all()
    results.clear()

    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-grpo-"), use_cpu=True, bf16=False,
        report_to="none", max_steps=args.steps, learning_rate=1e-4, logging_steps=1,
        per_device_train_batch_size=args.generations, num_generations=args.generations,
        max_completion_length=160, max_tool_calling_iterations=2, save_strategy="no",
        temperature=1.0, seed=0, dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, processing_class=tok, args=config,
                          train_dataset=Dataset.from_list(rows * args.steps * 2),
                          environment_factory=RepoGymToolEnv)
    try:
        trainer.train()
    finally:
        RepoGymToolEnv.close_all()
    for log in trainer.state.log_history:
        if "reward" in log:
            print(f"step {log['step']}: tools/call_frequency {log['tools/call_frequency']:.2f}  "
                  f"reward {log['reward']:.3f}  reward_std {log['reward_std']:.3f}  "
                  f"loss {log['loss']:.6g}  grad_norm {log['grad_norm']:.4g}")
    graded = [r for r in results if r["reward"] is not None]
    passed = sum(s == "passed" for r in graded for s in r["tests"].values())
    total = sum(len(r["tests"]) for r in graded)
    print(f"{len(results)} episodes graded by repogym: rewards "
          f"{sorted(round(r['reward'], 3) for r in graded)}, hidden tests passed "
          f"{passed}/{total}, infra errors {len(results) - len(graded)}")


if __name__ == "__main__":
    main()
