"""`RequestMaker`: a level's requests by their position (serial), as plain data.

Built once per level before the load (bodies encoded ahead), picklable, so a worker process or a Ray actor
builds exactly the requests the coordinator would have: request ``serial`` of a level is the same prompt in
one process or across N workers.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.bench.client import ClientRequest


@dataclass(frozen=True)
class PromptSlot:
    """One prompt of the level, ready to send."""

    body: dict
    payload: bytes
    request_index: int  # the prompt's index in the workload (identical across targets)
    expected_prompt_tokens: int | None = None
    expected_cached_tokens: int | None = None


@dataclass(frozen=True)
class RequestMaker:
    """``maker(serial, phase, intended_ns) -> ClientRequest``: warm-up serials take prompts in order, measured
    ones cycle through the level's pool (a --duration level sends more requests than it has prompts)."""

    path: str
    target_index: int
    level: str
    repeat: int
    warmup: int
    prompts: tuple[PromptSlot, ...]

    def __call__(self, serial: int, phase: str, intended_ns: int | None) -> ClientRequest:
        pool = max(1, len(self.prompts) - self.warmup)
        at = serial if serial < self.warmup else self.warmup + (serial - self.warmup) % pool
        prompt = self.prompts[at]
        return ClientRequest(
            path=self.path,
            body=prompt.body,
            target_index=self.target_index,
            level=self.level,
            repeat=self.repeat,
            payload=prompt.payload,
            request_index=prompt.request_index,
            phase=phase,
            intended_ns=intended_ns,
            serial=serial,
            expected_prompt_tokens=prompt.expected_prompt_tokens,
            expected_cached_tokens=prompt.expected_cached_tokens,
        )
