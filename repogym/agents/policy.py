"""The LM policy: loading (fp32 master weights, bf16 compute, LoRA), chunked scoring.

- :func:`load_policy` loads a local Hugging Face causal LM and its tokenizer (never the hub)
  with float32 master weights by default, whatever the checkpoint's dtype (bf16 AdamW at a
  small learning rate leaves most weights unchanged), compute in bf16 autocast on CUDA,
  optional gradient checkpointing and LoRA adapters through ``peft``.
- :class:`Policy` scores sequences: per-token log-probabilities and entropies of the positions
  a loss needs, from the backbone's hidden states through :mod:`repogym.agents.scoring` (no
  full ``[B, T, V]`` logits), and values from an optional value head (PPO).
- :meth:`Policy.reference` is the frozen reference of a KL term: the adapters switched off
  when training LoRA (no second copy), else a frozen copy.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from repogym.agents.scoring import Head, token_stats

__all__ = ["DType", "Policy", "Reference", "Scores", "load_policy", "resolve_device"]

DType = Literal["auto", "float32", "bfloat16"]
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"`` gives CUDA when available, else the CPU; any other string is used as is."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@dataclass
class Scores:
    """Per-token outputs of :meth:`Policy.score`, each ``[B, T]`` aligned with the input."""

    logp: torch.Tensor
    entropy: torch.Tensor | None = None
    values: torch.Tensor | None = None


class Policy(nn.Module):
    """A causal LM with its tokenizer, an optional value head and a sampling temperature.

    Args:
        model: The causal LM (or a ``peft`` model around it).
        tokenizer: Its tokenizer (needs a pad token).
        value_head: Add a zero-initialised ``Linear(hidden, 1)`` on the last hidden state.
        temperature: Logits are divided by it when sampling and when scoring.
        dtype: Compute dtype: ``auto`` (bf16 autocast on CUDA, fp32 on the CPU), ``float32``
            or ``bfloat16``.
        chunk_size: Positions scored at once (memory ~ ``chunk_size * vocab`` floats).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: Any,
        *,
        value_head: bool = False,
        temperature: float = 1.0,
        dtype: DType = "auto",
        chunk_size: int = 1024,
    ) -> None:
        super().__init__()
        if tokenizer.pad_token_id is None:
            raise ValueError(
                "the tokenizer has no pad token; set one (e.g. tokenizer.pad_token "
                "= tokenizer.eos_token) before building a Policy"
            )
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0; got {temperature}")
        if dtype not in ("auto", *_DTYPES):
            raise ValueError(f"unknown dtype {dtype!r}. Fix: use auto, float32 or bfloat16")
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.dtype_name = dtype
        self.chunk_size = chunk_size
        hidden = self.lm.config.get_text_config().hidden_size
        self.value_head = nn.Linear(hidden, 1) if value_head else None
        if self.value_head is not None:
            nn.init.zeros_(self.value_head.weight)
            nn.init.zeros_(self.value_head.bias)

    @property
    def lm(self) -> PreTrainedModel:
        """The causal LM itself (inside a ``peft`` wrapper, the base model with its adapters)."""
        base = getattr(self.model, "get_base_model", None)
        return base() if callable(base) else self.model

    @property
    def device(self) -> torch.device:
        """The device of the model's parameters."""
        return next(self.model.parameters()).device

    @property
    def max_len(self) -> int:
        """The longest sequence the model takes (``max_position_embeddings``)."""
        return int(getattr(self.lm.config.get_text_config(), "max_position_embeddings", 2048))

    @property
    def compute_dtype(self) -> torch.dtype | None:
        """The autocast dtype (None: the weights' own dtype)."""
        if self.dtype_name == "bfloat16" or (
            self.dtype_name == "auto" and self.device.type == "cuda"
        ):
            return torch.bfloat16
        return None

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """Mixed-precision compute in :attr:`compute_dtype` (a no-op when None)."""
        dtype = self.compute_dtype
        if dtype is None:
            yield
            return
        with torch.autocast(device_type=self.device.type, dtype=dtype):
            yield

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens added."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def head(self) -> Head:
        """The LM head's ``(weight, bias)``."""
        out = self.lm.get_output_embeddings()
        return out.weight, getattr(out, "bias", None)

    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The backbone's last (normalised) hidden states ``[B, T, H]``."""
        backbone = self.lm.get_decoder()
        with self.autocast():
            return backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def score(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        with_entropy: bool = False,
        with_values: bool = False,
        entropy_grad: bool = True,
    ) -> Scores:
        """Log-probabilities (and entropies, values) of right-padded sequences.

        Args:
            input_ids: ``[B, T]`` token ids.
            attention_mask: ``[B, T]``, 1 on real tokens.
            positions: ``[B, T]`` bool, the positions whose log-probability is needed (default:
                every real token but the first); the others are 0.
            with_entropy: Also the entropy of each scored position's next-token distribution.
            with_values: Also the value head's output at every position.
            entropy_grad: Keep the entropy's graph (for an entropy bonus).

        Raises:
            ValueError: If values are asked for without a value head.
        """
        if with_values and self.value_head is None:
            raise ValueError("with_values=True needs a value head: build Policy(value_head=True)")
        hidden = self.hidden_states(input_ids, attention_mask)
        need = attention_mask.bool() if positions is None else positions.bool()
        need = need.clone()
        need[:, 0] = False
        b, t = need.nonzero(as_tuple=True)
        logp_sel, ent_sel = token_stats(
            hidden[b, t - 1],
            input_ids[b, t],
            self.head(),
            temperature=self.temperature,
            chunk=self.chunk_size,
        )
        logp = hidden.new_zeros(need.shape, dtype=torch.float32).index_put((b, t), logp_sel)
        scores = Scores(logp=logp)
        if with_entropy:
            ent_sel = ent_sel if entropy_grad else ent_sel.detach()
            scores.entropy = torch.zeros_like(logp).index_put((b, t), ent_sel)
        if with_values:
            head = self.value_head
            scores.values = head(hidden.to(head.weight.dtype)).squeeze(-1).float()
        return scores

    def frozen_copy(self) -> Policy:
        """A deep copy with gradients off."""
        ref = copy.deepcopy(self)
        ref.requires_grad_(False)
        return ref.eval()

    def reference(self) -> Reference:
        """The frozen reference policy of a KL term (the adapters off under LoRA)."""
        if hasattr(self.model, "disable_adapter"):
            return Reference(self, adapters_off=True)
        return Reference(self.frozen_copy(), adapters_off=False)


