"""Data assembly for the bill: stored runs plus an optional plan document and doctor / spec JSON files.

Pure: takes loaded runs, the typed plan document (`plan.io.load_plan`) and parsed JSON, returns a `Bill`.
Rendering (HTML, Markdown, terminal) reads only the `Bill`. A section whose input is absent carries a note
saying what to pass to get it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from servelab.engines import registry
from servelab.engines.base import LogMemory
from servelab.errors import ConfigError
from servelab.plan.io import read_json_object
from servelab.plan.saved import PlanDocument, SavedCeilings, SavedMemory, SavedPlan
from servelab.report.compare import workload_warnings
from servelab.report.levels import LevelFigures, all_level_figures
from servelab.report.plan_figures import PlanFigures, pick_plan, plans_for
from servelab.results.run import RunWorkload, TargetInfo
from servelab.store import RunInfo, StoredRun


@dataclass(frozen=True, kw_only=True)
class EngineSummary:
    """One engine/configuration: a target of a stored run, with its ladder."""

    label: str  # "llamacpp · model-name · workload" (+ run id where two would collide): `series_labels`
    run_id: str
    target_index: int
    engine: str
    model: str
    url: str
    partial: bool
    levels: tuple[LevelFigures, ...]
    usable_context: int | None  # context per request/slot (the target's, as the bench read it)
    memory_used_bytes: int | None  # its GPUs' peak (power samples), or what its server log says it allocated
    workload: str = ""  # the run's workload kind (a file's name for a file)
    predicted: bool = False  # a `servelab predict` run (meta.predicted): emulated, not measured
    plan: SavedPlan | None = None  # the plan entry of this engine (`plan_figures.plans_for`): its ceilings

    @property
    def planned(self) -> PlanFigures:
        """This engine's ceilings, planned context and memory, from its own plan entry."""
        return PlanFigures(self.plan)

    @property
    def closed_loop(self) -> tuple[LevelFigures, ...]:
        return tuple(lv for lv in self.levels if lv.concurrency is not None)

    @property
    def single_stream(self) -> LevelFigures | None:
        return next((lv for lv in self.closed_loop if lv.concurrency == 1), None)

    @property
    def single_stream_tok_s(self) -> float | None:
        lv = self.single_stream
        return None if lv is None else lv.stats.per_stream_tok_s.median

    @property
    def best_aggregate(self) -> LevelFigures | None:
        return max(self.closed_loop, key=lambda lv: lv.aggregate_tok_s, default=None)

    @property
    def evictions(self) -> int:
        return sum(lv.evictions for lv in self.levels)


@dataclass(frozen=True, kw_only=True)
class Bill:
    run_ids: tuple[str, ...]
    engines: tuple[EngineSummary, ...]
    warnings: tuple[str, ...]
    plan: SavedPlan | None  # the first engine's plan entry; each engine's own is `EngineSummary.plan`
    plan_model: str | None  # model and gpu of the plan document it is from
    plan_gpu: str | None
    doctor: dict | None  # `servelab doctor --json`
    spec: dict | None  # `servelab spec --json`
    invalid_levels: dict[tuple[str, int, str], str] = field(
        default_factory=dict
    )  # (run, target, level) -> why
    partial_runs: tuple[str, ...] = ()
    run_infos: tuple[RunInfo, ...] = ()
    workloads: tuple[RunWorkload | None, ...] = ()  # each run's workload, in run order
    power_rows: dict[str, tuple[dict, ...]] = field(default_factory=dict)  # run id -> its "gpu_power" samples
    slos: tuple[dict[str, float], ...] = ()  # each run's `--slo` limits, in run order
    predicted_run: str | None = (
        None  # `report --predicted RUN`: the prediction every measured target is held to
    )

    @property
    def slo(self) -> dict[str, float]:
        """The `--slo` limits (ms) the runs were benched with: the first run's that has one."""
        return next((limits for limits in self.slos if limits), {})

    @property
    def planned(self) -> PlanFigures:
        """The figures of `plan` (the first engine's entry): for what the bill shows once, not per engine."""
        return PlanFigures(self.plan)

    @property
    def plans(self) -> tuple[SavedPlan, ...]:
        """The distinct plan entries the engines are held against, in engine order."""
        found: list[SavedPlan] = []
        for engine in self.engines:
            if engine.plan is not None and all(engine.plan is not p for p in found):
                found.append(engine.plan)
        return tuple(found) or ((self.plan,) if self.plan else ())

    @property
    def gpus_per_engine(self) -> int | None:
        return self.planned.gpus_per_engine

    @property
    def plan_ceilings(self) -> SavedCeilings:
        return self.planned.ceilings

    @property
    def planned_context(self) -> int | None:
        return self.planned.planned_context

    @property
    def plan_memory(self) -> SavedMemory | None:
        return self.planned.memory

    @property
    def ceiling_short_tok_s(self) -> float | None:
        return self.planned.ceiling_short_tok_s

    @property
    def ceiling_full_tok_s(self) -> float | None:
        return self.planned.ceiling_full_tok_s

    @property
    def short_context_tokens(self) -> int:
        return self.planned.short_context_tokens

    @property
    def batch_ceilings_tok_s(self) -> dict[int, float]:
        return self.planned.batch_ceilings_tok_s

    @property
    def planned_total_bytes(self) -> int | None:
        return self.planned.planned_total_bytes


