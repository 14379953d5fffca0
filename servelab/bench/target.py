"""A benchmark target, checked before any load: reachable, OpenAI-compatible, serving the model, with
a context that fits the workload. Its prompts are built here (with its own tokenizer) before the run."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from servelab.bench.config import BenchConfig
from servelab.bench.trace import TraceRequest
from servelab.bench.workloads import Prompt, build_prompts, build_trace_prompts
from servelab.engines import registry
from servelab.engines.base import BenchExtras
from servelab.engines.detect import detect_engine
from servelab.engines.http import HttpProbe, public_url
from servelab.errors import ConfigError
from servelab.results.run import TargetInfo


@dataclass(frozen=True, kw_only=True)
class Target:
    index: int
    url: str
    engine: str
    model: str
    context: int | None
    version: str | None
    extras: BenchExtras
    probe: HttpProbe

    def info(self) -> TargetInfo:
        """What the store keeps about the target (never the API key)."""
        return TargetInfo(version=self.version, model=self.model, context_per_slot=self.context)

    def request_body(self, prompt: Prompt, chat: bool, temperature: float | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, **prompt.body(), "max_tokens": prompt.output_tokens}
        body["stream"] = True
        if temperature is not None:
            body["temperature"] = temperature
        body.update(self.extras.request_fields())
        return body


class ServerTokenizer:
    """The target's own tokenizer through its endpoints; remembers when an endpoint is missing."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._has_ids = self._has_chat = True

    def ids(self, text: str) -> list[int] | None:
        if not self._has_ids:
            return None
        ids = self.target.extras.tokenize(self.target.probe, text, self.target.model)
        self._has_ids = ids is not None
        return ids

    def count_chat(self, messages: list[dict]) -> int | None:
        if not self._has_chat:
            return None
        count = self.target.extras.count_chat_tokens(self.target.probe, messages, self.target.model)
        self._has_chat = count is not None
        return count


def connect_target(index: int, url: str, config: BenchConfig) -> Target:
    """Detect the engine and check the model: TargetError / ConfigError before any load is sent."""
    detected = detect_engine(url, api_key=config.api_key, max_bytes=config.max_endpoint_bytes)
    probe = HttpProbe(url, config.api_key, timeout_s=30.0, max_bytes=config.max_endpoint_bytes)
    model = config.model or (detected.models[0] if detected.models else None)
    if model is None:
        raise ConfigError(f"{public_url(url)} lists no model; pass --model NAME")
    if detected.models and model not in detected.models:
        served = ", ".join(detected.models)
        raise ConfigError(f"{public_url(url)} does not serve model {model!r}; it serves: {served}")
    engine = registry.get_engine(detected.name)
    effective = engine.endpoints.read_effective(probe)
    context = effective.get("context_per_slot")
    if type(context) is not int or context < 1:  # a server value of any other type or size: unknown
        context = None
    return Target(
        index=index,
        url=probe.base_url,
        engine=detected.name,
        model=model,
        context=context,
        version=detected.version,
        extras=engine.bench_extras,
        probe=probe,
    )


def target_prompts(target: Target, config: BenchConfig, count: int) -> list[Prompt]:
    """Prompts 0..count-1 for this target; ConfigError when one cannot fit the server's context."""
    spec = config.workload
    use_ids = target.extras.ACCEPTS_TOKEN_IDS and not config.chat
    if use_ids != spec.use_token_ids or spec.chat != config.chat:
        spec = replace(spec, use_token_ids=use_ids, chat=config.chat)
    if config.trace is not None:
        prompts = build_trace_prompts(spec, trace_rows(config, count), ServerTokenizer(target))
    else:
        prompts = build_prompts(spec, count, ServerTokenizer(target), target.context)
    if target.context is not None:
        for p in prompts:
            if p.input_tokens is not None and p.input_tokens + p.output_tokens > target.context:
                raise ConfigError(
                    f"prompt {p.index} needs {p.input_tokens} + {p.output_tokens} tokens but "
                    f"{public_url(target.url)} has a context of {target.context} per slot; use a shorter workload"
                )
    return prompts


def trace_rows(config: BenchConfig, count: int) -> list[TraceRequest]:
    """The trace row each of ``count`` prompts is shaped like: per repeat, the warm-up requests (the first
    rows' shapes) then every row in order, as the runner hands prompts to a level."""
    rows = config.trace.requests if config.trace is not None else ()
    warmup = config.warmup_requests(1)
    block = [rows[i % len(rows)] for i in range(warmup)] + list(rows)
    return [block[i % len(block)] for i in range(count)]
