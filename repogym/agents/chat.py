"""One episode format for training and evaluation: the model's chat template, exact tokens.

:class:`ChatFormat` renders an episode as a conversation with the tokenizer's chat template
(or :data:`FALLBACK_TEMPLATE` for tokenizers without one): a system message, the task
observation as the user message, each completion as an assistant message and each
environment observation as a ``tool`` message (``user`` where the template has no tool role),
with the environment's tool schemas where the template renders ``tools``. The reference
trainers and the harness ``hf`` agent both use it, so training and evaluation see the same
prompts token for token.

A :class:`Dialogue` keeps the token ids of one episode. After each completion it renders the
conversation again, checks that the text of the ids so far is a prefix of the rendering,
and appends only the tokens of the rest (end of turn, observation, next generation prompt).
Nothing generated is ever re-tokenised. A template that rewrites history (Qwen3's dropping
of earlier reasoning, ``| trim`` on assistant messages, gpt-oss's refusal of channel tags in
earlier content) fails that check; the dialogue then
falls back to **delta rendering**: the text the template writes after an assistant turn for
the new message, taken from a minimal two-message conversation (as TRL and verl do), is
appended instead (``Dialogue.delta_rendered``; ``strict=True`` raises
:class:`ChatFormatError` instead).

:class:`Stops` ends a completion at a stop token (EOS, the template's end of turn), a stop
string (``</tool_call>`` by default) or the end of a closed fenced block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from jinja2 import TemplateError

from repogym.envs.actions import TOOL_HELP, openai_tools

__all__ = [
    "FALLBACK_TEMPLATE",
    "SYSTEM_PROMPT",
    "ChatFormat",
    "ChatFormatError",
    "Dialogue",
    "Stops",
    "clip_middle",
]

SYSTEM_PROMPT = (
    "You are a software engineer fixing a bug in a repository. Investigate, fix the code "
    "(not the tests), then submit.\n\n" + TOOL_HELP
)
"""The system message of every episode (trainers and the ``hf`` agent)."""

FALLBACK_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] | capitalize }}: {{ m['content'] }}"
    "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{{ '\\n\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}Assistant: {% endif %}"
)
"""``Role: text`` turns separated by blank lines, assistant turns ended by the EOS token."""

FENCE = "```"


class ChatFormatError(ValueError):
    """The chat template's rendering of the conversation does not extend the tokens so far."""