def as_number(value: object) -> float | None:
    """A JSON number as float (booleans are not numbers); None for anything else."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def as_dict(value: object) -> dict:
    """A JSON object as it is; {} for anything else (a missing or mistyped field)."""
    return value if isinstance(value, dict) else {}


def read_json_file(path: Path, what: str) -> dict:
    """The JSON object of `--WHAT PATH` (doctor, spec), or a one-line ConfigError; plans: `plan.io.load_plan`."""
    return read_json_object(path, f"--{what}", f"expected the output of `servelab {what} --json`")


def _usable_context(info: TargetInfo) -> int | None:
    context = info.context_per_slot
    return context if context is not None and context > 0 else None


def _memory_used(run: StoredRun, target_index: int) -> int | None:
    """The peak device memory in use on the GPUs that served this target (the bench's power samples taken
    during its levels, `memory_used_bytes`; busy: some utilisation), per GPU as a plan counts it; every
    process's memory on those GPUs. None without such samples (no NVIDIA GPU here, `--no-power`)."""
    rows = [r for r in run.samples.get("gpu_power", ()) if r.get("target_index") == target_index]
    busy = {r.get("gpu") for r in rows if (as_number(r.get("sm_util_pct")) or 0) > 0}
    serving = [r for r in rows if not busy or r.get("gpu") in busy]
    used = [int(value) for r in serving if (value := as_number(r.get("memory_used_bytes"))) is not None]
    return max(used) if used else None


def _log_memory(engine: str) -> LogMemory | None:
    found = registry.find_engine(engine)
    return found.log_memory if found else None


def memory_from_logs(
    engines: tuple[EngineSummary, ...], logs: list[tuple[str, str]]
) -> tuple[EngineSummary, ...]:
    """Memory used from server logs given in target order ((name, text) each); a log beyond the targets,
    or one of an engine whose log we cannot read, is a ConfigError."""
    if len(logs) > len(engines):
        raise ConfigError(
            f"{len(logs)} server logs for {len(engines)} target(s); give at most one per target, in order"
        )
    updated = list(engines)
    for i, (name, text) in enumerate(logs):
        reader = _log_memory(engines[i].engine)
        if reader is None:
            readable = ", ".join(e.name for e in registry.engines() if e.log_memory)
            raise ConfigError(
                f"cannot read memory from {name}: target {i} is {engines[i].engine}; "
                f"server logs are read for: {readable}"
            )
        used = reader.read(text)
        if used is None:
            raise ConfigError(f"{name} reports no buffer sizes; {reader.hint}")
        updated[i] = replace(engines[i], memory_used_bytes=used)
    return tuple(updated)


LABEL_LIMIT = 59  # characters: a series label stays shorter than 60


PATH_START = re.compile(r"^(/|~|\.{1,2}[/\\]|[A-Za-z]:[/\\]|\\\\)")  # /x, ~/x, ./x, ../x, C:\x, \\host


def model_name(model: str) -> str:
    """A model as a reader names it: a file path's last part without ``.gguf`` (no temporary directory); any
    other name (a repository id ``org/name``, a served alias) as it is."""
    if not PATH_START.match(model):
        return model
    base = re.split(r"[/\\]", model.rstrip("/\\"))[-1] or model
    return base.removesuffix(".gguf") or base


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "…"


