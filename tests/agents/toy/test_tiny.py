"""The tiny offline model and tokenizer: builds without network, generates, saves, trains."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from repogym.agents.toy.tiny import EOS, PAD, TinyConfig, build_tiny, load_tiny, save_tiny

ACTIONS = ["python -m pytest -q tests/\n", "git diff --stat\n", "sed -n 1,20p src/calc.py\n"]


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make any socket connection fail, so hub access would raise."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network access in an offline test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield


@pytest.fixture(scope="module")
def tiny() -> tuple[torch.nn.Module, object]:
    """One tiny model and tokenizer shared by the read-only tests."""
    return build_tiny(seed=0, extra_corpus=ACTIONS)


def test_builds_offline_and_roundtrips_through_disk(no_network: None, tmp_path: Path) -> None:
    model, tok = build_tiny(seed=1, extra_corpus=ACTIONS)
    save_tiny(model, tok, tmp_path / "tiny")
    loaded, loaded_tok = load_tiny(tmp_path / "tiny")
    ids = tok(["$ ls\n", "def f(x):\n    return x\n"], return_tensors="pt", padding=True)
    with torch.no_grad():
        before = model(**ids).logits
        after = loaded(**ids).logits
    assert torch.equal(before, after)
    assert loaded_tok.get_vocab() == tok.get_vocab()
    assert loaded_tok.padding_side == "left" and loaded_tok.model_max_length == 512
    assert loaded_tok.pad_token == PAD and loaded_tok.eos_token == EOS
    assert loaded_tok.chat_template == tok.chat_template


def test_size_and_special_tokens(tiny: tuple) -> None:
    model, tok = tiny
    n_params = sum(p.numel() for p in model.parameters())
    assert 300_000 < n_params < 3_000_000
    assert len(tok) == 1024 == model.config.vocab_size
    assert tok.pad_token_id != tok.eos_token_id
    assert (
        model.config.pad_token_id == tok.pad_token_id
        and model.config.eos_token_id == tok.eos_token_id
    )


def test_tokenizer_is_lossless_and_compact_on_extra_corpus(tiny: tuple) -> None:
    _, tok = tiny
    for text in [*ACTIONS, "héllo wörld → ✓\n", "\tif x:\n\t\tpass\n", "assert 1 == 3  # FAILED\n"]:
        assert tok.decode(tok(text)["input_ids"]) == text
    _, plain = build_tiny(seed=0)
    for action in ACTIONS:
        assert len(tok(action)["input_ids"]) < len(plain(action)["input_ids"])
        assert len(tok(action)["input_ids"]) < 0.6 * len(action)


def test_chat_template(tiny: tuple) -> None:
    _, tok = tiny
    text = tok.apply_chat_template(
        [{"role": "user", "content": "fix it"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_start|>user\nfix it<|im_end|>\n<|im_start|>assistant\n"


def test_deterministic_given_seed() -> None:
    config = TinyConfig(
        hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1
    )
    (m1, t1), (m2, t2) = build_tiny(seed=3, config=config), build_tiny(seed=3, config=config)
    m3, _ = build_tiny(seed=4, config=config)
    assert t1.get_vocab() == t2.get_vocab()
    s1, s2, s3 = m1.state_dict(), m2.state_dict(), m3.state_dict()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert not all(torch.equal(s1[k], s3[k]) for k in s1)


def test_generates_a_left_padded_batch(tiny: tuple) -> None:
    model, tok = tiny
    prompts = ["$ ls\n", "Run the tests and fix the failing one.\n$ "]
    enc = tok(prompts, return_tensors="pt", padding=True)
    assert enc["attention_mask"][0, 0] == 0  # padded on the left
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=6, do_sample=False)
        again = model.generate(**enc, max_new_tokens=6, do_sample=False)
    assert (
        out.shape[0] == 2
        and enc["input_ids"].shape[1] < out.shape[1] <= enc["input_ids"].shape[1] + 6
    )
    assert torch.equal(out, again)
    assert all(isinstance(s, str) for s in tok.batch_decode(out[:, enc["input_ids"].shape[1] :]))


def test_optimiser_steps_change_parameters_and_lower_the_loss() -> None:
    model, tok = build_tiny(seed=5, extra_corpus=ACTIONS)
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batch = tok(ACTIONS, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(5):
        loss = model(**batch, labels=labels).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