class Reference:
    """A frozen policy that only scores (see :meth:`Policy.reference`)."""

    def __init__(self, policy: Policy, *, adapters_off: bool) -> None:
        self.policy = policy
        self.adapters_off = adapters_off

    @torch.no_grad()
    def logp(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Log-probabilities of the positions (as :meth:`Policy.score`)."""
        ctx = self.policy.model.disable_adapter() if self.adapters_off else contextlib.nullcontext()
        with ctx:
            return self.policy.score(input_ids, attention_mask, positions).logp


def load_policy(
    model: str | Path,
    *,
    value_head: bool = False,
    device: str = "auto",
    dtype: DType = "auto",
    param_dtype: Literal["float32", "bfloat16"] = "float32",
    temperature: float = 1.0,
    gradient_checkpointing: bool = False,
    lora: dict[str, Any] | None = None,
    chunk_size: int = 1024,
) -> Policy:
    """Load a policy from a local model folder (offline; the hub is never used).

    Args:
        model: A folder with a Hugging Face causal LM and tokenizer (``save_pretrained``).
        value_head: Add a value head (PPO).
        device: ``auto``, ``cpu``, ``cuda``, ...
        dtype: Compute dtype (see :class:`Policy`).
        param_dtype: The weights' (master) dtype; float32 by default, whatever the checkpoint.
        temperature: See :class:`Policy`.
        gradient_checkpointing: Recompute activations in the backward pass.
        lora: ``peft.LoraConfig`` fields (e.g. ``{"r": 16, "lora_alpha": 32}``) to train
            low-rank adapters instead of every weight; None trains every weight.
        chunk_size: See :class:`Policy`.

    Raises:
        FileNotFoundError: If ``model`` is not a folder.
    """
    path = Path(model)
    if not path.is_dir():
        raise FileNotFoundError(
            f"model {str(model)!r} is not a folder. Fix: pass the path of a saved Hugging Face "
            "model (save_pretrained output), or --model tiny for the CPU toy"
        )
    lm = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=True, dtype=_DTYPES[param_dtype]
    )
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if gradient_checkpointing:
        lm.gradient_checkpointing_enable()
        lm.config.use_cache = False
    net: Any = lm
    if lora is not None:
        try:
            import peft
        except ImportError as e:
            raise RuntimeError("lora needs peft. Fix: pip install 'repogym[train]'") from e
        net = peft.get_peft_model(lm, peft.LoraConfig(**{"task_type": "CAUSAL_LM", **lora}))
    policy = Policy(
        net, tok, value_head=value_head, temperature=temperature, dtype=dtype, chunk_size=chunk_size
    )
    return policy.to(resolve_device(device)).train()
