"""GPU check: GRPO and PPO steps on real RepoEnv episodes with a Qwen2.5-sized random model.

On a CUDA machine: a random-init model of Qwen2.5-0.5B's configuration (and 1.5B with
``--size 1.5b``), fp32 master weights, bf16 autocast compute, one GRPO step and one PPO step
(critic = value head) on real episodes of built-in tasks; prints generation tokens/s, update
tokens/s, peak GPU memory and MFU (model FLOPs utilisation: ``6 N`` FLOPs per trained token
and ``2 N`` per generated token over the device's dense bf16 peak). On a CPU ``--size smoke``
runs the same path on a tiny configuration as a smoke test (CI runs it).

The tokenizer is a byte-level BPE trained offline; the model's vocabulary keeps Qwen's 151,936
rows, so the LM head costs what it costs in the real model. Environments use the bwrap
sandbox when ``bwrap`` is installed, else the ``process`` backend (no isolation; benchmark
only, it says so).

    python bench/gpu_train.py --size 0.5b [--group 8 --max-new-tokens 256 --steps 1]
    python bench/gpu_train.py --size smoke
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import warnings

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.policy import Policy
from repogym.agents.ppo import PPOConfig, PPOTrainer
from repogym.agents.rollout import RolloutConfig
from repogym.agents.toy.tiny import build_tokenizer

SIZES = {
    "0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
    },
    "1.5b": {
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
    },
    "smoke": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 4096,
    },
}
"""Qwen2.5-0.5B and 1.5B shapes (tied embeddings), and a CPU smoke shape."""

PEAK_BF16_TFLOPS = {
    "H200": 989.0,
    "H100": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "L4": 121.0,
    "A10G": 125.0,
    "4090": 165.0,
}
"""Dense bf16 peak TFLOPS by device-name fragment (MFU is reported only for these)."""


def build_policy(size: str, device: str, value_head: bool, seed: int = 0) -> Policy:
    """A random-init Qwen2 of ``size`` with fp32 weights on ``device``."""
    tok = build_tokenizer(vocab_size=1024, max_len=32768)
    shape = SIZES[size]
    config = Qwen2Config(
        **shape,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(device=device, dtype=torch.float32)
    return Policy(model, tok, value_head=value_head).to(device).train()


def peak_tflops() -> float | None:
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def run(algo: str, args: argparse.Namespace, sandbox: str) -> dict[str, float]:
    """One training step of ``algo``; its throughput, memory and MFU."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    policy = build_policy(args.size, device, value_head=algo == "ppo")
    n_params = sum(p.numel() for p in policy.model.parameters())
    rollout = RolloutConfig(
        group_size=args.group,
        max_steps=args.max_steps,
        max_new_tokens=args.max_new_tokens,
        sandbox=sandbox,
        max_context=args.max_context,
    )
    common = {
        "tasks": tuple(args.tasks),
        "steps": args.steps,
        "lr": 1e-6,
        "micro_batch": args.micro_batch,
        "device": device,
        "rollout": rollout,
        "out": tempfile.mkdtemp(prefix=f"gpu-{algo}-"),
        "save_rollouts": False,
        "gradient_checkpointing": False,
        "chunk_size": args.chunk,
    }
    config = GRPOConfig(epochs=1, **common) if algo == "grpo" else PPOConfig(epochs=1, **common)
    trainer = (GRPOTrainer if algo == "grpo" else PPOTrainer)(config, policy=policy)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.monotonic()
    try:
        metrics = trainer.train(log=False)[-1]
    finally:
        trainer.close()
        shutil.rmtree(config.out, ignore_errors=True)
    wall = time.monotonic() - start
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
    gen_tps, upd_tps = metrics["throughput/gen_tokens_per_s"], metrics["throughput/tokens_per_s"]
    tflops = peak_tflops()
    mfu_gen = 2 * n_params * gen_tps / (tflops * 1e12) if tflops else float("nan")
    mfu_upd = 6 * n_params * upd_tps / (tflops * 1e12) if tflops else float("nan")
    return {
        "params_M": n_params / 1e6,
        "gen_tokens_per_s": gen_tps,
        "update_tokens_per_s": upd_tps,
        "peak_gib": peak,
        "mfu_gen": mfu_gen,
        "mfu_update": mfu_upd,
        "wall_s": wall,
        "reward/mean": metrics["reward/mean"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size", choices=sorted(SIZES), default="0.5b" if torch.cuda.is_available() else "smoke"
    )
    parser.add_argument("--tasks", nargs="+", default=["retry-zero"])
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=2, help="env steps per episode")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--max-context", type=int, default=4096)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--chunk", type=int, default=1024, help="scoring chunk (positions)")
    parser.add_argument("--algos", nargs="+", default=["grpo", "ppo"])
    args = parser.parse_args()
    if args.size == "smoke":
        args.group, args.max_new_tokens, args.micro_batch = 2, 8, 2
        torch.set_num_threads(1)
    sandbox = "bwrap" if shutil.which("bwrap") else "process"
    if sandbox == "process":
        warnings.warn(
            "bwrap is not installed: the benchmark runs episodes with the unsafe "
            "process backend (no isolation)",
            stacklevel=1,
        )
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    print(
        f"device {device}; size {args.size}; sandbox {sandbox}; dtype: fp32 masters, "
        f"{'bf16 autocast' if torch.cuda.is_available() else 'fp32'} compute"
    )
    print(
        f"{'algo':<5} {'params':>8} {'gen tok/s':>10} {'upd tok/s':>10} {'peak GiB':>9} "
        f"{'MFU gen':>8} {'MFU upd':>8} {'wall s':>7}"
    )
    for algo in args.algos:
        r = run(algo, args, sandbox)
        print(
            f"{algo:<5} {r['params_M']:>7.1f}M {r['gen_tokens_per_s']:>10.0f} "
            f"{r['update_tokens_per_s']:>10.0f} {r['peak_gib']:>9.2f} {r['mfu_gen']:>8.3f} "
            f"{r['mfu_update']:>8.3f} {r['wall_s']:>7.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
