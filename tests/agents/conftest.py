"""Agents tests: one torch thread (spinning OpenMP threads crawl on a shared 2-core box), and a
real Qwen2-style checkpoint with a ChatML template saved to disk (random init, offline)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from repogym.agents.toy.tiny import TinyConfig, build_tiny, save_tiny

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def qwen_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-init Qwen2 checkpoint (ChatML template, 4096-token context) on disk."""
    model, tok = build_tiny(
        seed=0,
        config=TinyConfig(max_len=4096),
        extra_corpus=['{"tool": "submit", "args": {}}', "</tool_call>"],
    )
    return save_tiny(model, tok, tmp_path_factory.mktemp("qwen-tiny"))
