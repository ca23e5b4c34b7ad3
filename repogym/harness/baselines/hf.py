"""``hf``: a local transformers causal LM as an agent, in the trainers' episode format.

The conversation is rendered by :class:`repogym.agents.chat.ChatFormat`, the same renderer the
reference trainers use (the tokenizer's chat template, or a plain ``Role: text`` fallback; the
task observation as the user message, later observations as tool messages; exact tokens
appended turn by turn), and completions come from the trainers' in-process engine (stop
tokens and strings, KV cache kept across turns). So a model evaluated here sees the prompts it
was trained on. If a conversation outgrows the model's context, the prompt is cut from the left
(evaluation only; training submits the episode instead). torch and transformers are imported
only when the agent is built.
"""

from __future__ import annotations

from typing import Any

from repogym.harness.baselines.base import AgentError, new_usage


def _import_train_stack():
    """torch, transformers and the trainers' modules, imported when an agent is built (a
    second of start-up that ``repogym agents`` and every other command do not pay)."""
    global torch, AutoModelForCausalLM, AutoTokenizer, SYSTEM_PROMPT, ChatFormat
    global HFEngine, Request, Policy
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from repogym.agents.chat import SYSTEM_PROMPT, ChatFormat
        from repogym.agents.engines import HFEngine, Request
        from repogym.agents.policy import Policy
    except ImportError as e:  # the train extra is not installed
        raise AgentError(
            f"the hf agent needs torch and transformers ({e}). Fix: pip install 'repogym[train]'"
        ) from e


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

    def __init__(
        self,
        model: str | None = None,
        temperature: float = 0.0,
        max_new_tokens: int = 256,
        max_context: int | None = None,
        device: str | None = None,
        system_prompt: str | None = None,
    ) -> None:
        if not model:
            raise AgentError(
                "hf needs a model folder. Fix: --agent-arg model=PATH (a folder "
                "written by save_pretrained)"
            )
        _import_train_stack()
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
            lm = AutoModelForCausalLM.from_pretrained(model, local_files_only=True)
        except (OSError, ValueError) as e:
            raise AgentError(
                f"cannot load a model from {model!r}: {e}. Fix: pass a folder "
                "with config.json, weights and tokenizer files"
            ) from e
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.policy = Policy(
            lm.to(self.device).eval(), self.tokenizer, temperature=temperature or 1.0
        )
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        self.max_context = int(max_context or self.policy.max_len)
        if self.max_context <= max_new_tokens:
            raise AgentError(
                f"max_context {self.max_context} leaves no room for the prompt with "
                f"max_new_tokens={max_new_tokens}. Fix: lower max_new_tokens"
            )
        self.system_prompt = system_prompt or SYSTEM_PROMPT
        self.messages: list[dict[str, str]] = []
        self.usage = new_usage()
        self._seed = 0
        self.reset({})

    def reset(self, task_info: dict[str, Any]) -> None:
        """Start a new conversation; sampling is seeded from ``task_info['seed']``."""
        self.format = ChatFormat(self.tokenizer, system_prompt=self.system_prompt)
        self.engine = HFEngine(self.policy, self.format.stops)
        self.dialogue: Any = None
        self.messages = [{"role": "system", "content": self.system_prompt}]
        self.usage = new_usage()
        self._seed = int(task_info.get("seed") or 0)

    def prompt_text(self) -> str:
        """The conversation rendered for generation (chat template or the plain fallback)."""
        return self.format.render(self.messages, generation_prompt=True)

    def act(self, observation: str) -> str:
        """Generate the next action from the conversation so far."""
        if self.dialogue is None:
            self.dialogue = self.format.start(observation)
        else:
            self.dialogue.observe(observation)
        self.messages = self.dialogue.messages
        ids = (self.dialogue.ids + self.dialogue.pending)[
            -(self.max_context - self.max_new_tokens) :
        ]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self._seed + self.usage["requests"])
            (gen,) = self.engine.generate(
                [Request("agent", ids, self.max_new_tokens)], greedy=self.temperature <= 0
            )
        (text,) = self.dialogue.add_completion(gen.token_ids)
        self.usage["requests"] += 1
        self.usage["prompt_tokens"] += len(ids)
        self.usage["completion_tokens"] += len(gen.token_ids)
        return text
