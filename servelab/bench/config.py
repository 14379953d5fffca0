"""BenchConfig: everything a benchmark run needs, validated before any load is sent; experiment YAML."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from servelab.bench.level_key import Level
from servelab.bench.limits import (
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_ENDPOINT_BYTES,
    DEFAULT_MAX_LINE_BYTES,
)
from servelab.bench.metrics import Slo
from servelab.bench.schedule import DEFAULT_LADDER, StopRule
from servelab.bench.workloads import WorkloadSpec
from servelab.errors import ConfigError


@dataclass(frozen=True)
class BenchConfig:
    targets: tuple[str, ...]
    concurrency: tuple[int, ...] = DEFAULT_LADDER
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    stop: StopRule = field(default_factory=lambda: StopRule(requests=32))
    rate: float | None = None  # open loop (requests/s) instead of the concurrency ladder
    burstiness: float = 1.0  # gamma shape: 1 Poisson
    repeat: int = 1
    warmup: int | None = None  # warm-up requests per level (default: one per slot), excluded from results
    api_key: str | None = field(default=None, repr=False)  # Authorization header only; never stored
    model: str | None = None
    chat: bool = True
    slo: Slo = field(default_factory=Slo)
    name: str | None = None
    seed: int = 0
    stall_timeout_s: float = 120.0
    lag_limit_ms: float = 2.0  # client event-loop lag p99 above this marks a level invalid
    cpu_limit: float = 0.9  # client CPU (fraction of one core) above this marks a level invalid
    pool_per_slot: int = 8  # --duration levels cycle through this many prompts per slot
    deadline_s: float = DEFAULT_DEADLINE_S  # a whole request, besides the stall timeout
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES  # one SSE line or event
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # one answer's body
    max_endpoint_bytes: int = DEFAULT_MAX_ENDPOINT_BYTES  # one body of /v1/models, /props ...

    def __post_init__(self) -> None:
        if not self.targets:
            raise ConfigError("give at least one target URL (or an experiment YAML with targets)")
        if self.repeat < 1:
            raise ConfigError("--repeat must be >= 1")
        if self.warmup is not None and self.warmup < 0:
            raise ConfigError("--warmup must be >= 0")
        if self.rate is not None and not self.rate > 0:
            raise ConfigError(f"--rate must be a positive number of requests/s, not {self.rate}")
        if not self.deadline_s > 0 or not self.stall_timeout_s > 0:
            raise ConfigError("--deadline and --stall-timeout must be positive numbers of seconds")
        for flag, value in (("--max-line-bytes", self.max_line_bytes), ("--max-body-bytes", self.max_body_bytes),
                            ("--max-endpoint-bytes", self.max_endpoint_bytes)):  # fmt: skip
            if value < 1:
                raise ConfigError(f"{flag} must be at least 1, not {value}")

    @property
    def levels(self) -> tuple[Level, ...]:
        """The ladder: one closed-loop level per concurrency, or one open-loop level at the rate."""
        if self.rate is not None:
            return (Level.open(self.rate),)
        return tuple(Level.closed(c) for c in self.concurrency)

    def settings(self) -> dict[str, Any]:
        """What is stored with the run: every setting except the API key."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name not in ("api_key", "workload", "targets"):
                value = getattr(self, f.name)
                out[f.name] = value.__dict__ if hasattr(value, "__dict__") else value
        return out


YAML_KEYS = {
    "targets", "concurrency", "workload", "input_tokens", "output_tokens", "requests", "duration", "rate",
    "burstiness", "repeat", "warmup", "model", "chat", "name", "seed", "max_errors", "slo",
}  # fmt: skip


def load_experiment(path: Path) -> dict[str, Any]:
    """Read an experiment YAML into a dict of CLI option names; ConfigError on unknown keys."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, ValueError, yaml.YAMLError) as exc:  # ValueError: not UTF-8
        raise ConfigError(f"cannot read experiment {path}: {exc}".splitlines()[0]) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"experiment {path} must be a mapping of settings")
    unknown = sorted(set(data) - YAML_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)} in {path}; valid: {', '.join(sorted(YAML_KEYS))}"
        )
    targets = data.get("targets") or []
    if isinstance(targets, str):
        targets = [targets]
    data["targets"] = [t["url"] if isinstance(t, dict) else str(t) for t in targets]
    return data
