"""Trainer speed and memory: one GRPO update of repogym's trainer vs TRL's GRPOTrainer, on the
same model, batch and loss, in one run.

Both sides get identical inputs: B sequences of P prompt + C completion tokens, +-1 advantages,
old logprobs (one iteration: ratios start at 1), the loss ``grpo`` (per-sequence token mean,
clip 0.2, no KL) and AdamW. TRL's side calls ``GRPOTrainer.compute_loss`` on the prepared
inputs (its generation and reward steps are not timed), then ``backward`` and the optimiser
step. Each measurement runs in a fresh process, which reports tokens/s (median of repeats) and
its peak memory above what the model and data took (``ru_maxrss`` on a CPU,
``max_memory_allocated`` on CUDA). repogym's side is measured at several scoring chunk sizes:
its peak grows with the chunk, TRL's with T x V.

Shapes: ``--shape small`` (the tiny model's 1k vocabulary, 8 x 96 tokens) or ``--shape
realistic`` (vocabulary 151,936 as Qwen's, 1 x 2048 tokens, a narrow 2-layer model so that the
LM head dominates, as it does for memory in real models).

    python bench/trainer_speed.py --shape realistic [--chunks 128 512 2048 --repeats 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from repogym.agents.episode import Batch
from repogym.agents.grpo import GRPOBatch, GRPOConfig, GRPOTrainer
from repogym.agents.policy import Policy
from repogym.agents.toy.tiny import build_tokenizer

SHAPES = {
    "small": {
        "vocab": 1024,
        "hidden": 128,
        "layers": 2,
        "batch": 8,
        "prompt": 32,
        "completion": 64,
    },
    "realistic": {
        "vocab": 151936,
        "hidden": 64,
        "layers": 2,
        "batch": 1,
        "prompt": 1024,
        "completion": 1024,
    },
}


def build(shape: dict) -> tuple[Qwen2ForCausalLM, object]:
    tok = build_tokenizer(max_len=4096)
    config = Qwen2Config(
        vocab_size=shape["vocab"],
        hidden_size=shape["hidden"],
        intermediate_size=2 * shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        max_position_embeddings=4096,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config).train(), tok


def make_data(shape: dict) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    b, p, c, v = shape["batch"], shape["prompt"], shape["completion"], shape["vocab"]
    adv = torch.where(torch.rand(b, generator=g) > 0.5, 1.0, -1.0)
    if b > 1:
        adv[0], adv[1] = 1.0, -1.0
    return {
        "prompt_ids": torch.randint(10, v, (b, p), generator=g),
        "completion_ids": torch.randint(10, v, (b, c), generator=g),
        "advantages": adv,
    }


def repogym_batch(data: dict[str, torch.Tensor], old_logp: torch.Tensor) -> Batch:
    """The same data as a repogym Batch (action mask on the completion)."""
    ids = torch.cat([data["prompt_ids"], data["completion_ids"]], 1)
    b, t = ids.shape
    p = data["prompt_ids"].shape[1]
    action = torch.zeros(b, t, dtype=torch.long)
    action[:, p:] = 1
    return Batch(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        prompt_mask=1 - action,
        action_mask=action,
        obs_mask=torch.zeros_like(ids),
        old_logp=old_logp,
        turn_index=action - 1,
        rewards=data["advantages"].clone(),
        valid=torch.ones(b, dtype=torch.bool),
        groups=torch.zeros(b, dtype=torch.long),
        bootstrap=torch.zeros(b, dtype=torch.bool),
        state_pos=torch.full((b, 1), p - 1),
        n_turns=torch.ones(b, dtype=torch.long),
        final_pos=torch.full((b,), t - 1),
    )


def ours(model, tok, data, chunk: int) -> Callable[[], None]:
    """One repogym GRPO update on the batch (advantages given, no rollout)."""
    policy = Policy(model, tok, chunk_size=chunk)
    ids = torch.cat([data["prompt_ids"], data["completion_ids"]], 1)
    with torch.no_grad():
        old = policy.score(ids, torch.ones_like(ids)).logp
    config = GRPOConfig(
        variant="grpo",
        epochs=1,
        recompute_old_logp=False,
        lr=1e-5,
        micro_batch=len(old),
        max_grad_norm=1e9,
        device="cpu",
        chunk_size=chunk,
    )
    trainer = GRPOTrainer(config, policy=policy)
    batch = repogym_batch(data, old)

    def step() -> None:
        b = GRPOBatch(
            **batch.batch_fields(), prox_logp=batch.old_logp, advantages=data["advantages"]
        )
        trainer.micro_step(b, trainer.norm(b, norm_len=float(old.shape[1])))
        trainer.optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=True)

    return step


def theirs(model, tok, data) -> Callable[[], None]:
    """One TRL GRPOTrainer update (compute_loss, backward, AdamW step) on the batch."""
    from datasets import Dataset
    from trl import GRPOConfig as TrlConfig
    from trl import GRPOTrainer as TrlTrainer

    b, c = data["completion_ids"].shape
    with torch.no_grad():
        ids = torch.cat([data["prompt_ids"], data["completion_ids"]], 1)
        old = torch.log_softmax(model(ids).logits[:, :-1].float(), -1)
        old = old.gather(-1, ids[:, 1:, None]).squeeze(-1)[:, -c:]
        del ids
    args = TrlConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-bench-"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        per_device_train_batch_size=max(b, 2),
        num_generations=max(b, 2),
        max_completion_length=c,
        loss_type="grpo",
        beta=0.0,
        learning_rate=1e-5,
        epsilon=0.2,
        logging_steps=10**9,
    )
    trainer = TrlTrainer(
        model=model,
        args=args,
        processing_class=tok,
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        train_dataset=Dataset.from_dict({"prompt": ["x"] * max(b, 2)}),
    )
    model.train()
    trainer.current_gradient_accumulation_steps = 1
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0)
    inputs = {
        "prompt_ids": data["prompt_ids"],
        "prompt_mask": torch.ones_like(data["prompt_ids"]),
        "completion_ids": data["completion_ids"],
        "completion_mask": torch.ones_like(data["completion_ids"]),
        "advantages": data["advantages"],
        "old_per_token_logps": old,
        "num_items_in_batch": torch.tensor(float(b * c)),
    }

    def step() -> None:
        loss = trainer.compute_loss(model, dict(inputs))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def worker(side: str, shape_name: str, chunk: int, repeats: int) -> dict[str, float]:
    """Measure one side in this process: tokens/s and peak memory above the baseline."""
    torch.set_num_threads(1)
    shape = SHAPES[shape_name]
    model, tok = build(shape)
    data = make_data(shape)
    fn = ours(model, tok, data, chunk) if side == "repogym" else theirs(model, tok, data)
    base = _rss_mib()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
    tokens = shape["batch"] * (shape["prompt"] + shape["completion"])
    return {"tokens_per_s": tokens / statistics.median(times), "peak_mib": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small")
    parser.add_argument("--chunks", type=int, nargs="+", default=[128, 512, 2048])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-trl", action="store_true", help="skip TRL's side")
    parser.add_argument("--worker", choices=["repogym", "trl"], help=argparse.SUPPRESS)
    parser.add_argument("--chunk", type=int, default=1024, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.shape, args.chunk, args.repeats)))
        return
    shape = SHAPES[args.shape]
    tokens = shape["batch"] * (shape["prompt"] + shape["completion"])
    full = tokens * shape["vocab"] * 4 / 2**20
    print(
        f"shape {args.shape}: vocab {shape['vocab']}, {shape['batch']} x "
        f"{shape['prompt'] + shape['completion']} tokens; one fp32 [B, T, V] copy = "
        f"{full:.0f} MiB; 1 thread; median of {args.repeats}; each row a fresh process"
    )
    runs = [("repogym", c) for c in args.chunks] + ([] if args.no_trl else [("trl", 0)])
    results = {}
    for side, chunk in runs:
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            side,
            "--shape",
            args.shape,
            "--chunk",
            str(chunk),
            "--repeats",
            str(args.repeats),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        results[(side, chunk)] = r = json.loads(out.strip().splitlines()[-1])
        label = f"repogym chunk={chunk}" if side == "repogym" else "TRL GRPOTrainer"
        print(
            f"{label:<22} {r['tokens_per_s']:>9.0f} tokens/s  peak +{r['peak_mib']:>8.0f} MiB",
            flush=True,
        )
    if ("trl", 0) in results:
        best = max(
            (r for k, r in results.items() if k[0] == "repogym"), key=lambda r: r["tokens_per_s"]
        )
        trl = results[("trl", 0)]
        print(
            f"ratio repogym/TRL tokens/s: {best['tokens_per_s'] / trl['tokens_per_s']:.2f}; "
            f"peak memory repogym(smallest chunk)/TRL: "
            f"{results[('repogym', min(args.chunks))]['peak_mib'] / trl['peak_mib']:.2f}"
        )


if __name__ == "__main__":
    main()
