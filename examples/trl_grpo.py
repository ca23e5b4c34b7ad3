"""TRL's GRPOTrainer on repogym tasks, on a CPU, with a tiny offline chat model (a toy demo).

A demo of the plumbing, not of learning: the model is a randomly initialised ~0.5M-parameter
Qwen2 with Qwen3's chat template. Each rollout is a real repogym episode in a bwrap sandbox:
the env's methods (bash, read, write, edit, submit) are the model's native tools, which the
template lists in the system turn; TRL parses the template's ``<tool_call>`` blocks from the
completions (``tokenizer.parse_response``), runs them as the env's methods, feeds their
output back as tool responses, and takes the reward from ``RepoGymToolEnv.get_reward``:
with ``--reward-mode partial``, the fraction of retry-zero's hidden tests that pass.

Such a model cannot write a tool call by itself, so its decoding is scripted
(``repogym.integrations.trl.script_model``): every turn is one of two calls in Qwen3's format,
a one-line partial fix (3/4 hidden tests then pass: reward 0.75) or a submit (2/4 as the
repository stands: 0.5), and the model's sampled logits choose which. The choice differs
within a group, so the rewards do, and the advantages and the loss are non-zero. (Teaching
the tiny model the calls by supervised steps instead did not give reliable calls within a
few CPU minutes.) A first episode driven by the gold patch through the adapter shows 1.0.

    python examples/trl_grpo.py                 # 3 GRPO steps, a minute or two on a CPU
    python examples/trl_grpo.py --steps 1 --generations 8
    python examples/trl_grpo.py --env-server http://127.0.0.1:8000   # sandboxes over there

The real path: ``--model DIR``, a local Hugging Face chat model whose template TRL can parse
tool calls from (Qwen3, Qwen2.5, Llama 3.x, ...). Its decoding is not scripted, it trains on
a GPU when there is one (bf16), with longer completions and more tool turns::

    python examples/trl_grpo.py --model /models/Qwen3-0.6B --tasks retry-zero slugify-unicode \
        --generations 8 --steps 50

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
CALLS = (
    f'<tool_call>\n{{"name": "bash", "arguments": {{"command": "{FIX}"}}}}\n</tool_call>',
    '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>',
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
    return tok.apply_chat_template(
        messages,
        tools=tools_of(env),
        chat_template=trl_template(tok),
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )


def tiny_chat_model(corpus: list[str] = ()) -> tuple:
    """A ~0.5M-parameter Qwen2 and a BPE tokenizer, built offline, with Qwen3's chat template
    (which lists tools and renders tool calls, so TRL can parse them). ``corpus``: texts
    the tokenizer should encode compactly (the rendered prompts)."""
    from trl.chat_template_utils import qwen3_chat_template

    from repogym.agents.toy.tiny import TinyConfig, build_tiny

    model, tok = build_tiny(
        vocab_size=2048, config=TinyConfig(max_len=4096), extra_corpus=[*CALLS, *corpus]
    )
    tok.chat_template = qwen3_chat_template
    tok.eos_token = "<|im_end|>"  # Qwen3's end of turn: TRL stops generating a turn there
    model.generation_config.eos_token_id = tok.eos_token_id
    model.config.eos_token_id = tok.eos_token_id
    return model, tok


def oracle_check(env_cls: type, task_id: str) -> float:
    """Drive the adapter with the task's gold patch: the grader must give 1.0."""
    from repogym.scenarios.registry import registered_tasks

    env = env_cls()
    env.reset(task=task_id, seed=0)
    env.write("/tmp/fix.patch", registered_tasks()[task_id].solution_patch.read_text())
    env.bash("git apply /tmp/fix.patch")
    env.submit()
    return env.get_reward()


