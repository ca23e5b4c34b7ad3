"""Completions from an OpenAI-compatible server (vLLM, SGLang) and weight sync to it.

Requests go to ``{url}/v1/completions`` with ``prompt`` as token ids, ``logprobs``,
``return_token_ids`` and ``return_tokens_as_token_ids``, the sampling settings (temperature,
``top_p``, ``top_k``) and a per-episode ``seed``; the completion's ids come from
``choices[0].token_ids`` (or the ``token_id:N`` logprob tokens) and its behaviour logprobs
from ``choices[0].logprobs.token_logprobs``.

**Logprobs.** The trainer needs the logprobs of the distribution the server sampled from
(after temperature, top-k and top-p). Stock vLLM returns the raw model's (temperature 1)
unless started with ``--logprobs-mode processed_logprobs``. :func:`check_logprobs`
compares the server's numbers with the learner's own scoring at the sampling temperature and
at temperature 1, and refuses a server whose numbers are the raw ones.

**Weight sync** after each update (``weight_sync``):

- ``sglang``: the weights are saved to ``sync_dir/step-N`` and SGLang's
  ``POST /update_weights_from_disk {"model_path": ...}`` loads them;
- ``vllm``: the weights overwrite the folder vLLM serves (``served_dir``; start it with
  ``VLLM_SERVER_DEV_MODE=1``), then ``POST /collective_rpc {"method": "reload_weights"}``
  reloads them in place and ``POST /reset_prefix_cache`` drops the KV cache of the old ones;
- ``restart``: the weights are saved to ``sync_dir/step-N`` and ``restart_command`` (a shell
  command, ``{path}`` replaced by the folder) restarts the server on them; the engine waits
  until ``GET /v1/models`` answers;
- ``auto``: ``sglang`` or ``vllm`` from the ``owned_by`` field of ``GET /v1/models``;
- ``none``: no sync (a frozen sampler; the off-policy correction grows with the gap).

Only the newest ``step-N`` folder is kept. LoRA adapters are merged into the saved weights
tensor by tensor (``W + scale * B @ A``), without copying the model.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import torch

from repogym.agents.chat import Stops
from repogym.agents.distributed import Parallel
from repogym.agents.engines import Generation, Request
from repogym.agents.policy import Policy

__all__ = ["ServerEngine", "ServerLogprobError", "WeightSync", "check_logprobs", "export_weights"]

WeightSync = Literal["auto", "sglang", "vllm", "restart", "none"]


class ServerLogprobError(RuntimeError):
    """The server's behaviour logprobs are not those of the distribution it sampled from."""


