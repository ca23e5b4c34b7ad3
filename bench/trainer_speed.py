"""Trainer speed: one GRPO update (forward, backward, optimiser step) of repogym's trainer
vs TRL's GRPOTrainer, on the same tiny model and the same batch, in one run.

Both sides get identical inputs: B sequences of P prompt + C completion tokens, advantages,
old logprobs (one iteration: ratios start at 1), the loss ``grpo`` (per-sequence token mean,
clip 0.2, no KL) and AdamW. TRL's side calls ``GRPOTrainer.compute_loss`` on the prepared
inputs (its generation and reward steps are not timed), then ``backward`` and the optimiser
step. Prints tokens/s of each and the ratio (repogym / TRL); medians over repeats.

TRL is only needed here (``pip install trl``), never at runtime.

    python bench/trainer_speed.py [--batch 16 --prompt 32 --completion 64 --repeats 10]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from collections.abc import Callable

import torch

from repogym.agents.grpo import GRPOConfig as RgConfig
from repogym.agents.grpo import GRPOTrainer as RgTrainer
from repogym.agents.policy import Batch, Policy
from repogym.agents.rollout import TextInterface
from repogym.agents.tiny import build_tiny


def make_batch(vocab: int, b: int, p: int, c: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random prompt/completion tokens, +-1 advantages, all tokens real."""
    g = torch.Generator().manual_seed(seed)
    return {
        "prompt_ids": torch.randint(10, vocab, (b, p), generator=g),
        "completion_ids": torch.randint(10, vocab, (b, c), generator=g),
        "advantages": torch.where(torch.rand(b, generator=g) > 0.5, 1.0, -1.0),
    }


def repogym_batch(data: dict[str, torch.Tensor], old_logp: torch.Tensor) -> Batch:
    """The same data as a repogym Batch (action mask on the completion)."""
    ids = torch.cat([data["prompt_ids"], data["completion_ids"]], 1)
    b, t = ids.shape
    p = data["prompt_ids"].shape[1]
    action = torch.zeros(b, t, dtype=torch.long)
    action[:, p:] = 1
    zeros = torch.zeros(b, dtype=torch.long)
    return Batch(
        input_ids=ids, attention_mask=torch.ones_like(ids), prompt_mask=1 - action,
        action_mask=action, obs_mask=torch.zeros_like(ids), old_logp=old_logp,
        turn_index=action - 1, rewards=data["advantages"].clone(),
        token_rewards=torch.zeros(b, t), valid=torch.ones(b, dtype=torch.bool), groups=zeros,
        terminated=torch.ones(b, dtype=torch.bool), truncated=torch.zeros(b, dtype=torch.bool),
        state_pos=torch.full((b, 1), p - 1), n_turns=torch.ones(b, dtype=torch.long),
        final_pos=torch.full((b,), t - 1),
    )  # fmt: skip


def ours(policy: Policy, data: dict[str, torch.Tensor], old: torch.Tensor) -> Callable[[], None]:
    """One repogym GRPO update on the batch (advantages given, no rollout)."""
    config = RgConfig(variant="grpo", epochs=1, recompute_old_logp=False, lr=1e-5,
                      micro_batch=len(old), max_grad_norm=1e9)  # fmt: skip
    trainer = RgTrainer(config, policy=policy, interface=TextInterface())
    batch = repogym_batch(data, old)

    def step() -> None:
        b = copy.copy(batch)
        b.extras = {"advantages": data["advantages"]}
        trainer._prepare(b)
        norm = {
            "global_num_tokens": b.action_mask.sum(),
            "global_num_seqs": torch.tensor(len(b)),
            "norm_len": float(old.shape[1]),
        }
        trainer._micro_step(b, norm)
        trainer.optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=True)

    return step


def theirs(
    model: torch.nn.Module, tok: object, data: dict[str, torch.Tensor], old_completion: torch.Tensor
) -> Callable[[], None]:
    """One TRL GRPOTrainer update (compute_loss, backward, AdamW step) on the batch."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    b, c = data["completion_ids"].shape
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-bench-"), use_cpu=True, bf16=False,
        report_to="none", per_device_train_batch_size=b, num_generations=b,
        max_completion_length=c, loss_type="grpo", beta=0.0, learning_rate=1e-5,
        epsilon=0.2, logging_steps=10**9,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=args, train_dataset=Dataset.from_dict({"prompt": ["x"] * b}),
        processing_class=tok,
    )  # fmt: skip
    model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by training_step() in a real run
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0)
    inputs = {
        "prompt_ids": data["prompt_ids"], "prompt_mask": torch.ones_like(data["prompt_ids"]),
        "completion_ids": data["completion_ids"],
        "completion_mask": torch.ones_like(data["completion_ids"]),
        "advantages": data["advantages"], "old_per_token_logps": old_completion,
        "num_items_in_batch": torch.tensor(float(b * c)),
    }  # fmt: skip

    def step() -> None:
        loss = trainer.compute_loss(model, dict(inputs))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def median_seconds(fn: Callable[[], None], repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--completion", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tok = build_tiny(seed=0)
    model.train()
    data = make_batch(len(tok), args.batch, args.prompt, args.completion)
    policy = Policy(copy.deepcopy(model), tok)
    ids = torch.cat([data["prompt_ids"], data["completion_ids"]], 1)
    with torch.no_grad():
        old = policy.score(ids, torch.ones_like(ids)).logp
    tokens = ids.numel()
    ours_s = median_seconds(ours(policy, data, old), args.repeats)
    trl_s = median_seconds(
        theirs(copy.deepcopy(model), tok, data, old[:, args.prompt :]), args.repeats
    )
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"tiny model {n_params / 1e6:.2f}M params; batch {args.batch} x "
        f"({args.prompt} prompt + {args.completion} completion) = {tokens} tokens; "
        f"{args.threads} thread(s); median of {args.repeats}"
    )
    print(f"repogym GRPO update: {ours_s * 1e3:8.1f} ms  {tokens / ours_s:10.0f} tokens/s")
    print(f"TRL GRPOTrainer:     {trl_s * 1e3:8.1f} ms  {tokens / trl_s:10.0f} tokens/s")
    print(f"ratio repogym/TRL tokens/s: {trl_s / ours_s:.2f}")


if __name__ == "__main__":
    main()
