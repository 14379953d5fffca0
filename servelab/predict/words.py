"""The tokenizer of an emulated engine: one token per word, as `servelab sim` counts (sim/config.py), each word
an id of its own, so the workload's prompts (bench/workloads.py) have exact lengths and shared prefixes
show up as shared token ids."""

from __future__ import annotations

from servelab.bench.workloads import Prompt

CHAT_TOKENS_PER_MESSAGE = (
    4  # servelab sim's and an emulated engine's "chat template": 4 tokens around each message ...
)
CHAT_TOKENS_PER_PROMPT = 2  # ... and 2 for the assistant turn header
_TEMPLATE = -1  # the id of every chat-template token (never a word's)
_RAW = -2  # a prompt given as token ids: id k becomes _RAW - k (never a word's, never the template's)


def message_text(content: object) -> str:
    """A chat message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, list):  # [{"type": "text", "text": ...}]
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


class WordTokenizer:
    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._prompts: dict[int, tuple[Prompt, tuple[int, ...]]] = {}  # id(prompt) -> (prompt, its ids)

    def ids(self, text: str) -> list[int]:
        words = text.split()
        try:  # every word seen before (the workload's vocabulary is small): one lookup in C per word
            return list(map(self._ids.__getitem__, words))
        except KeyError:  # new words take the next ids, in the order they come
            return [self._ids.setdefault(word, len(self._ids)) for word in words]

    def count_chat(self, messages: list[dict]) -> int:
        words = sum(len(str(m.get("content", "")).split()) for m in messages)
        return words + CHAT_TOKENS_PER_MESSAGE * len(messages) + CHAT_TOKENS_PER_PROMPT

    def prompt_ids(self, prompt: Prompt) -> tuple[int, ...]:
        """The token ids the engine sees for `prompt` (a chat prompt wrapped in its template tokens). Kept per
        prompt object (a word's id never changes once given): advise sends the same prompts at every probe."""
        seen = self._prompts.get(id(prompt))
        if seen is not None and seen[0] is prompt:
            return seen[1]
        ids = self._prompt_ids(prompt)
        self._prompts[id(prompt)] = (prompt, ids)
        return ids

    def _prompt_ids(self, prompt: Prompt) -> tuple[int, ...]:
        if prompt.token_ids is not None:
            return prompt.token_ids
        if prompt.messages is None:
            return tuple(self.ids(prompt.text or ""))
        out: list[int] = []
        for message in prompt.messages:
            out += [_TEMPLATE] * CHAT_TOKENS_PER_MESSAGE + self.ids(str(message.get("content", "")))
        return (*out, *([_TEMPLATE] * CHAT_TOKENS_PER_PROMPT))

    def request_ids(self, body: dict, chat: bool) -> tuple[int, ...]:
        """The token ids of an OpenAI request body, as many as `sim_prompt_tokens` counts (sim --emulate)."""
        if chat:
            out: list[int] = []
            for message in body.get("messages") or []:
                text = message_text(message.get("content")) if isinstance(message, dict) else ""
                out += [_TEMPLATE] * CHAT_TOKENS_PER_MESSAGE + self.ids(text)
            return (*out, *([_TEMPLATE] * CHAT_TOKENS_PER_PROMPT))
        prompt = body.get("prompt", "")
        while isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
            prompt = prompt[0]  # a batch of prompts: the first, as the sim counts
        if isinstance(prompt, str):
            return tuple(self.ids(prompt))
        if isinstance(prompt, list):
            return tuple(_RAW - k if isinstance(k, int) else _RAW for k in prompt)
        return ()