def series_labels(parts: list[tuple[str, str, str, str]]) -> list[str]:
    """Short unique labels, one per (engine, model, workload, run id): "engine · model · workload", the run id
    added only where two would otherwise be the same, then the target's place; each under 60 characters (the
    model name is shortened first)."""
    bases = [(e, model_name(m), w) for e, m, w, _ in parts]
    labels = []
    for i, ((engine, model, workload), (*_, run_id)) in enumerate(zip(bases, parts, strict=True)):
        tail = f" · {workload}" if workload else ""
        if bases.count(bases[i]) > 1:
            tail += f" · {run_id}"
            if sum(1 for b, p in zip(bases, parts, strict=True) if b == bases[i] and p[3] == run_id) > 1:
                tail += f" #{i + 1}"
        head = f"{engine} · "
        labels.append(_clip(head + _clip(model, LABEL_LIMIT - len(head) - len(tail)) + tail, LABEL_LIMIT))
    return labels


def _workload_name(run: StoredRun) -> str:
    workload = run.meta.workload
    return "" if workload is None else model_name(workload.kind)


def engine_summaries(runs: list[StoredRun]) -> tuple[EngineSummary, ...]:
    found = [(run, target) for run in runs for target in run.targets]
    models = [t.info.model or "unknown model" for _, t in found]
    labels = series_labels(
        [(t.engine, m, _workload_name(r), r.id) for (r, t), m in zip(found, models, strict=True)]
    )
    labels = [
        label + PREDICTED_TAG if is_predicted(r) else label
        for (r, _), label in zip(found, labels, strict=True)
    ]
    levels = {run.id: all_level_figures(run) for run in runs}
    return tuple(
        EngineSummary(
            label=label,
            run_id=run.id,
            target_index=target.index,
            engine=target.engine,
            model=model,
            url=target.url,
            partial=run.info.partial,
            levels=tuple(lv for lv in levels[run.id] if lv.target_index == target.index),
            usable_context=_usable_context(target.info),
            memory_used_bytes=_memory_used(run, target.index),
            workload=_workload_name(run),
            predicted=is_predicted(run),
        )
        for (run, target), model, label in zip(found, models, labels, strict=True)
    )


PREDICTED_TAG = " · predicted"


def is_predicted(run: StoredRun) -> bool:
    """A run `servelab predict` stored (its meta says what was emulated), not a measurement."""
    return run.meta.predicted is not None


def assemble(
    runs: list[StoredRun],
    plan_doc: PlanDocument | None = None,
    doctor: dict | None = None,
    spec: dict | None = None,
    server_logs: list[tuple[str, str]] | None = None,
    predicted_run: str | None = None,
) -> Bill:
    """Everything the bill shows, from loaded runs and the parsed optional files; `server_logs` are
    (name, text) of each target's server log, in target order, for the memory it really allocated;
    `predicted_run` (one of `runs`, a prediction) is held against every measured target."""
    engines = memory_from_logs(engine_summaries(runs), server_logs or [])
    own = plans_for(plan_doc, [e.engine for e in engines])
    engines = tuple(replace(e, plan=p) for e, p in zip(engines, own, strict=True))
    plan = next((p for p in own if p is not None), None) or pick_plan(
        plan_doc, tuple(e.engine for e in engines)
    )
    model, gpu = (plan_doc.model, plan_doc.gpu) if plan_doc else (None, None)
    warnings = tuple(workload_warnings(runs)) if runs else ()
    invalid = {
        (run.id, lv.target_index, lv.level.label): lv.summary.invalid_reason or ""
        for run in runs
        for lv in run.levels
        if not lv.summary.valid
    }
    partial = tuple(run.id for run in runs if run.info.partial)
    workloads = tuple(r.meta.workload for r in runs)
    power = {r.id: tuple(r.samples.get("gpu_power", ())) for r in runs}
    slos = tuple(r.meta.slo for r in runs)
    return Bill(
        run_ids=tuple(r.id for r in runs),
        engines=engines,
        warnings=warnings,
        plan=plan,
        plan_model=model,
        plan_gpu=gpu,
        doctor=doctor,
        spec=spec,
        invalid_levels=invalid,
        partial_runs=partial,
        run_infos=tuple(r.info for r in runs),
        workloads=workloads,
        power_rows=power,
        slos=slos,
        predicted_run=predicted_run,
    )
