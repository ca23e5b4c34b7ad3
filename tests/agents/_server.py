"""A local stand-in for an OpenAI-compatible rollout server (vLLM/SGLang's token-id API).

``POST /v1/completions`` takes ``prompt`` as token ids and returns, per choice, ``token_ids``,
``logprobs.token_logprobs`` and ``logprobs.tokens`` as ``token_id:N`` (vLLM's
``return_token_ids`` / ``return_tokens_as_token_ids``); ``POST /update_weights_from_disk``
(SGLang's name) loads ``{"model_path": ...}``; ``GET /v1/models`` lists the model. It samples
with the trainers' own HF engine on a model loaded from disk, in its own thread.
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
    """Serve a model folder on ``127.0.0.1:<port>`` until :meth:`close`."""

    def __init__(self, model: Path) -> None:
        self.policy = load_policy(model, device="cpu")
        self.lock = threading.Lock()
        self.updates: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def _send(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send({"data": [{"id": "stand-in"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/update_weights_from_disk":
                    self._send(server.update(body["model_path"]))
                else:
                    self._send(server.complete(body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def complete(self, body: dict) -> dict:
        stops = Stops(frozenset(body.get("stop_token_ids") or []), tuple(body.get("stop") or ()))
        with self.lock:
            self.policy.temperature = float(body.get("temperature") or 1.0)
            engine = HFEngine(self.policy, stops, reuse_cache=False)
            (gen,) = engine.generate([Request(0, body["prompt"], body["max_tokens"])],
                                     greedy=not body.get("temperature"))  # fmt: skip
        tokens = [f"token_id:{t}" for t in gen.token_ids]
        return {"choices": [{"text": self.policy.tokenizer.decode(gen.token_ids),
                             "token_ids": gen.token_ids, "finish_reason": gen.finish_reason,
                             "logprobs": {"token_logprobs": gen.logprobs, "tokens": tokens}}]}  # fmt: skip

    def update(self, path: str) -> dict:
        with self.lock, torch.no_grad():
            fresh = load_policy(path, device="cpu")
            self.policy.model.load_state_dict(fresh.model.state_dict())
            self.updates.append(path)
        return {"success": True}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
