"""The model layer: chunked scoring equals full logits, engine logprobs equal training logprobs
over multi-turn batches (KV cache kept across turns), fp32 master weights, LoRA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from repogym.agents.chat import ChatFormat
from repogym.agents.engines import HFEngine, Request
from repogym.agents.episode import Episode, Turn, collate
from repogym.agents.policy import load_policy
from repogym.agents.scoring import token_stats


def test_chunked_token_stats_equal_the_full_softmax() -> None:
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(37, 16, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(101, 16, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 101, (37,), generator=g)
    logp, ent = token_stats(hidden, targets, (weight, None), temperature=0.7, chunk=5)
    full = torch.log_softmax(hidden @ weight.T / 0.7, -1)
    torch.testing.assert_close(logp, full.gather(-1, targets[:, None]).squeeze(-1).float())
    torch.testing.assert_close(ent, -(full.exp() * full).sum(-1).float())
    (logp.sum() + ent.sum()).backward()  # checkpointed chunks: gradients as the full version
    gh, gw = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    ref = full.gather(-1, targets[:, None]).sum() + (-(full.exp() * full).sum())
    ref.backward()
    torch.testing.assert_close(gh, hidden.grad, rtol=1e-4, atol=1e-4)  # fp32 inside chunks
    torch.testing.assert_close(gw, weight.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("reuse", [True, False])
def test_behaviour_logprobs_equal_scored_logprobs_over_turns(qwen_dir: Path, reuse: bool) -> None:
    """Left padding, shared prefills and the KV cache kept across turns: the sampler's
    logprobs are the ones the trainer scores on the exact token sequence."""
    policy = load_policy(qwen_dir, device="cpu", chunk_size=7)
    fmt = ChatFormat(policy.tokenizer)
    engine = HFEngine(policy, fmt.stops, reuse_cache=reuse)
    torch.manual_seed(1)
    prompts = ["task a", "task a", "a much longer prompt for the third episode"]
    eps = [Episode(task=str(i), prompt=p) for i, p in enumerate(prompts)]
    dialogues = [fmt.start(p) for p in prompts]
    for obs in ["out one\n", "second output, longer\n"]:
        requests = [
            Request(i, e.context_ids() + d.pending, 10)
            for i, (e, d) in enumerate(zip(eps, dialogues, strict=True))
        ]
        for e, d, g in zip(eps, dialogues, engine.generate(requests), strict=True):
            e.turns.append(Turn(d.pending, g.token_ids, g.logprobs, d.pending_mask))
            d.add_completion(g.token_ids)
            d.observe(obs)
    batch = collate(eps, policy.tokenizer.pad_token_id)
    with torch.no_grad():
        scores = policy.score(batch.input_ids, batch.attention_mask, batch.action_mask)
    mask = batch.action_mask.bool()
    assert int(mask.sum()) == sum(len(t.completion_ids) for e in eps for t in e.turns)
    torch.testing.assert_close(scores.logp[mask], batch.old_logp[mask], atol=1e-4, rtol=0)


def test_reused_cache_generates_what_a_fresh_prefill_does(qwen_dir: Path) -> None:
    policy = load_policy(qwen_dir, device="cpu")
    fmt = ChatFormat(policy.tokenizer)
    outs = []
    for reuse in (True, False):
        engine = HFEngine(policy, fmt.stops, reuse_cache=reuse)
        d = fmt.start("task")
        ctx: list[int] = []
        ids = []
        for obs in ("a\n", "b\n"):
            (g,) = engine.generate([Request(0, ctx + d.pending, 6)], greedy=True)
            ctx += d.pending + g.token_ids
            d.add_completion(g.token_ids)
            d.observe(obs)
            ids.append(g.token_ids)
        outs.append(ids)
    assert outs[0] == outs[1]


def test_bf16_checkpoint_trains_with_fp32_masters(qwen_dir: Path, tmp_path: Path) -> None:
    policy = load_policy(qwen_dir, device="cpu")
    policy.lm.to(torch.bfloat16).save_pretrained(tmp_path)
    policy.tokenizer.save_pretrained(tmp_path)
    loaded = load_policy(tmp_path, device="cpu")
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}
    assert loaded.compute_dtype is None  # fp32 compute on the CPU by default
    assert load_policy(tmp_path, device="cpu", dtype="bfloat16").compute_dtype == torch.bfloat16
    # A small step moves every fp32 weight; in bf16 most would round back to themselves.
    w = loaded.lm.get_output_embeddings().weight
    before = w.detach().clone()
    with torch.no_grad():
        w.add_(1e-6)
    assert bool((w != before).float().mean() > 0.99)


def test_lora_trains_adapters_and_the_reference_is_the_base_model(qwen_dir: Path) -> None:
    pytest.importorskip("peft")
    policy = load_policy(
        qwen_dir,
        device="cpu",
        lora={"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]},
    )
    trainable = [n for n, p in policy.named_parameters() if p.requires_grad]
    assert trainable and all("lora" in n for n in trainable)
    ref = policy.reference()
    ids = torch.tensor([policy.encode("task a\nfix 1\n")])
    mask = torch.ones_like(ids)
    for n, p in policy.named_parameters():
        if "lora_B" in n:
            with torch.no_grad():
                p.add_(0.5)
    assert not torch.allclose(ref.logp(ids, mask), policy.score(ids, mask).logp.detach())
    base = load_policy(qwen_dir, device="cpu")
    torch.testing.assert_close(ref.logp(ids, mask), base.score(ids, mask).logp.detach())


def test_load_policy_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="--model tiny"):
        load_policy(tmp_path / "nope")
