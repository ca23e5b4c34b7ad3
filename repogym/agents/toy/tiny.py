"""A tiny causal LM and byte-level BPE tokenizer built offline: the CPU toy's model.

Saved with :func:`save_tiny` it is also a real Qwen2-style checkpoint with a ChatML chat
template (random init), which is how the tests train "real" models without the hub.

No hub access: the tokenizer is trained with ``tokenizers`` on a few Python standard-library
sources, a built-in sample of shell/git/pytest text, and any strings the caller passes (so
that the actions of an environment tokenise compactly); the model is a randomly initialised
Qwen2 of about 0.5M parameters. Both are deterministic given the seed (the stdlib sources, and
so the vocabulary, depend on the Python minor version).

Example:
    >>> model, tok = build_tiny(extra_corpus=["pytest -q\\n", "git diff\\n"])
    >>> save_tiny(model, tok, "/tmp/tiny")
    >>> model, tok = load_tiny("/tmp/tiny")
"""

from __future__ import annotations

import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

__all__ = ["EOS", "PAD", "TinyConfig", "build_tiny", "build_tokenizer", "load_tiny", "save_tiny"]

PAD = "<|pad|>"
EOS = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [PAD, EOS, IM_START, IM_END]

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""ChatML-style template: ``<|im_start|>role\\ncontent<|im_end|>\\n`` per message."""

STDLIB_SOURCES = (
    "textwrap.py",
    "shlex.py",
    "difflib.py",
    "fnmatch.py",
    "glob.py",
    "unittest/case.py",
)
"""Standard-library files (relative to the stdlib directory) in the tokenizer corpus."""

BUILTIN_TEXT = """\
$ ls -la
$ cat setup.py
$ grep -rn "def main" src/
$ python -m pytest -q tests/
$ python -m pytest -x -rA tests/test_core.py::test_parse
$ git status
$ git diff
$ git apply fix.patch
$ sed -n 10,40p src/pkg/module.py
$ find . -name "*.py" | head
diff --git a/src/pkg/module.py b/src/pkg/module.py
--- a/src/pkg/module.py
+++ b/src/pkg/module.py
@@ -1,4 +1,4 @@
-    return a - b
+    return a + b
============================= test session starts ==============================
collected 3 items
tests/test_core.py ..F                                                    [100%]
FAILED tests/test_core.py::test_add - AssertionError: assert 1 == 3
========================= 1 failed, 2 passed in 0.03s ==========================
Traceback (most recent call last):
  File "src/pkg/module.py", line 12, in add
TypeError: unsupported operand type(s) for +: 'int' and 'str'
"""
"""Shell commands, diffs and test output in the style the environments produce."""


@dataclass(frozen=True)
class TinyConfig:
    """Sizes of the tiny model and tokenizer (defaults give about 0.5M parameters).

    Attributes:
        vocab_size: Target BPE vocabulary size, special tokens included.
        hidden_size: Model width.
        intermediate_size: MLP width.
        num_layers: Transformer blocks.
        num_heads: Attention heads.
        num_kv_heads: Key/value heads (grouped-query attention).
        max_len: Context length (``max_position_embeddings`` and ``model_max_length``).
    """

    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 384
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    max_len: int = 512


def _corpus(extra_corpus: Sequence[str], extra_repeats: int) -> list[str]:
    """Training texts: stdlib sources, the built-in sample, and the caller's strings."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [
        (stdlib / name).read_text(encoding="utf-8")
        for name in STDLIB_SOURCES
        if (stdlib / name).is_file()
    ]
    texts.append(BUILTIN_TEXT)
    texts.extend(list(extra_corpus) * extra_repeats)
    return texts


def build_tokenizer(
    vocab_size: int = 1024,
    extra_corpus: Sequence[str] = (),
    *,
    max_len: int = 512,
    padding_side: Literal["left", "right"] = "left",
    extra_repeats: int = 100,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer offline.

    Args:
        vocab_size: Target vocabulary size, special tokens included.
        extra_corpus: Strings to learn merges for (e.g. an environment's action strings).
        max_len: ``model_max_length`` of the tokenizer.
        padding_side: Saved with the tokenizer (transformers 5 keeps only the constructor's).
        extra_repeats: Times each ``extra_corpus`` string is repeated, so its merges are learned.

    Returns:
        A ``PreTrainedTokenizerFast`` with pad/eos tokens, ``<|im_start|>``/``<|im_end|>`` and
        a ChatML-style chat template.
    """
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(extra_corpus, extra_repeats), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token=PAD,
        eos_token=EOS,
        additional_special_tokens=[IM_START, IM_END],
        padding_side=padding_side,
        model_max_length=max_len,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def build_model(
    tokenizer: PreTrainedTokenizerFast, config: TinyConfig, seed: int
) -> Qwen2ForCausalLM:
    """A randomly initialised float32 Qwen2 causal LM sized by ``config``.

    Args:
        tokenizer: Supplies the vocabulary size and the pad/eos ids.
        config: Model sizes.
        seed: Seeds the initialisation without touching the global RNG.

    Returns:
        The model in eval mode.
    """
    model_config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        max_position_embeddings=config.max_len,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(model_config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.eval()


def build_tiny(
    vocab_size: int = 1024,
    seed: int = 0,
    extra_corpus: Sequence[str] = (),
    *,
    config: TinyConfig | None = None,
    padding_side: Literal["left", "right"] = "left",
) -> tuple[Qwen2ForCausalLM, PreTrainedTokenizerFast]:
    """Build a tiny causal LM and its tokenizer, offline and deterministically.

    Args:
        vocab_size: Target BPE vocabulary size (overrides ``config.vocab_size``).
        seed: Seed of the model initialisation.
        extra_corpus: Strings the tokenizer should encode compactly (e.g. action strings).
        config: Model and tokenizer sizes; ``TinyConfig()`` by default.
        padding_side: ``left`` for batched generation, ``right`` for training batches.

    Returns:
        ``(model, tokenizer)``; the model is float32 in eval mode.
    """
    config = config or TinyConfig()
    tokenizer = build_tokenizer(
        vocab_size, extra_corpus, max_len=config.max_len, padding_side=padding_side
    )
    return build_model(tokenizer, config, seed), tokenizer


def save_tiny(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, path: str | Path) -> Path:
    """Save the model and tokenizer to a directory that :func:`load_tiny` reads.

    Args:
        model: The causal LM.
        tokenizer: Its tokenizer.
        path: Directory, created if missing.

    Returns:
        The directory as a ``Path``.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def load_tiny(path: str | Path) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """Load a model and tokenizer saved by :func:`save_tiny`, without network access.

    Args:
        path: The directory.

    Returns:
        ``(model, tokenizer)``; the model is in eval mode.
    """
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    return model.eval(), tokenizer