class ServerEngine:
    """Completions from an OpenAI-compatible server by prompt token ids (module docstring).

    Args:
        url: The server's base URL (``http://host:port``).
        stops: Stop tokens and strings (a closing-fence rule cannot be sent to a server).
        model: The served model name (default: the server's first model).
        temperature: Sampling temperature (the learner scores at the same temperature).
        top_p: Nucleus sampling mass (1: off).
        top_k: Sample among the ``top_k`` most likely tokens (0: off).
        sync_dir: Folder for the ``step-N`` weight folders.
        weight_sync: How weights reach the server (module docstring).
        served_dir: The folder vLLM serves (``vllm`` sync overwrites it).
        restart_command: The ``restart`` sync's shell command (``{path}``: the new weights).
        timeout_s: Per-request timeout.
        workers: Requests in flight at once.
        parallel: The data-parallel group (only rank 0 writes and calls the server).
    """

    def __init__(
        self,
        url: str,
        stops: Stops,
        *,
        model: str | None = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        sync_dir: str | Path = "runs/weights",
        weight_sync: WeightSync = "auto",
        served_dir: str | Path | None = None,
        restart_command: str | None = None,
        timeout_s: float = 600.0,
        workers: int = 16,
        parallel: Parallel | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.stops = stops
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k
        self.sync_dir = Path(sync_dir)
        self.served_dir = Path(served_dir) if served_dir else None
        self.restart_command = restart_command
        self.timeout_s = timeout_s
        self.workers = workers
        self.parallel = parallel or Parallel()
        models = self._call("/v1/models").get("data") or [{}]
        self.model = model or str(models[0].get("id", "default"))
        self.weight_sync = _resolve_sync(weight_sync, str(models[0].get("owned_by", "")))
        if self.weight_sync == "vllm" and self.served_dir is None:
            raise ValueError(
                "weight_sync=vllm needs served_dir: the folder vLLM was started on "
                "(it is overwritten with the new weights). Fix: --set served_dir=DIR"
            )
        if self.weight_sync == "restart" and not restart_command:
            raise ValueError(
                "weight_sync=restart needs restart_command. Fix: --set "
                "'restart_command=./restart_server.sh {path}'"
            )

    # -- HTTP --------------------------------------------------------------------------------
    def _call(
        self, path: str, payload: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout_s) as resp:
                body = resp.read()
        except (urllib.error.URLError, OSError) as e:
            raise RuntimeError(
                f"rollout server {self.url}{path} failed: {e}. Fix: start the "
                "server (vLLM or SGLang) or pass the right --rollout-server "
                "URL"
            ) from e
        return json.loads(body) if body.strip() else {}

    # -- generation --------------------------------------------------------------------------
    def generate(self, requests: Sequence[Request], *, greedy: bool = False) -> list[Generation]:
        """One completion per request, ``workers`` in flight at once."""
        with ThreadPoolExecutor(max(1, min(self.workers, len(requests) or 1))) as pool:
            return list(pool.map(lambda r: self._one(r, greedy), requests))

    def payload(self, request: Request, greedy: bool) -> dict[str, Any]:
        """The ``/v1/completions`` request body of one completion."""
        body = {
            "model": self.model,
            "prompt": request.prompt_ids,
            "max_tokens": request.max_new_tokens,
            "temperature": 0.0 if greedy else self.temperature,
            "top_p": self.top_p,
            "logprobs": 1,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
            "include_stop_str_in_output": True,
            "stop": list(self.stops.strings),
            "stop_token_ids": sorted(self.stops.token_ids),
        }
        if self.top_k > 0:
            body["top_k"] = self.top_k
        if request.seed is not None and not greedy:
            body["seed"] = request.seed
        return body

    def _one(self, request: Request, greedy: bool) -> Generation:
        choice = self._call("/v1/completions", self.payload(request, greedy))["choices"][0]
        lp = choice.get("logprobs") or {}
        ids = choice.get("token_ids")
        if ids is None:
            ids = [int(t.removeprefix("token_id:")) for t in lp.get("tokens", [])]
        logprobs = [float(x) for x in lp.get("token_logprobs", [])]
        if len(ids) != len(logprobs):
            raise RuntimeError(
                f"rollout server returned {len(ids)} token ids but "
                f"{len(logprobs)} logprobs. Fix: use a server that supports "
                "return_token_ids and logprobs"
            )
        return Generation(list(ids), logprobs, choice.get("finish_reason") or "stop")

    def release(self) -> None:
        """Nothing to free: the server holds its own caches."""
        return

    # -- weight sync -------------------------------------------------------------------------
    def sync_weights(self, policy: Policy, step: int) -> None:
        """Send ``policy``'s weights to the server (every rank calls it; rank 0 writes)."""
        if self.weight_sync == "none":
            return
        state = export_weights(policy, self.parallel)
        if self.parallel.main:
            folder = (
                self.served_dir if self.weight_sync == "vllm" else self.sync_dir / f"step-{step}"
            )
            _save(policy, state, folder)
            self._load(folder)
            if self.weight_sync != "vllm":
                _prune(self.sync_dir, keep=folder)
        self.parallel.barrier()

    def _load(self, folder: Path) -> None:
        path = str(folder.resolve())
        if self.weight_sync == "sglang":
            reply = self._call("/update_weights_from_disk", {"model_path": path})
            if reply.get("success") is False:
                raise RuntimeError(f"SGLang refused the weights in {path}: {reply.get('message')}")
        elif self.weight_sync == "vllm":
            self._call("/collective_rpc", {"method": "reload_weights"})
            self._call("/reset_prefix_cache", {})
        else:
            command = self.restart_command.replace("{path}", shlex.quote(path))  # type: ignore[union-attr]
            subprocess.run(command, shell=True, check=True)
            self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                self._call("/v1/models", timeout=5)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)


