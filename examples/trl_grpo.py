"""TRL's GRPOTrainer on repogym tasks, on a CPU, with a tiny offline chat model.

Each rollout is a real repogym episode in a bwrap sandbox: the model calls the env's tools
(bash, read, write, edit, submit) through its chat template, and the reward comes from the
task's hidden tests via repogym's grader (``RepoGymToolEnv.get_reward``). The tiny model is
randomly initialised and then taught two tool calls in a few supervised steps (``--warm-start``):
a one-line partial fix and a submit, meant to give groups different rewards (``--reward-mode
partial``: the fraction of hidden tests passed) and so a non-zero GRPO loss. KNOWN GAP: under
GRPOTrainer the warm-started model still logs tools/call_frequency 0 and loss 0 (2026-12-02,
``--steps 2 --generations 4``); outside TRL it emits both calls. The point is the plumbing,
not a claim about learning. A first episode
driven by the gold patch through the same adapter shows a reward of 1.0.

    python examples/trl_grpo.py                 # a few GRPO steps (minutes on a CPU)
    python examples/trl_grpo.py --steps 2 --tasks retry-zero
    python examples/trl_grpo.py --env-server http://127.0.0.1:8000   # sandboxes over there

Needs ``pip install 'repogym[trl]' 'torch==2.13.0'``.
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


# Tool calls in the Qwen3 chat template's format, which TRL parses into calls of the env's
# methods: a one-line partial fix of retry-zero (more hidden tests pass) and a plain submit.
WARM_CALLS = (
    ('<tool_call>\n{"name": "bash", "arguments": {"command": '
     '"sed -i \'s/max(retries, 1) + 1/retries + 1/\' retry.py"}}\n</tool_call>'),
    '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>',
)


def tiny_chat_model(warm_start: int = 0, head: str | None = None) -> tuple:
    """A ~0.5M-parameter Qwen2 and a BPE tokenizer, built offline, with Qwen3's chat template
    (which renders tool calls, so TRL can parse them). ``warm_start`` supervised steps on
    :data:`WARM_CALLS` after ``head`` (a rendered prompt, as TRL renders it: tools in the system
    turn, the env's first observation) make it emit those calls, so GRPO sees tool calls and
    rewards that differ within a group."""
    import torch
    from trl.chat_template_utils import qwen3_chat_template

    from repogym.agents.toy.tiny import TinyConfig, build_tiny

    model, tok = build_tiny(config=TinyConfig(max_len=4096), extra_corpus=list(WARM_CALLS))
    tok.chat_template = qwen3_chat_template
    tok.eos_token = "<|im_end|>"
    model.generation_config.eos_token_id = tok.eos_token_id
    if warm_start:
        head = head or tok.apply_chat_template([{"role": "user", "content": "Fix the bug."}],
                                               add_generation_prompt=True, tokenize=False)
        head_ids = tok(head, add_special_tokens=False)["input_ids"]
        calls = [tok(f"{c}<|im_end|>", add_special_tokens=False)["input_ids"] for c in WARM_CALLS]
        width = len(head_ids) + max(map(len, calls))
        ids = torch.full((len(calls), width), tok.pad_token_id)
        labels = torch.full((len(calls), width), -100)  # learn the calls, not the prompt
        for i, c in enumerate(calls):
            ids[i, :len(head_ids) + len(c)] = torch.tensor(head_ids + c)
            labels[i, len(head_ids):len(head_ids) + len(c)] = torch.tensor(c)
        batch = {"input_ids": ids, "attention_mask": (labels != -100) | (torch.arange(width)
                                                                        < len(head_ids))}
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        model.train()
        for _ in range(warm_start):
            loss = model(**batch, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"warm start: {warm_start} steps, loss {loss.item():.3f}")
    return model, tok


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
    p.add_argument("--steps", type=int, default=4, help="GRPO optimizer steps")
    p.add_argument("--tasks", nargs="+", default=["retry-zero", "empty-mean"])
    p.add_argument("--generations", type=int, default=4, help="rollouts per prompt (group)")
    p.add_argument("--env-server", help="a `repogym serve` URL to run the sandboxes on")
    p.add_argument("--warm-start", type=int, default=150,
                   help="supervised steps teaching the tiny model the tool-call format (0: none)")
    p.add_argument("--reward-mode", default="partial", choices=("binary", "partial", "f2p"))
    args = p.parse_args()

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from repogym.integrations.trl import RepoGymToolEnv, task_rows

    results: list[dict] = []
    RepoGymToolEnv.remote, RepoGymToolEnv.results, RepoGymToolEnv.max_steps = (
        args.env_server, results, 3)
    RepoGymToolEnv.reward_mode = args.reward_mode
    print(f"oracle through the adapter on {args.tasks[0]}: reward {oracle_check(args.tasks[0])}")
    results.clear()

    rows = [r for r in task_rows() if r["task"] in args.tasks]
    head = None
    if args.warm_start:  # the prompt TRL will show: tools in the system turn, first observation
        from trl.chat_template_utils import qwen3_chat_template

        probe = RepoGymToolEnv()
        obs = probe.reset(**rows[0])
        messages = [dict(m) for m in rows[0]["prompt"]]
        messages[-1]["content"] = f"{messages[-1]['content']}{obs}"
        tools = [probe.bash, probe.read, probe.write, probe.edit, probe.submit]
        _, render = tiny_chat_model(0)
        render.chat_template = qwen3_chat_template
        head = render.apply_chat_template(messages, tools=tools, add_generation_prompt=True,
                                          tokenize=False)
    model, tok = tiny_chat_model(args.warm_start, head)
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-grpo-"), use_cpu=True, bf16=False,
        report_to="none", max_steps=args.steps, learning_rate=1e-4, logging_steps=1,
        per_device_train_batch_size=args.generations, num_generations=args.generations,
        max_completion_length=96, max_tool_calling_iterations=2, save_strategy="no",
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
            print(f"step {log['step']}: reward/mean {log['reward']:.3f}  "
                  f"tool calls/mean {log.get('tools/call_frequency', 0):.2f}  "
                  f"loss {log.get('loss', float('nan')):.6g}")
    graded = [r for r in results if r["reward"] is not None]
    passed = sum(s == "passed" for r in graded for s in r["tests"].values())
    total = sum(len(r["tests"]) for r in graded)
    print(f"{len(results)} episodes graded by repogym: mean reward "
          f"{sum(r['reward'] for r in graded) / max(1, len(graded)):.3f}, hidden tests passed "
          f"{passed}/{total}, infra errors {len(results) - len(graded)}")


if __name__ == "__main__":
    main()
