"""BenchConfig: everything a benchmark run needs, validated before any load is sent; experiment YAML."""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from servelab.bench.limits import (
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_ENDPOINT_BYTES,
    DEFAULT_MAX_LINE_BYTES,
)
from servelab.bench.metrics import Slo
from servelab.bench.rate_search import SearchSpec
from servelab.bench.schedule import DEFAULT_LADDER, MAX_LEVEL_SECONDS, MAX_REQUESTS, StopRule
from servelab.bench.trace import Trace
from servelab.bench.workloads import WorkloadSpec
from servelab.errors import ConfigError
from servelab.ranges import count, number
from servelab.results.level_key import Level
from servelab.userfiles import UserFile

MAX_REPEATS = 1_000
MAX_EXPERIMENT_BYTES = 1 << 20  # an experiment YAML: a few dozen settings
MIN_RATE, MAX_RATE = 0.001, 1_000_000.0  # requests/s
MAX_BURSTINESS = 1_000.0  # gamma shape; inf means evenly spaced
MAX_WORKERS = 4096  # --workers
MAX_TEMPERATURE = 100.0  # OpenAI's API stops at 2; servers differ, none needs more than this


@dataclass(frozen=True, kw_only=True)
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
    temperature: float | None = None  # sent with every request; None: the server's default sampling
    stall_timeout_s: float = 120.0
    lag_limit_ms: float = 2.0  # client event-loop lag p99 above this marks a level invalid
    cpu_limit: float = 0.9  # client CPU (fraction of one core) above this marks a level invalid
    pool_per_slot: int = 8  # --duration levels cycle through this many prompts per slot
    deadline_s: float = DEFAULT_DEADLINE_S  # a whole request, besides the stall timeout
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES  # one SSE line or event
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # one answer's body
    max_endpoint_bytes: int = DEFAULT_MAX_ENDPOINT_BYTES  # one body of /v1/models, /props ...
    follow_redirects: bool = False  # --follow-redirects: a load request's 3xx to the same host and port only
    ramp_s: float | None = None  # --ramp: seconds of linear rise at each level's start, outside its figures
    search: SearchSpec | None = None  # --find-max-rate: open-loop levels from --rate up, chosen one by one
    trace: Trace | None = None  # --trace: one open-loop level, arrivals and lengths from the file
    workers: int | None = None  # --workers N: the load from N worker processes (bench/workers.py)
    ray: str | None = None  # --ray ADDRESS: the workers as Ray actors (bench/ray_workers.py)

    def __post_init__(self) -> None:
        if not self.targets:
            raise ConfigError("give at least one target URL (or an experiment YAML with targets)")
        count(self.repeat, "--repeat", 1, MAX_REPEATS)
        self._check_trace()
        if self.warmup is not None:
            count(self.warmup, "--warmup", 0, MAX_REQUESTS, "requests per level")
        number(self.burstiness, "--burstiness", 0, MAX_BURSTINESS, "(or inf)", above=True, inf_allowed=True)
        if self.rate is not None:
            number(self.rate, "--rate", MIN_RATE, MAX_RATE, "requests/s")
            if self.stop.requests is not None and self.stop.requests / self.rate > MAX_LEVEL_SECONDS:
                raise ConfigError(
                    f"--rate {self.rate:g} would take {self.stop.requests / self.rate:,.0f} s to send "
                    f"{self.stop.requests} requests (over {MAX_LEVEL_SECONDS:,.0f} s): raise --rate or lower --requests"
                )
        self._check_ramp()
        self._check_search()
        if self.temperature is not None:
            number(self.temperature, "--temperature", 0, MAX_TEMPERATURE, "(0 = greedy)")
        number(self.deadline_s, "--deadline", 0.001, 7 * 86400.0, "seconds", above=True)
        number(self.stall_timeout_s, "--stall-timeout", 0.001, 7 * 86400.0, "seconds", above=True)
        if self.workers is not None:
            count(self.workers, "--workers", 1, MAX_WORKERS, "worker processes")
        if self.ray is not None and not self.ray.strip():
            raise ConfigError("--ray needs an address: auto (the cluster Ray finds), local, or HOST:PORT")
        for flag, value in (
            ("--max-line-bytes", self.max_line_bytes),
            ("--max-body-bytes", self.max_body_bytes),
            ("--max-endpoint-bytes", self.max_endpoint_bytes),
        ):
            count(value, flag, 1, 2**40, "bytes")

    def _check_ramp(self) -> None:
        if self.ramp_s is None:
            return
        number(self.ramp_s, "--ramp", 0, MAX_LEVEL_SECONDS, "seconds", above=True)
        if self.rate is not None and self.rate * self.ramp_s / 2 > MAX_REQUESTS:
            raise ConfigError(
                f"--ramp {self.ramp_s:g} at --rate {self.rate:g} would send about {self.rate * self.ramp_s / 2:,.0f} "
                f"requests during the ramp (over {MAX_REQUESTS:,}): shorten --ramp"
            )

    def _check_search(self) -> None:
        if self.search is None:
            return
        if self.slo.empty:
            raise ConfigError(
                "--find-max-rate needs --slo (e.g. --slo ttft_ms=500,tpot_ms=50): the SLOs to meet"
            )
        if self.rate is None:
            raise ConfigError("--find-max-rate needs --rate: the first (lowest) rate to probe")
        if self.search.cap_rps < self.rate:
            raise ConfigError(
                f"--max-rate {self.search.cap_rps:g} is below --rate {self.rate:g} (the first probe)"
            )

    def _check_trace(self) -> None:
        if self.trace is None:
            return
        for given, flag in ((self.search, "--find-max-rate"), (self.ramp_s, "--ramp")):
            if given is not None:
                raise ConfigError(f"--trace replays the trace's own arrivals: drop {flag}")
        if self.rate is not None:
            raise ConfigError(
                "--trace sets the arrivals: drop --rate (the level is labelled with the trace's mean rate)"
            )
        # one open-loop level: labelled with the trace's mean rate, as many measured requests as rows
        object.__setattr__(self, "rate", self.trace.mean_rate_rps)
        stop = StopRule(requests=len(self.trace.requests), max_errors=self.stop.max_errors)
        object.__setattr__(self, "stop", stop)

    def warmup_requests(self, slots: int) -> int:
        """Warm-up requests of a level: --warmup, else one per slot (none with a ramp, which warms up)."""
        if self.warmup is not None:
            return self.warmup
        return 0 if self.ramp_s else slots

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
            if f.name == "trace" and self.trace is not None:
                out["trace"] = self.trace.describe()
            elif f.name not in ("api_key", "workload", "targets"):
                value = getattr(self, f.name)
                out[f.name] = value.__dict__ if hasattr(value, "__dict__") else value
        return out


