"""``hf``: a local transformers causal LM as an agent.

The conversation (system prompt with the tool instructions, observations as user turns, the
model's replies as assistant turns) is rendered with the tokenizer's chat template when it
has one, and as a plain ``Role: text`` prompt otherwise. The prompt is cut from the left to
fit the model's context. torch and transformers are imported only when the agent is built.
"""

from __future__ import annotations

from typing import Any

from repogym.envs.actions import TOOL_HELP
from repogym.harness.agents.base import AgentError, new_usage

SYSTEM_PROMPT = ("You are a software engineer fixing a bug in a repository. Investigate, fix "
                 "the code (not the tests), then submit.\n\n" + TOOL_HELP)


class HFAgent:
    """A local Hugging Face causal LM (offline: ``local_files_only``).

    Args:
        model: A folder with the model and tokenizer (``save_pretrained`` output).
        temperature: 0 for greedy decoding, else sampling temperature.
        max_new_tokens: Tokens generated per action.
        max_context: Prompt + generation token budget (default: the model's context length).
        device: ``cpu``, ``cuda``, ... (default: cuda when available).
        system_prompt: Replaces the default system prompt.
    """

    def __init__(self, model: str | None = None, temperature: float = 0.0,
                 max_new_tokens: int = 256, max_context: int | None = None,
                 device: str | None = None, system_prompt: str = SYSTEM_PROMPT) -> None:
        if not model:
            raise AgentError("hf needs a model folder. Fix: --agent-arg model=PATH (a folder "
                             "written by save_pretrained)")
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:
            raise AgentError(f"the hf agent needs torch and transformers ({e}). Fix: pip "
                             "install 'repogym[train]'") from e
        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
            self.model = AutoModelForCausalLM.from_pretrained(model, local_files_only=True)
        except (OSError, ValueError) as e:
            raise AgentError(f"cannot load a model from {model!r}: {e}. Fix: pass a folder "
                             "with config.json, weights and tokenizer files") from e
        self.model.to(self.device).eval()
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        limit = max_context or getattr(self.model.config, "max_position_embeddings", None)
        self.max_context = int(limit or 4096)
        if self.max_context <= max_new_tokens:
            raise AgentError(f"max_context {self.max_context} leaves no room for the prompt with "
                             f"max_new_tokens={max_new_tokens}. Fix: lower max_new_tokens")
        self.system_prompt = system_prompt
        self.messages: list[dict[str, str]] = []
        self.usage = new_usage()
        self._seed = 0

    def reset(self, task_info: dict[str, Any]) -> None:
        """Start a new conversation; sampling is seeded from ``task_info['seed']``."""
        self.messages = [{"role": "system", "content": self.system_prompt}]
        self.usage = new_usage()
        self._seed = int(task_info.get("seed") or 0)

    def prompt_text(self) -> str:
        """The conversation rendered for generation (chat template or plain prompt)."""
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(self.messages, tokenize=False,
                                                      add_generation_prompt=True)
        turns = [f"{m['role'].capitalize()}: {m['content']}" for m in self.messages]
        return "\n\n".join(turns) + "\n\nAssistant: "

    def act(self, observation: str) -> str:
        """Generate the next action from the conversation so far."""
        torch = self.torch
        self.messages.append({"role": "user", "content": observation})
        ids = self.tokenizer(self.prompt_text(), add_special_tokens=False)["input_ids"]
        ids = ids[-(self.max_context - self.max_new_tokens):]
        input_ids = torch.tensor([ids], device=self.device)
        gen_kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens,
                                      "do_sample": self.temperature > 0,
                                      "attention_mask": torch.ones_like(input_ids)}
        if self.temperature > 0:
            gen_kwargs["temperature"] = self.temperature
        pad = self.tokenizer.pad_token_id
        gen_kwargs["pad_token_id"] = pad if pad is not None else self.tokenizer.eos_token_id
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(self._seed + self.usage["requests"])
            out = self.model.generate(input_ids, **gen_kwargs)
        new = out[0, input_ids.shape[1]:]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        self.usage["requests"] += 1
        self.usage["prompt_tokens"] += len(ids)
        self.usage["completion_tokens"] += int(new.shape[0])
        self.messages.append({"role": "assistant", "content": text})
        return text
