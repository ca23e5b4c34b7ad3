"""The LM policy: sampling logprobs agree with scoring; episode tokenisation and masks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from repogym.agents.policy import (
    Episode,
    Policy,
    Turn,
    collate,
    context_ids,
    load_policy,
    tokenize_episode,
)
from tests.agents._episodes import episode, tiny_policy


@pytest.fixture(scope="module")
def policy() -> Policy:
    return tiny_policy(value_head=True)


def test_behaviour_logprobs_equal_scored_logprobs_over_a_multi_turn_batch(policy: Policy) -> None:
    """The sampler's per-token logprobs (left padding, KV cache) are the ones training sees."""
    torch.manual_seed(1)
    prompts = ["task a\n", "a much longer prompt for the second episode\n"]
    episodes = [Episode(task=str(i), prompt=p) for i, p in enumerate(prompts)]
    for obs in ["Wrote 5 characters.\n", "Submitted.\n"]:
        ctxs = [context_ids(policy, e.prompt, e.turns) for e in episodes]
        for e, g in zip(episodes, policy.generate(ctxs, max_new_tokens=6), strict=True):
            e.turns.append(Turn(g.token_ids, g.logprobs, obs))
    batch = collate(policy.tokenizer, episodes)
    with torch.no_grad():
        scores = policy.score(batch.input_ids, batch.attention_mask)
    mask = batch.action_mask.bool()
    assert int(mask.sum()) == sum(len(t.action_ids) for e in episodes for t in e.turns)
    torch.testing.assert_close(scores.logp[mask], batch.old_logp[mask], atol=1e-4, rtol=0)


def test_generation_stops_at_the_stop_string(policy: Policy) -> None:
    torch.manual_seed(0)
    gens = policy.generate([policy.encode("task a\n")] * 8, max_new_tokens=12)
    for g in gens:
        assert len(g.token_ids) == len(g.logprobs) <= 12
        stops = [i for i, t in enumerate(g.token_ids) if "\n" in policy.tokenizer.decode([t])]
        assert stops in ([], [len(g.token_ids) - 1])  # only the last token holds a newline
        assert all(lp <= 0 for lp in g.logprobs)
    greedy = policy.generate([policy.encode("task a\n")] * 2, max_new_tokens=5, greedy=True)
    assert greedy[0].token_ids == greedy[1].token_ids


def test_tokenisation_masks_partition_the_sequence(policy: Policy) -> None:
    ep = episode(policy, ["fix 1\n", "submit\n"], 1.0, obs="ok\n")
    tok = tokenize_episode(policy.tokenizer, ep)
    n_prompt = len(policy.encode("task t\n"))
    n_fix, n_obs, n_sub = (len(policy.encode(x)) for x in ["fix 1\n", "ok\n", "submit\n"])
    assert tok.prompt_mask == [1] * n_prompt + [0] * (n_fix + n_obs + n_sub + n_obs)
    assert tok.action_mask == [0] * n_prompt + [1] * n_fix + [0] * n_obs + [1] * n_sub + [0] * n_obs
    assert [
        p + a + o for p, a, o in zip(tok.prompt_mask, tok.action_mask, tok.obs_mask, strict=True)
    ] == [1] * len(tok.input_ids)
    # The state before each action is the token just before it; s_T is the last token.
    assert tok.state_pos == [n_prompt - 1, n_prompt + n_fix + n_obs - 1]
    assert tok.final_pos == len(tok.input_ids) - 1
    assert tok.turn_index[n_prompt : n_prompt + n_fix] == [0] * n_fix
    assert tok.input_ids == context_ids(policy, ep.prompt, ep.turns)


def test_collate_places_the_reward_and_masks_infra_errors(policy: Policy) -> None:
    good = episode(policy, ["fix 1\n", "submit\n"], 1.0, obs="")
    bad = episode(policy, ["fix 2\n"], 1.0, infra_error="grader crashed")
    batch = collate(policy.tokenizer, [good, bad])
    last_action = int(batch.action_mask[0].nonzero().max())
    assert batch.token_rewards[0].nonzero().flatten().tolist() == [last_action]
    assert float(batch.token_rewards[0, last_action]) == 1.0
    assert batch.valid.tolist() == [True, False]
    assert int(batch.action_mask[1].sum()) == 0 and int(batch.obs_mask[1].sum()) == 0
    assert float(batch.token_rewards[1].sum()) == 0.0
    assert batch.state_pos[1].tolist()[1] == -1 and batch.n_turns.tolist() == [2, 1]
    assert batch.attention_mask.sum(-1).tolist() == [
        len(tokenize_episode(policy.tokenizer, e).input_ids) for e in (good, bad)
    ]


def test_values_need_a_value_head(policy: Policy) -> None:
    batch = collate(policy.tokenizer, [episode(policy, ["fix 1\n"], 0.0)])
    scores = policy.score(
        batch.input_ids, batch.attention_mask, with_values=True, with_entropy=True
    )
    assert scores.values.shape == scores.logp.shape == scores.entropy.shape
    no_head = Policy(policy.model, policy.tokenizer)
    with pytest.raises(ValueError, match="value_head=True"):
        no_head.score(batch.input_ids, batch.attention_mask, with_values=True)


def test_load_policy_rejects_a_missing_model(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not 'tiny' and not a folder"):
        load_policy(tmp_path / "nope")


def test_load_policy_reads_a_saved_model(tmp_path: Path, policy: Policy) -> None:
    policy.model.save_pretrained(tmp_path)
    policy.tokenizer.save_pretrained(tmp_path)
    loaded = load_policy(tmp_path, device="cpu")
    ids = torch.tensor([policy.encode("task a\nfix 1\n")])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        torch.testing.assert_close(loaded.score(ids, mask).logp, policy.score(ids, mask).logp)
