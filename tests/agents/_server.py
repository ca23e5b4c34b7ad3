"""A local stand-in for an OpenAI-compatible rollout server (vLLM/SGLang's token-id API).

``POST /v1/completions`` takes ``prompt`` as token ids and returns, per choice, ``token_ids``,
``logprobs.token_logprobs`` and ``logprobs.tokens`` as ``token_id:N`` (vLLM's
``return_token_ids`` / ``return_tokens_as_token_ids``). It samples as vLLM does -- logits
divided by the temperature, then top-k and top-p -- and returns, like vLLM's
``--logprobs-mode``, either the logprobs of that distribution (``processed_logprobs``) or
the raw model's at temperature 1 (``raw_logprobs``, vLLM's default). ``GET /v1/models``
names the model and its ``owned_by`` (``vllm`` or ``sglang``). Weight updates as each server
takes them: SGLang's ``POST /update_weights_from_disk {"model_path"}``; vLLM's dev-mode
``POST /collective_rpc {"method": "reload_weights"}`` (reloads the folder it was started on)
and ``POST /reset_prefix_cache``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import torch

from repogym.agents.chat import Stops
from repogym.agents.engines import HFEngine, Request
from repogym.agents.policy import load_policy


class StandInServer:
    """Serve a model folder on ``127.0.0.1:<port>`` until :meth:`close`.

    Args:
        model: The folder it serves (vLLM reloads it on ``reload_weights``).
        kind: ``vllm`` or ``sglang`` (its ``owned_by`` and its update endpoint).
        logprobs_mode: ``processed_logprobs`` or ``raw_logprobs``.
    """

    def __init__(
        self, model: Path, kind: str = "sglang", logprobs_mode: str = "processed_logprobs"
    ) -> None:
        self.model_dir = Path(model)
        self.kind, self.logprobs_mode = kind, logprobs_mode
        self.policy = load_policy(model, device="cpu")
        self.lock = threading.Lock()
        self.updates: list[str] = []
        self.calls: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def _send(self, body: dict, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send({"data": [{"id": "stand-in", "owned_by": server.kind}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.calls.append(self.path)
                if self.path == "/v1/completions":
                    self._send(server.complete(body))
                elif self.path == "/update_weights_from_disk" and server.kind == "sglang":
                    self._send(server.update(body["model_path"]))
                elif self.path == "/collective_rpc" and server.kind == "vllm":
                    assert body["method"] == "reload_weights"
                    self._send({"results": [server.update(str(server.model_dir))]})
                elif self.path == "/reset_prefix_cache" and server.kind == "vllm":
                    self._send({})
                else:
                    self._send({"detail": "Not Found"}, 404)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def complete(self, body: dict) -> dict:
        stops = Stops(frozenset(body.get("stop_token_ids") or []), tuple(body.get("stop") or ()))
        temperature = float(body.get("temperature") or 1.0)
        with self.lock:
            self.policy.temperature = temperature
            engine = HFEngine(
                self.policy,
                stops,
                reuse_cache=False,
                top_p=float(body.get("top_p", 1.0)),
                top_k=int(body.get("top_k", 0)),
            )
            seed = body.get("seed")
            (gen,) = engine.generate(
                [Request(0, body["prompt"], body["max_tokens"], seed)],
                greedy=not body.get("temperature"),
            )
            logprobs = gen.logprobs
            if self.logprobs_mode == "raw_logprobs":
                logprobs = self._raw(body["prompt"], gen.token_ids)
        tokens = [f"token_id:{t}" for t in gen.token_ids]
        return {
            "choices": [
                {
                    "text": self.policy.tokenizer.decode(gen.token_ids),
                    "token_ids": gen.token_ids,
                    "finish_reason": gen.finish_reason,
                    "logprobs": {"token_logprobs": logprobs, "tokens": tokens},
                }
            ]
        }

    @torch.no_grad()
    def _raw(self, prompt: list[int], completion: list[int]) -> list[float]:
        """The model's logprobs of the completion at temperature 1 (vLLM's default mode)."""
        ids = torch.tensor([prompt + completion])
        logits = self.policy.model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None])
        return lp[:, 0].tolist()

    def update(self, path: str) -> dict:
        with self.lock, torch.no_grad():
            fresh = load_policy(path, device="cpu")
            self.policy.model.load_state_dict(fresh.model.state_dict())
            self.updates.append(path)
        return {"success": True}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
