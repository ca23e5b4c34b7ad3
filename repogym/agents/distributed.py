"""Data parallelism for the reference trainers: FSDP2 sharding, rank-local rollouts, sums.

``repogym train --nproc N`` starts N processes with ``torchrun``; each one builds a
:class:`Parallel` from the environment torchrun sets (``WORLD_SIZE``, ``RANK``,
``LOCAL_RANK``) and joins one process group (NCCL on CUDA, gloo on a CPU). Without torchrun,
:class:`Parallel` is a world of one and every method is a no-op.

- **Sharding**: :meth:`Parallel.shard` applies FSDP2 (``torch.distributed.fsdp.fully_shard``)
  to each decoder layer and then to the whole :class:`~repogym.agents.policy.Policy` (the
  embeddings, final norm, LM head and value head form the root group); ``Policy.score`` is
  registered as an FSDP forward method, so scoring gathers the parameters it needs. The
  policy, a separate critic and the KL reference are each sharded: parameters, gradients and
  AdamW states are split N ways. Every loss is normalised by global counts, so the gradient
  of the whole batch is the *sum* over ranks: the backward pass scales each rank's loss by
  :attr:`Parallel.grad_scale` (N), undoing FSDP's mean.
- **Rollouts**: each rank runs its share of the step's groups (:meth:`Parallel.mine`) with
  the full weights gathered on it (:meth:`Parallel.full_weights`: no collective inside
  generation, so ranks may run different numbers of forward passes).
- **Updates**: ranks run the same number of forward/backward passes (FSDP's collectives need
  it): :meth:`Parallel.pad_micro_batches` pads a rank's list with zero-weight passes.
- **Numbers**: :meth:`Parallel.sum` adds tensors over ranks (global token counts, advantage
  statistics); :meth:`Parallel.reduce_metrics` combines each rank's metrics with the counts
  they are means over (:func:`repogym.agents.metrics.reduce_ranks`): ``loss/*`` summed (each
  rank's share is normalised by the global counts), ``*/max`` the maximum, the rest the
  count-weighted mean, so a rank with no group contributes nothing and ``--nproc N`` reports
  what one process reports at the same global batch.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from repogym.agents.metrics import reduce_ranks

__all__ = ["Parallel"]

T = TypeVar("T")


@dataclass
class Parallel:
    """This process's place in a data-parallel group (a world of one without torchrun).

    Attributes:
        rank: This process's rank.
        world: Number of processes.
        device: The device this rank computes on (``cuda:LOCAL_RANK`` or the CPU).
    """

    rank: int = 0
    world: int = 1
    device: str = "auto"

    @classmethod
    def from_env(cls, device: str = "auto") -> Parallel:
        """Join the process group torchrun describes (idempotent); a world of one otherwise."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls(device=device)
        local = int(os.environ.get("LOCAL_RANK", "0"))
        cuda = torch.cuda.is_available() and device in ("auto", "cuda")
        if cuda:
            torch.cuda.set_device(local)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if cuda else "gloo")
        return cls(dist.get_rank(), dist.get_world_size(), f"cuda:{local}" if cuda else "cpu")

    @property
    def main(self) -> bool:
        """True on rank 0 (it writes metrics, configs and checkpoints)."""
        return self.rank == 0

    @property
    def grad_scale(self) -> float:
        """What a rank's loss is multiplied by before ``backward`` (FSDP averages gradients
        over ranks; the losses' global normalisers want their sum)."""
        return float(self.world)

    @property
    def enabled(self) -> bool:
        """True with more than one process."""
        return self.world > 1

    # -- work split --------------------------------------------------------------------------
    def mine(self, items: Sequence[T]) -> list[tuple[int, T]]:
        """This rank's share of ``items`` (every ``world``-th from ``rank``), with indices."""
        return [(i, x) for i, x in enumerate(items) if i % self.world == self.rank]

    def barrier(self) -> None:
        """Wait for every rank."""
        if self.enabled:
            dist.barrier()

    # -- collectives -------------------------------------------------------------------------
    def sum(self, value: torch.Tensor | float) -> torch.Tensor:
        """``value`` summed over ranks (a float64 copy; unchanged in a world of one)."""
        t = torch.as_tensor(value, dtype=torch.float64).clone()
        if self.enabled:
            device = self.device if self.device.startswith("cuda") else "cpu"
            t = t.to(device)
            dist.all_reduce(t)
        return t.cpu()

    def max_int(self, value: int) -> int:
        """The largest ``value`` over ranks."""
        if not self.enabled:
            return value
        t = torch.tensor([value], device=self.device if self.device.startswith("cuda") else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order."""
        if not self.enabled:
            return [obj]
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def reduce_metrics(
        self, metrics: dict[str, float], counts: Mapping[str, float] | None = None
    ) -> dict[str, float]:
        """Every rank's metrics in one dict (:func:`~repogym.agents.metrics.reduce_ranks`).

        Args:
            metrics: This rank's metrics (means over this rank's items).
            counts: How many items each mean is over (0: none; absent: 1).
        """
        if not self.enabled:
            return metrics
        # The key sets differ between ranks (a rank with no batch runs no loss), so the rows
        # are gathered whole rather than all-reduced key by key.
        return reduce_ranks(self.gather_objects((dict(metrics), dict(counts or {}))))

    def pad_micro_batches(self, items: list[T]) -> list[tuple[T, bool]]:
        """``items`` padded (with its last item) to the longest list over ranks, each marked
        ``real``; a padded pass must contribute zero (FSDP needs equal pass counts)."""
        n = self.max_int(len(items))
        if not items and n:
            raise ValueError("a rank with no micro-batch cannot pad; give it a dummy batch")
        return [(x, True) for x in items] + [(items[-1], False)] * (n - len(items))

    # -- models ------------------------------------------------------------------------------
    def shard(self, policy: torch.nn.Module) -> torch.nn.Module:
        """FSDP2 over ``policy`` (a :class:`~repogym.agents.policy.Policy`); returns it."""
        if not self.enabled:
            return policy
        from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

        for layer in _decoder_layers(policy.lm):
            fully_shard(layer)
        fully_shard(policy)
        register_fsdp_forward_method(policy, "score")
        with torch.no_grad():  # FSDP's lazy set-up must start at the root (Policy.score),
            ids = torch.zeros((1, 2), dtype=torch.long, device=policy.device)  # not at a layer
            policy.score(ids, torch.ones_like(ids))
        self.reshard(policy)  # the optimiser must be built on the sharded parameters
        return policy

    def reshard(self, module: torch.nn.Module) -> None:
        """Put every FSDP unit of ``module`` back in its sharded state (the root stays
        gathered after a forward pass; optimiser state dicts want the sharded parameters)."""
        for m in self._fsdp_modules(module):
            m.reshard()

    @contextlib.contextmanager
    def full_weights(self, policy: torch.nn.Module) -> Iterator[None]:
        """Gather ``policy``'s full parameters on this rank for the block (rank-local
        generation: no collective runs inside), then shard them again."""
        modules = self._fsdp_modules(policy)
        for m in modules:
            m.set_reshard_after_forward(False)
            m.unshard()
        try:
            yield
        finally:
            for m in modules:
                m.reshard()
                m.set_reshard_after_forward(True)

    def _fsdp_modules(self, policy: torch.nn.Module) -> list[Any]:
        if not self.enabled:
            return []
        from torch.distributed.fsdp import FSDPModule

        return [m for m in policy.modules() if isinstance(m, FSDPModule)]

    def full_state_dict(self, module: torch.nn.Module) -> dict[str, torch.Tensor]:
        """The full (unsharded) state dict on the CPU; every rank must call it."""
        if not self.enabled:
            return {k: v.detach().cpu() for k, v in module.state_dict().items()}
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        opts = StateDictOptions(full_state_dict=True, cpu_offload=True, broadcast_from_rank0=False)
        full = get_model_state_dict(module, options=opts)
        return full if self.main else {}

    def load_full_state_dict(self, module: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
        """Load a full state dict (read on every rank) into a sharded or plain module."""
        if not self.enabled:
            module.load_state_dict(state)
            return
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        set_model_state_dict(module, state, options=StateDictOptions(full_state_dict=True))

    def optimizer_state(
        self, module: torch.nn.Module, optimizer: torch.optim.Optimizer
    ) -> dict[str, Any]:
        """The optimiser's full state (keyed by parameter name under FSDP); all ranks call it."""
        if not self.enabled:
            return optimizer.state_dict()
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_optimizer_state_dict,
        )

        self.reshard(module)
        opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_optimizer_state_dict(module, optimizer, options=opts)

    def load_optimizer_state(
        self, module: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
    ) -> None:
        """Load :meth:`optimizer_state`'s output."""
        if not self.enabled:
            optimizer.load_state_dict(state)
            return
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_optimizer_state_dict,
        )

        self.reshard(module)
        # strict=False: a parameter that never had a gradient (PPO's unused value head under a
        # separate critic) has no AdamW state to restore.
        set_optimizer_state_dict(
            module, optimizer, state, options=StateDictOptions(full_state_dict=True, strict=False)
        )

    def close(self) -> None:
        """Leave the process group (idempotent)."""
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()


def _decoder_layers(lm: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks of a Hugging Face causal LM (``model.layers`` and kin)."""
    decoder = lm.get_decoder() if hasattr(lm, "get_decoder") else lm
    for name in ("layers", "h", "blocks"):
        layers = getattr(decoder, name, None)
        if isinstance(layers, torch.nn.ModuleList):
            return list(layers)
    raise ValueError(
        f"cannot find the decoder layers of {type(lm).__name__} to shard. Fix: "
        "use a model whose decoder keeps its blocks in `layers` (Llama, Qwen, ...)"
    )