def pretrained(path: str) -> tuple:
    """A local chat model and its tokenizer (the real path: nothing is scripted)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    if not tok.chat_template:
        raise SystemExit(
            f"--model {path}: its tokenizer has no chat template, so TRL cannot "
            "list the tools or parse tool calls. Fix: use a chat (instruct) model"
        )
    return AutoModelForCausalLM.from_pretrained(path, torch_dtype="auto"), tok


def train(
    steps: int = 3,
    tasks: tuple[str, ...] = ("retry-zero",),
    generations: int = 4,
    env_server: str | None = None,
    reward_mode: str = "partial",
    scripted: bool = True,
    model_path: str | None = None,
    max_completion_length: int | None = None,
) -> tuple[list[dict], list[dict]]:
    """Run GRPOTrainer; returns its ``log_history`` and the episodes repogym graded. With
    ``model_path`` a local chat model trains unscripted (``scripted`` is ignored)."""
    import torch

    from repogym.integrations.trl import RepoGymToolEnv, script_model, task_rows

    torch.manual_seed(0)
    results: list[dict] = []
    env_cls = type(
        "RepoGymToolEnv",
        (RepoGymToolEnv,),  # TRL names the reward after it
        {
            "remote": env_server,
            "results": results,
            "max_steps": 3 if model_path is None else 20,
            "reward_mode": reward_mode,
        },
    )
    binary = type("OracleEnv", (env_cls,), {"reward_mode": "binary", "results": None})
    print(f"oracle through the adapter on {tasks[0]}: reward {oracle_check(binary, tasks[0])}")

    rows = [r for r in task_rows() if r["task"] in tasks]
    if missing := set(tasks) - {r["task"] for r in rows}:
        raise SystemExit(f"--tasks: no such task {sorted(missing)} (see `repogym tasks`)")
    if model_path is not None:
        model, tok = pretrained(model_path)
        env_cls.close_all()
        return _run(
            model,
            tok,
            rows,
            env_cls,
            steps,
            generations,
            max_completion_length or 1024,
            tool_turns=10,
            lr=1e-6,
        )
    # The prompts as TRL renders them (the text does not depend on the vocabulary), so that
    # the tokenizer learns to encode them compactly.
    _, render = tiny_chat_model()
    probe = env_cls()
    corpus = [render.decode(trl_prompt(render, r, probe)) for r in rows]
    model, tok = tiny_chat_model(corpus)
    print(f"prompt: {len(trl_prompt(tok, rows[0], probe))} tokens")
    if scripted:
        script_model(model, tok, CALLS)
    env_cls.close_all()
    results.clear()
    return _run(
        model,
        tok,
        rows,
        env_cls,
        steps,
        generations,
        max_completion_length or 160,
        tool_turns=2,
        lr=1e-4,
    )


def _run(
    model: Any,
    tok: Any,
    rows: list[dict],
    env_cls: type,
    steps: int,
    generations: int,
    max_completion_length: int,
    tool_turns: int,
    lr: float,
) -> tuple[list[dict], list[dict]]:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    gpu = torch.cuda.is_available()
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-grpo-"),
        use_cpu=not gpu,
        bf16=gpu,
        report_to="none",
        max_steps=steps,
        learning_rate=lr,
        logging_steps=1,
        per_device_train_batch_size=generations,
        num_generations=generations,
        max_completion_length=max_completion_length,
        max_tool_calling_iterations=tool_turns,
        save_strategy="no",
        temperature=1.0,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tok,
        args=config,
        train_dataset=Dataset.from_list(rows * steps * 2),
        environment_factory=env_cls,
    )
    try:
        trainer.train()
    finally:
        env_cls.close_all()
    return trainer.state.log_history, env_cls.results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=3, help="GRPO optimizer steps")
    p.add_argument(
        "--tasks",
        nargs="+",
        default=["retry-zero"],
        help="tasks (the scripted fix is retry-zero's; elsewhere it fails)",
    )
    p.add_argument("--generations", type=int, default=4, help="rollouts per prompt (group)")
    p.add_argument("--env-server", help="a `repogym serve` URL to run the sandboxes on")
    p.add_argument(
        "--unscripted",
        action="store_true",
        help="let the tiny model generate freely (it then makes no tool calls)",
    )
    p.add_argument("--reward-mode", default="partial", choices=("binary", "partial", "f2p"))
    p.add_argument(
        "--model",
        metavar="DIR",
        help="a local Hugging Face chat model to train instead of the scripted toy",
    )
    p.add_argument(
        "--max-completion-length",
        type=int,
        help="tokens per completion, tool turns included (default 160; 1024 with --model)",
    )
    args = p.parse_args()

    logs, results = train(
        args.steps,
        tuple(args.tasks),
        args.generations,
        args.env_server,
        args.reward_mode,
        scripted=not args.unscripted,
        model_path=args.model,
        max_completion_length=args.max_completion_length,
    )
    for log in logs:
        if "reward" in log:
            print(
                f"step {log['step']}: tools/call_frequency {log['tools/call_frequency']:.2f}  "
                f"reward {log['reward']:.3f}  reward_std {log['reward_std']:.3f}  "
                f"loss {log['loss']:.6g}  grad_norm {log['grad_norm']:.4g}"
            )
    graded = [r for r in results if r["reward"] is not None]
    passed = sum(s == "passed" for r in graded for s in r["tests"].values())
    total = sum(len(r["tests"]) for r in graded)
    print(
        f"{len(results)} episodes graded by repogym: rewards "
        f"{sorted(round(r['reward'], 3) for r in graded)}, hidden tests passed "
        f"{passed}/{total}, infra errors {len(results) - len(graded)}"
    )


if __name__ == "__main__":
    main()