def clip_middle(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within about ``limit`` characters."""
    if len(text) <= limit:
        return text
    half = max(limit // 2 - 20, 1)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters clipped ...]\n{text[-half:]}"


@dataclass(frozen=True)
class Stops:
    """When a completion ends.

    Attributes:
        token_ids: A sampled token among these ends it (EOS, end of turn).
        strings: It ends once its text contains one of these (multi-token, e.g.
            ``</tool_call>``); the token that completes the string is the last one kept.
        closing_fence: It ends once a fenced block it opened is closed (a second ```` ``` ````).
    """

    token_ids: frozenset[int] = frozenset()
    strings: tuple[str, ...] = ()
    closing_fence: bool = False

    @property
    def needs_text(self) -> bool:
        """Whether :meth:`hit` must see the decoded text (not only the last token)."""
        return bool(self.strings) or self.closing_fence

    def hit(self, text: str) -> bool:
        """True when ``text`` (the completion so far) holds a stop string or a closed fence."""
        if any(s in text for s in self.strings):
            return True
        return self.closing_fence and text.count(FENCE) >= 2


@dataclass
class ChatFormat:
    """The chat rendering of episodes for one tokenizer (an ``EpisodeFormat``).

    Args:
        tokenizer: A Hugging Face tokenizer (fast tokenizers also give observation masks).
        system_prompt: The system message.
        tools: OpenAI-style tool schemas, passed to templates that render ``tools`` (default:
            the environment's tools; None renders none).
        max_obs_chars: Observations (and the task text) are clipped to this many characters.
        stop_strings: Multi-token stop strings.
        closing_fence: Also stop at the end of a closed fenced block.
        observation_role: ``auto`` (``tool`` if the template renders it, else ``user``).
        strict: Raise :class:`ChatFormatError` when the template rewrites history, instead
            of falling back to delta rendering.
        chat_template_kwargs: Extra keyword arguments of every rendering (e.g. Qwen3's
            ``enable_thinking``), as verl's ``data.apply_chat_template_kwargs``.
    """

    tokenizer: Any
    system_prompt: str = SYSTEM_PROMPT
    tools: list[dict[str, Any]] | None = field(default_factory=openai_tools)
    max_obs_chars: int = 8000
    stop_strings: tuple[str, ...] = ("</tool_call>",)
    closing_fence: bool = True
    observation_role: Literal["auto", "tool", "user"] = "auto"
    strict: bool = False
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    template: str = field(init=False)
    end_of_turn: int | None = field(init=False)
    stops: Stops = field(init=False)

    def __post_init__(self) -> None:
        self.template = getattr(self.tokenizer, "chat_template", None) or FALLBACK_TEMPLATE
        if self.observation_role == "auto":
            self.observation_role = "tool" if self._renders_tool_role() else "user"
        self.end_of_turn = self._end_of_turn_token()
        ids = {i for i in (self.tokenizer.eos_token_id, self.end_of_turn) if i is not None}
        self.stops = Stops(frozenset(ids), tuple(self.stop_strings), self.closing_fence)

    # -- rendering ---------------------------------------------------------------------------
    def render(self, messages: list[dict[str, str]], *, generation_prompt: bool) -> str:
        """The conversation as the template writes it."""
        kwargs: dict[str, Any] = dict(self.chat_template_kwargs)
        if self.tools and "tools" in self.template:
            kwargs["tools"] = self.tools
        return self.tokenizer.apply_chat_template(
            messages,
            chat_template=self.template,
            tokenize=False,
            add_generation_prompt=generation_prompt,
            **kwargs,
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text (special-token strings become their ids)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        """Text of token ids, special tokens kept."""
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def first_messages(self, observation: str) -> list[dict[str, str]]:
        """The system message and the task observation as the user message."""
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": clip_middle(observation, self.max_obs_chars)},
        ]

    def start(self, observation: str, info: dict[str, Any] | None = None) -> Dialogue:
        """A dialogue whose pending prompt is the first one (system + task observation, then
        ``info["hint"]`` if given: a distillation teacher's privileged context)."""
        hint = (info or {}).get("hint", "")
        return Dialogue(self, self.first_messages(observation + hint))

    def observation_message(self, observation: str) -> dict[str, str]:
        """An environment observation as a message."""
        return {
            "role": self.observation_role,
            "content": clip_middle(observation, self.max_obs_chars),
        }

    def delta_text(self, completion: str, message: dict[str, str], *, final: bool) -> str:
        """What the template writes after an assistant turn for ``message`` (and, unless
        ``final``, the next generation prompt), from a minimal conversation; the end-of-turn
        token is left out when ``completion`` already ends with it."""
        probe = "ASSISTANT-PROBE"
        base = [{"role": "user", "content": "u"}, {"role": "assistant", "content": probe}]
        text = self.render([*base, message], generation_prompt=not final)
        after = text[text.index(probe) + len(probe) :]
        eot = self.decode([self.end_of_turn]) if self.end_of_turn is not None else ""
        if eot and completion.endswith(eot) and after.startswith(eot):
            after = after[len(eot) :]
        return after

    def _renders_tool_role(self) -> bool:
        probe = [
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "a"},
            {"role": "tool", "content": "TOOL-PROBE"},
        ]
        try:
            return "TOOL-PROBE" in self.render(probe, generation_prompt=True)
        except Exception:
            return False

    def _end_of_turn_token(self) -> int | None:
        """The special token the template writes right after an assistant message, if any."""
        marker = "ASSISTANT-PROBE"
        text = self.render(
            [{"role": "user", "content": "u"}, {"role": "assistant", "content": marker}],
            generation_prompt=False,
        )
        rest = text[text.index(marker) + len(marker) :]
        ids = self.encode(rest)
        special = set(getattr(self.tokenizer, "all_special_ids", []))
        return ids[0] if ids and ids[0] in special else None


class Dialogue:
    """The token ids of one episode, extended turn by turn (see the module docstring).

    Attributes:
        messages: The conversation so far.
        ids: Every token id so far (prompts and completions).
        delta_rendered: The template rewrote history; later turns were delta-rendered.
        pending: Tokens to append before the next completion (the next prompt part).
        pending_mask: 1 on the environment-output tokens of ``pending``.
    """

    def __init__(
        self, fmt: ChatFormat, messages: list[dict[str, str]], prompt_ids: list[int] | None = None
    ) -> None:
        """``prompt_ids``: the first prompt's tokens when another path built them (verl's
        Continuous Token builder); by default the template's rendering of ``messages``."""
        self.fmt = fmt
        self.messages = list(messages)
        self.ids: list[int] = []
        self.pending: list[int] = (
            list(prompt_ids)
            if prompt_ids is not None
            else fmt.encode(fmt.render(self.messages, generation_prompt=True))
        )
        self.pending_mask: list[int] = [0] * len(self.pending)
        self.delta_rendered = False

    def add_completion(self, completion_ids: list[int]) -> list[str]:
        """Record a completion (the pending prompt and it join ``ids``); returns the env action:
        the completion's text, without a final end-of-turn token."""
        self.ids += self.pending + list(completion_ids)
        self.pending, self.pending_mask = [], []
        content_ids = list(completion_ids)
        if content_ids and content_ids[-1] == self.fmt.end_of_turn:
            content_ids = content_ids[:-1]
        content = self.fmt.decode(content_ids)
        self.messages.append({"role": "assistant", "content": content})
        return [content]

    def observe(self, observation: str, *, final: bool = False) -> None:
        """Append the observation message; ``pending`` becomes its tokens (and, unless
        ``final``, the next generation prompt's).

        Raises:
            ChatFormatError: With ``strict``, if the rendering does not extend the tokens so
                far (otherwise the delta rendering is used; see the module docstring).
        """
        message = self.fmt.observation_message(observation)
        self.messages.append(message)
        try:
            rendered = self.fmt.render(self.messages, generation_prompt=not final)
        except TemplateError as e:  # it refuses the turns as generated (gpt-oss: channel tags)
            rendered, refused = "", f"the chat template refuses the conversation so far: {e}"
        else:
            refused = ""
        so_far = self.fmt.decode(self.ids)
        delta = rendered[len(so_far) :] if rendered.startswith(so_far) and not refused else None
        pending = self.fmt.encode(delta) if delta is not None else []
        if delta is None or self.fmt.decode(self.ids + pending) != rendered:
            if self.fmt.strict:
                raise ChatFormatError(refused or _mismatch(so_far, rendered))
            delta = self.fmt.delta_text(
                self.messages[-2]["content"] + self._eot_suffix(), message, final=final
            )
            pending = self.fmt.encode(delta)
            self.delta_rendered = True
        self.pending = pending
        self.pending_mask = _content_mask(
            self.fmt.tokenizer, delta, message["content"], len(self.pending)
        )

    def _eot_suffix(self) -> str:
        """The end-of-turn token's text if the last completion ended with it."""
        eot = self.fmt.end_of_turn
        return self.fmt.decode([eot]) if eot is not None and self.ids[-1:] == [eot] else ""


def _mismatch(so_far: str, rendered: str) -> str:
    """Where the template's rendering leaves the tokens so far (strict mode's error)."""
    at = next(
        (i for i, (a, b) in enumerate(zip(so_far, rendered, strict=False)) if a != b),
        min(len(so_far), len(rendered)),
    )
    return (
        f"the chat template's rendering differs from the tokens so far at character {at}: "
        f"tokens {so_far[at : at + 60]!r} vs template {rendered[at : at + 60]!r}. The template "
        "rewrites earlier turns. Fix: use a template that renders history as it was "
        "generated, or strict=False (delta rendering)"
    )


def _content_mask(tokenizer: Any, text: str, content: str, n: int) -> list[int]:
    """1 on the tokens of ``text`` that overlap ``content`` (by character offsets)."""
    start = text.find(content) if content else -1
    if start < 0 or not getattr(tokenizer, "is_fast", False):
        return [0] * n
    end = start + len(content)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    if len(offsets) != n:
        return [0] * n
    return [int(a < end and b > start) for a, b in offsets]