YAML_KEYS = {
    "targets",
    "concurrency",
    "workload",
    "input_tokens",
    "output_tokens",
    "requests",
    "duration",
    "rate",
    "burstiness",
    "repeat",
    "warmup",
    "model",
    "chat",
    "name",
    "seed",
    "temperature",
    "max_errors",
    "slo",
    "ramp",
    "find_max_rate",
    "max_rate",
    "probes",
    "attainment",
    "trace",
    "trace_speed",
}


def load_experiment(path: Path) -> dict[str, Any]:
    """Read an experiment YAML into a dict of CLI option names; ConfigError on unknown keys."""
    data = (
        UserFile.named(path, "--config", "give an experiment YAML file").load_yaml(MAX_EXPERIMENT_BYTES) or {}
    )
    if not isinstance(data, dict):
        raise ConfigError(f"experiment {path} must be a mapping of settings")
    unknown = sorted(set(data) - YAML_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)} in {path}; valid: {', '.join(sorted(YAML_KEYS))}"
        )
    data["targets"] = _yaml_targets(data.get("targets"), path)
    for key, kind, words in (
        ("model", str, "a string"),
        ("name", str, "a string"),
        ("workload", str, "a string"),
        ("chat", bool, "true or false"),
    ):
        if data.get(key) is not None and not isinstance(data[key], kind):
            raise ConfigError(f"{key} in {path} must be {words}, got {_shown(data[key])}")
    return data


def _shown(value: object) -> str:
    """A value from the file as an error shows it: its repr, cut at 80 characters."""
    text = reprlib.repr(value)
    return text if len(text) <= 80 else text[:80] + "…"


def _yaml_targets(targets: object, path: Path) -> list[str]:
    """``targets``: a URL, or a list of URLs or of mappings with a ``url``."""
    targets = [] if targets is None else [targets] if isinstance(targets, str) else targets
    if isinstance(targets, list):
        urls = [t.get("url") if isinstance(t, dict) else t for t in targets]
        if all(isinstance(u, str) and u for u in urls):
            return [str(u) for u in urls]
    raise ConfigError(
        f"targets in {path} must be a URL or a list of URLs (or of mappings with a url), got {_shown(targets)}"
    )
