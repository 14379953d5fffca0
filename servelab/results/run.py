"""A stored run's own documents as typed values: `RunMeta` (what was run, how, from where), its `RunWorkload`, the
bench client's path through aiohttp (`EdgeReport`), what a prediction emulated (`Prediction` of a
`PredictTarget`), and each target's `TargetInfo`. A level's document is `stats.LevelSummary`.

bench and predict build them; the store writes them as JSON (`to_json`) and gives them back (`from_json`, after
migration m003 made every stored row of this shape); report, export, compare, calibrate and speculative read
their fields. The keys are documented in docs/results-schema.md and pinned by tests/unit/test_store_schema.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

BodyPath = Literal["protocol-callback", "public-reader"]
StallTimer = Literal["servelab", "aiohttp"]
PREDICTED_URL = "predict://{engine}/{gpu}"  # the target "URL" of a predicted run (never contacted)


@dataclass(frozen=True)
class EdgeReport:
    """Which path the bench client takes through aiohttp, and why (the internals not found;
    bench/aiohttp_edge.py checks them)."""

    aiohttp_version: str
    body: BodyPath
    stall_timer: StallTimer
    missing: tuple[str, ...] = ()

    @property
    def fast_body(self) -> bool:
        return self.body == "protocol-callback"

    def to_json(self) -> dict[str, Any]:
        return {
            "aiohttp_version": self.aiohttp_version,
            "body": self.body,
            "stall_timer": self.stall_timer,
            "missing": list(self.missing),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EdgeReport:
        return cls(data["aiohttp_version"], data["body"], data["stall_timer"], tuple(data["missing"]))


@dataclass(frozen=True, kw_only=True)
class RunWorkload:
    """The prompts of a run: a preset, a file or "trace", their lengths where fixed, the seed, chat or not."""

    kind: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    seed: int | None = None
    chat: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "seed": self.seed,
            "chat": self.chat,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunWorkload:
        return cls(
            kind=data["kind"],
            input_tokens=data["input_tokens"],
            output_tokens=data["output_tokens"],
            seed=data["seed"],
            chat=data["chat"],
        )


@dataclass(frozen=True, kw_only=True)
class PredictTarget:
    """What `servelab predict` emulates."""

    engine: str
    model: str
    gpu: str
    quant: str
    tensor_parallel: int = 1
    interconnect: str | None = None
    plan_file: str | None = None
    engine_version: str | None = None  # the release whose rules were planned (None: the current one)

    @property
    def url(self) -> str:
        return PREDICTED_URL.format(engine=self.engine, gpu=self.gpu)


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """A predicted run's emulated target and the figures it ran on (predict's roofline figures and its
    speculation, each by field name: predict's types, kept here as numbers)."""

    target: PredictTarget
    effective: dict[str, Any] = field(default_factory=dict)
    speculation: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self.target), "effective": dict(self.effective), "speculation": self.speculation}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Prediction:
        target = {k: v for k, v in data.items() if k not in ("effective", "speculation")}
        return cls(
            target=PredictTarget(**target), effective=data["effective"], speculation=data["speculation"]
        )


@dataclass(frozen=True, kw_only=True)
class RunMeta:
    """What a run was: its name, the servelab and host that ran it, the workload, the bench's options (`settings`,
    every option but the API key, by its field name in `BenchConfig`), the targets' URLs (never user:password@),
    the client's aiohttp path, the clocks' anchors (wall ns since the epoch and the monotonic ns of the same
    moment, which place the records' stamps in time) and, for a prediction, what was emulated."""

    name: str | None = None
    servelab_version: str | None = None
    client_host: str | None = None  # None for a prediction (no client ran)
    workload: RunWorkload | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    targets: tuple[str, ...] = ()
    client_edge: EdgeReport | None = None
    wall_anchor_ns: int | None = None
    mono_anchor_ns: int | None = None
    predicted: Prediction | None = None

    @property
    def slo(self) -> dict[str, float]:
        """The run's goodput SLO limits (`bench --slo`), by metric name; empty without one."""
        limits = self.settings.get("slo")
        if not isinstance(limits, dict):
            return {}
        return {
            k: v for k, v in limits.items() if isinstance(v, int | float) and not isinstance(v, bool) and v
        }

    @property
    def burstiness(self) -> float:
        value = self.settings.get("burstiness", 1.0)
        return float(value) if isinstance(value, int | float) else 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "servelab_version": self.servelab_version,
            "client_host": self.client_host,
            "workload": None if self.workload is None else self.workload.to_json(),
            "settings": self.settings,
            "targets": list(self.targets),
            "client_edge": None if self.client_edge is None else self.client_edge.to_json(),
            "wall_anchor_ns": self.wall_anchor_ns,
            "mono_anchor_ns": self.mono_anchor_ns,
            "predicted": None if self.predicted is None else self.predicted.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunMeta:
        """Read what `to_json` wrote (a KeyError or TypeError for anything else)."""
        workload, edge, predicted = data["workload"], data["client_edge"], data["predicted"]
        return cls(
            name=data["name"],
            servelab_version=data["servelab_version"],
            client_host=data["client_host"],
            workload=None if workload is None else RunWorkload.from_json(workload),
            settings=data["settings"],
            targets=tuple(data["targets"]),
            client_edge=None if edge is None else EdgeReport.from_json(edge),
            wall_anchor_ns=data["wall_anchor_ns"],
            mono_anchor_ns=data["mono_anchor_ns"],
            predicted=None if predicted is None else Prediction.from_json(predicted),
        )


@dataclass(frozen=True, kw_only=True)
class TargetInfo:
    """What the store keeps about one target besides its URL and engine: the server's version, the model it
    serves, the context per slot; `predicted` for a target `servelab predict` emulated. Never an API key."""

    version: str | None = None
    model: str | None = None
    context_per_slot: int | None = None
    predicted: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version,
            "model": self.model,
            "context_per_slot": self.context_per_slot,
        }
        if self.predicted:
            out["predicted"] = True
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TargetInfo:
        """Read what `to_json` wrote (a KeyError or TypeError for anything else)."""
        return cls(
            version=data["version"],
            model=data["model"],
            context_per_slot=data["context_per_slot"],
            predicted=data.get("predicted", False),
        )