def _resolve_sync(weight_sync: WeightSync, owned_by: str) -> WeightSync:
    """``auto`` becomes the server's own kind, from ``GET /v1/models``'s ``owned_by``."""
    if weight_sync != "auto":
        return weight_sync
    if owned_by in ("sglang", "vllm"):
        return owned_by  # type: ignore[return-value]
    raise ValueError(
        f"cannot tell how to sync weights to a server owned by {owned_by!r}. Fix: "
        "--set weight_sync=sglang|vllm|restart|none"
    )


def export_weights(policy: Policy, parallel: Parallel | None = None) -> dict[str, torch.Tensor]:
    """The causal LM's weights in its own key names, LoRA adapters merged (CPU tensors; under
    FSDP every rank calls it and rank 0 gets them)."""
    parallel = parallel or Parallel()
    full = parallel.full_state_dict(policy)
    state = {k.removeprefix("model."): v for k, v in full.items() if k.startswith("model.")}
    if not hasattr(policy.model, "get_base_model"):
        return state
    prefix = "base_model.model."
    merged = {
        k.removeprefix(prefix).replace(".base_layer.", "."): v
        for k, v in state.items()
        if "lora_" not in k
    }
    for name, module in policy.model.named_modules():
        if hasattr(module, "get_delta_weight") and hasattr(module, "base_layer"):
            key = f"{name.removeprefix(prefix)}.weight"
            for adapter in getattr(module, "active_adapters", ["default"]):
                delta = module.get_delta_weight(adapter).detach().cpu()
                merged[key] = merged[key] + delta.to(merged[key].dtype)
    return merged


def _save(policy: Policy, state: dict[str, torch.Tensor], folder: Path) -> None:
    """``save_pretrained`` of ``state`` into ``folder`` (written beside it, then swapped in)."""
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    policy.lm.save_pretrained(staging, state_dict=state)
    policy.tokenizer.save_pretrained(staging)
    folder.mkdir(parents=True, exist_ok=True)
    for item in staging.iterdir():
        item.replace(folder / item.name)
    staging.rmdir()


def _prune(sync_dir: Path, keep: Path) -> None:
    """Remove the ``step-N`` folders other than ``keep``."""
    for old in sync_dir.glob("step-*"):
        if old.is_dir() and old.resolve() != keep.resolve():
            shutil.rmtree(old, ignore_errors=True)


def check_logprobs(
    behaviour: torch.Tensor,
    learner: torch.Tensor,
    raw: torch.Tensor,
    mask: torch.Tensor,
    temperature: float,
) -> dict[str, float]:
    """Check a server's behaviour logprobs against the learner's (same weights).

    Args:
        behaviour: The server's logprobs ``[B, T]``.
        learner: The learner's at the sampling temperature.
        raw: The learner's at temperature 1.
        mask: 1 on completion tokens.
        temperature: The sampling temperature.

    Returns:
        ``server/logp_abs_diff`` (to the learner at the temperature) and ``server/raw_abs_diff``.

    Raises:
        ServerLogprobError: At a temperature other than 1, when the server's numbers are
            closer to the raw (temperature-1) logprobs than to the sampled distribution's.
    """
    m = mask.bool()
    if not m.any():
        return {}
    d_t = float((behaviour - learner)[m].abs().mean())
    d_1 = float((behaviour - raw)[m].abs().mean())
    if abs(temperature - 1.0) > 1e-6 and d_1 < 0.5 * d_t:
        raise ServerLogprobError(
            f"the rollout server returns raw (temperature 1) logprobs: they differ from the "
            f"learner's at temperature {temperature} by {d_t:.3g} per token but from its "
            f"temperature-1 logprobs by {d_1:.3g}. The importance ratios would be biased. Fix: "
            "start vLLM with --logprobs-mode processed_logprobs (or sample at temperature 1)"
        )
    return {"server/logp_abs_diff": d_t, "server/raw_abs_diff": d_1}
