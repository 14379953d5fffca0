"""One answer of `servelab sim` as bytes: its SSE events (role, content, usage, [DONE]) and the whole response
without streaming. Content token i is the text "ti " (one word, one token by the sim's tokenizer)."""

from __future__ import annotations

import json
import time
from typing import Any


class SimAnswer:
    """One answer: how many tokens, in which chunks, with which usage reporting."""

    def __init__(
        self, *, chat: bool, model: str, prompt_tokens: int, out: int, k: int, usage: str, finish: str
    ) -> None:
        self.chat, self.model, self.prompt_tokens, self.out = chat, model, prompt_tokens, out
        self.k, self.usage, self.finish = k, usage, finish
        self.chunks = -(-out // k)
        self.created = int(time.time())
        self._template: tuple[bytes, bytes] | None = None

    @classmethod
    def empty(cls) -> SimAnswer:
        return cls(chat=False, model="", prompt_tokens=0, out=1, k=1, usage="off", finish="stop")

    def role_delta(self) -> dict:
        return {"role": "assistant", "content": ""}

    def tokens_in(self, j: int) -> int:
        return min(self.k, self.out - j * self.k)

    def text_of(self, j: int) -> str:
        return "".join(f"t{j * self.k + i} " for i in range(self.tokens_in(j)))

    def content_event(self, n: int, j: int) -> bytes:
        finish = self.finish if j == self.chunks - 1 else None
        done = min(self.out, (j + 1) * self.k)
        if finish is None and self.usage != "continuous":  # the common chunk, without json.dumps
            return self._plain_event(n, self.text_of(j))
        if self.chat:
            payload: dict = {"content": self.text_of(j)}
            return self.event(n, payload, finish, done)
        return self.event(n, self.text_of(j), finish, done)

    def span_event(self, n: int, start: int, count: int) -> bytes:
        """The event carrying tokens start..start+count-1 (an emulated engine's step emits 1, or more with
        speculative decoding), the last one with its finish reason."""
        text = "".join(f"t{i} " for i in range(start, start + count))
        done = start + count
        finish = self.finish if done >= self.out else None
        if finish is None and self.usage != "continuous":
            return self._plain_event(n, text)
        return self.event(n, {"content": text} if self.chat else text, finish, done)

    def _plain_event(self, n: int, text: str) -> bytes:
        """The same JSON as event(), built from a template made once per answer (the text is a safe
        "tN tN+1 " string)."""
        if self._template is None:
            field = '"delta":{"content":"' if self.chat else '"text":"'
            head = f'{{"id":"sim-{n}","object":"{self._object(True)}","created":{self.created},"model":{json.dumps(self.model)}'
            self._template = (
                f'data: {head},"choices":[{{"index":0,"finish_reason":null,{field}'.encode(),
                b'"}}]}\n\n' if self.chat else b'"}]}\n\n',
            )
        return self._template[0] + text.encode() + self._template[1]

    def usage_dict(self, completion: int) -> dict:
        total = self.prompt_tokens + completion
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion, "total_tokens": total}

    def event(self, n: int, delta: dict | str, finish: str | None, done: int) -> bytes:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if self.chat:
            choice["delta"] = delta
        else:
            choice["text"] = delta
        body: dict[str, Any] = {"id": f"sim-{n}", "object": self._object(True), "created": self.created}
        body.update(model=self.model, choices=[choice])
        if self.usage == "continuous":
            body["usage"] = self.usage_dict(done)
        return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"

    def usage_event(self, n: int) -> bytes:
        body = {"id": f"sim-{n}", "object": self._object(True), "created": self.created, "model": self.model}
        body.update(choices=[], usage=self.usage_dict(self.out))
        return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"

    def full_response(self, n: int) -> dict:
        text = "".join(f"t{i} " for i in range(self.out))
        choice: dict[str, Any] = {"index": 0, "finish_reason": self.finish}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        body = {"id": f"sim-{n}", "object": self._object(False), "created": self.created, "model": self.model}
        body.update(choices=[choice], usage=self.usage_dict(self.out))
        return body

    def _object(self, stream: bool) -> str:
        if self.chat:
            return "chat.completion.chunk" if stream else "chat.completion"
        return "text_completion"
