"""`servelab advise … --confirm`: the advice checked by measuring it (issue 24 item 3).

Where the winner's engine runs on this machine (its device is this machine's CPU, the registry has a launcher
and an installed program for it, and the model given is a local file in the format the engine loads, in the
winner's own weight format): launch it as `servelab serve` does, verify it as `servelab verify` does, bench
the ladder around the advised load, calibrate on those requests as `servelab calibrate` does (the profile is
saved, so later `predict`/`advise` runs use it), re-predict the advised load with the fitted figures, and hold
advice, re-prediction and measurement to each other per figure. Elsewhere, the launch and bench commands that
would confirm it on the real server. Every step is the library call behind its command, none a subprocess of
servelab's own CLI.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from servelab.advise.goal import misses
from servelab.advise.judge import Judged, PromptPool, Setting, emulate_level, level_output_tok_s, probe_config
from servelab.bench.config import BenchConfig
from servelab.engines import registry
from servelab.engines.base import Engine
from servelab.errors import ServelabError
from servelab.hardware.pinning import CpuSplit, cpu_split, on_cpus
from servelab.model.quant import quant_name_for
from servelab.report.advice import ConfirmedFigure, round_or_none
from servelab.results.stats import LevelStats

Say = Callable[[str], None]  # a line for the person watching (advise --confirm, the demo)
WITHIN = 0.15  # the measured goodput is "as advised" within this share of the prediction (issue 24)
FIGURES = ("goodput_tok_s", "ttft_p99_ms", "tpot_p99_ms")


@dataclass(frozen=True, kw_only=True)
class MeasuredLevel:
    load: float
    goodput_tok_s: float
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    misses: tuple[str, ...]  # the SLOs this level broke (empty: it met them)
    valid: bool = True
    invalid_reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class Confirmation:
    """What `--confirm` did for the advice's first front member."""

    candidate: str
    engine: str
    load: float
    ran: bool  # measured here; False: `commands` say how to confirm it where its hardware is
    closed: bool = True  # the load is users (closed loop), else requests/s
    reason: str = ""  # why it did not run here
    commands: tuple[str, ...] = ()  # the launch and bench commands (those run here, or those to run)
    mismatches: tuple[str, ...] = ()  # verify's asked-vs-got lines
    run_ids: tuple[str, ...] = ()
    levels: tuple[MeasuredLevel, ...] = ()
    figures: tuple[ConfirmedFigure, ...] = ()
    profile: str | None = None  # the calibration profile's file (None: not saved)
    fit_median_relative: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def measured_at_load(self) -> MeasuredLevel | None:
        return next((lv for lv in self.levels if lv.load == self.load), None)

    @property
    def meets_slo(self) -> bool | None:
        at = self.measured_at_load
        return None if at is None else not at.misses

    def goodput_error(self, which: str = "advised") -> float | None:
        fig = next((f for f in self.figures if f.figure == "goodput_tok_s"), None)
        if fig is None:
            return None
        return ConfirmedFigure.error(fig.advised if which == "advised" else fig.repredicted, fig.measured)

    def verdict(self) -> str:
        """One sentence: does the measurement bear the advice out."""
        if not self.ran:
            return f"not measured here: {self.reason}"
        at = self.measured_at_load
        if at is None:
            return "the advised load was not measured"
        advised, again = self.goodput_error(), self.goodput_error("repredicted")
        slo = "meets the SLO" if not at.misses else f"MISSES the SLO ({'; '.join(at.misses)})"
        within = (
            ""
            if advised is None
            else (
                f"goodput {'within' if abs(advised) <= WITHIN else 'NOT within'} {WITHIN:.0%} of the advice "
                f"({advised:+.1%})"
            )
        )
        recal = "" if again is None else f", {again:+.1%} re-predicted with the calibration"
        return f"measured at {_load(self.load, self.closed)}: {slo}; {within}{recal}"

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "engine": self.engine,
            "load": self.load,
            "closed_loop": self.closed,
            "ran": self.ran,
            "reason": self.reason or None,
            "commands": list(self.commands),
            "mismatches": list(self.mismatches),
            "run_ids": list(self.run_ids),
            "profile": self.profile,
            "fit_median_relative": self.fit_median_relative,
            "levels": [
                {
                    "load": lv.load,
                    "goodput_tok_s": round_or_none(lv.goodput_tok_s),
                    "ttft_p99_ms": round_or_none(lv.ttft_p99_ms),
                    "tpot_p99_ms": round_or_none(lv.tpot_p99_ms),
                    "misses": list(lv.misses),
                    "valid": lv.valid,
                    "invalid_reason": lv.invalid_reason,
                }
                for lv in self.levels
            ],
            "figures": [f.to_json() for f in self.figures],
            "meets_slo": self.meets_slo,
            "goodput_error": round_or_none(self.goodput_error(), 4),
            "goodput_error_repredicted": round_or_none(self.goodput_error("repredicted"), 4),
            "within": WITHIN,
            "verdict": self.verdict(),
            "notes": list(self.notes),
        }


def _load(load: float, closed: bool = True) -> str:
    return f"{int(load)} users" if closed else f"{load:g} req/s"


def ladder_around(load: float, failing: float | None, closed: bool) -> tuple[float, ...]:
    """The loads to measure: half the advised one, it, and the lowest load predicted to fail (or twice it)."""
    if closed:
        above = int(failing) if failing is not None else 2 * int(load)
        return tuple(sorted({max(1, int(load) // 2), int(load), max(int(load) + 1, above)}))
    top = failing if failing is not None else 2 * load
    return tuple(sorted({load / 2, load, max(load * 1.25, top)}))


def where_it_runs(winner: Judged, setting: Setting, model_ref: str) -> tuple[Engine | None, str]:
    """The engine to launch here, or None and why it cannot run on this machine."""
    plan = winner.point.plan
    engine = registry.get_engine(plan.engine)
    if not setting.gpu.is_cpu:
        return None, (
            f"the advice is for {setting.gpus} x {setting.gpu.name}; this command confirms on this "
            "machine's CPU (--gpu cpu) only"
        )
    if engine.launcher is None or engine.installer is None:
        return None, f"servelab cannot start {engine.label} here"
    try:
        engine.installer.find()
    except ServelabError as exc:
        return None, f"{engine.label} is not installed here ({exc})"
    rules = engine.planner
    path = Path(model_ref)
    wanted = "gguf" if rules is not None and rules.weight_formats == "gguf" else "hf"
    if not path.exists() or (setting.model.source == "gguf") != (wanted == "gguf"):
        form = "a .gguf file" if wanted == "gguf" else "a Hugging Face folder (config.json and safetensors)"
        return None, f"{engine.label} loads {form}; give that as MODEL to confirm {winner.point.name}"
    if quant_name_for(plan.quant, "hf").lower() != quant_name_for(setting.model.quant, "hf").lower():
        return None, f"the advice converts the weights to {plan.quant}; give that file as MODEL to confirm it"
    return engine, ""


def engine_args(plan_command: tuple[str, ...]) -> list[str]:
    """The plan's engine flags after the program, model, host and port the launcher writes itself."""
    words = list(plan_command)
    if "--port" not in words:
        return words[1:]
    rest = words[words.index("--port") + 2 :]
    return [w for i, w in enumerate(rest) if w != "--host" and (i == 0 or rest[i - 1] != "--host")]


def bench_line(config: BenchConfig, loads: tuple[float, ...], closed: bool, url: str = "URL") -> str:
    """`servelab bench` with the ladder, workload and request count of `config`."""
    spec = config.workload
    words = ["servelab", "bench", url]
    words += (
        ["--concurrency", ",".join(str(int(x)) for x in loads)] if closed else ["--rate", f"{loads[0]:g}"]
    )
    words += ["--workload", spec.kind, "--output-tokens", str(spec.output_tokens)]
    if spec.input_tokens is not None:
        words += ["--input-tokens", str(spec.input_tokens)]
    if config.stop.requests is not None:
        words += ["--requests", str(config.stop.requests)]
    return shlex.join(words) + (
        "" if closed else "  # and again at --rate " + ", ".join(f"{x:g}" for x in loads[1:])
    )


def confirm(
    winner: Judged,
    setting: Setting,
    model_ref: str,
    *,
    store: Any,
    log_dir: Path,
    say: Say,
    save_profile: bool = True,
) -> Confirmation:
    """Launch, verify, bench, calibrate, re-predict (module docstring); `store` keeps the measured runs."""
    plan, closed = winner.point.plan, setting.demand.closed
    load = winner.load or 1.0
    loads = ladder_around(load, winner.capacity.failing, closed)
    config = _bench_config(setting.config, loads, closed)
    base = Confirmation(candidate=winner.point.name, engine=plan.engine, load=load, ran=False, closed=closed)
    engine, why = where_it_runs(winner, setting, model_ref)
    if engine is None:
        return replace(base, reason=why, commands=(plan.command_line, bench_line(config, loads, closed)))
    from servelab.engines.process import free_port

    launcher = engine.launcher
    if launcher is None:  # where_it_runs asked for one
        return replace(base, reason=f"servelab cannot start {engine.label} here")
    cpus = cpu_split()  # server and client apart, where there are two CPUs or more (hardware/pinning.py)
    args = engine_args(plan.command) + _threads(engine, cpus)
    say(
        f"confirm: launching {engine.label} on {model_ref} {shlex.join(args)}"
        + (f" ({cpus.line})" if cpus else "")
    )
    with on_cpus(cpus.server if cpus else None):
        server = launcher.start(
            _served(model_ref, setting),
            args,
            host="127.0.0.1",
            port=free_port(),
            log_path=log_dir / f"confirm-{engine.name}.log",
            timeout_s=launcher.HEALTH_TIMEOUT_S,
        )
    with server:
        mismatches = _verify(engine, server, say)
        say(
            f"confirm: bench {', '.join(_load(x, closed) for x in loads)} ({config.stop.requests} requests per level)"
        )
        with on_cpus(cpus.client if cpus else None):
            run_ids, measured = _bench(server.url, config, loads, closed, store, setting)
    commands = (shlex.join(server.process.argv), bench_line(config, loads, closed, server.url))
    fitted, fit_note, path, median = _calibrate(winner, setting, store, run_ids, save_profile)
    say(f"confirm: {fit_note}")
    again = _repredict(winner, setting, load, fitted)
    at = next((m for m in measured if m.load == load), None)
    figures = _figures(winner, again, at, load, closed)
    notes = tuple(
        f"level {_load(m.load, closed)} not trustworthy: {m.invalid_reason}" for m in measured if not m.valid
    )
    return replace(
        base,
        ran=True,
        commands=commands,
        mismatches=mismatches,
        run_ids=run_ids,
        levels=measured,
        figures=figures,
        profile=path,
        fit_median_relative=median,
        notes=notes,
    )


def _figures(
    winner: Judged, again: LevelStats | None, at: MeasuredLevel | None, load: float, closed: bool
) -> tuple[ConfirmedFigure, ...]:
    def p99(stats: LevelStats | None, metric: str) -> float | None:
        return None if stats is None else getattr(stats, metric).p99

    replicas = max(winner.replicas or 1, 1)
    return (
        ConfirmedFigure(
            "goodput_tok_s",
            winner.output_tok_s / replicas,
            None if again is None else level_output_tok_s(again, load, closed),
            None if at is None else at.goodput_tok_s,
        ),
        ConfirmedFigure(
            "ttft_p99_ms",
            p99(winner.stats, "ttft_ms"),
            p99(again, "ttft_ms"),
            None if at is None else at.ttft_p99_ms,
        ),
        ConfirmedFigure(
            "tpot_p99_ms",
            p99(winner.stats, "tpot_ms"),
            p99(again, "tpot_ms"),
            None if at is None else at.tpot_p99_ms,
        ),
    )


def _threads(engine: Engine, cpus: CpuSplit | None) -> list[str]:
    """The engine's thread flags for the server's CPUs, where it has them (llama.cpp's -t)."""
    if cpus is None or engine.cpu_threads is None:
        return []
    return list(engine.cpu_threads(len(cpus.server)))


def _served(model_ref: str, setting: Setting) -> str:
    """What the launcher loads: the .gguf file, or the folder of a config.json."""
    path = Path(model_ref)
    return str(path.parent) if path.is_file() and path.name == "config.json" else str(path)


def _bench_config(config: BenchConfig, loads: tuple[float, ...], closed: bool) -> BenchConfig:
    """The advice's workload as completions (exact token counts where the engine takes ids, as predict
    counts them), each level as many requests as the largest probe."""
    probe = probe_config(config, max(loads), closed)
    workload = replace(config.workload, chat=False)
    return replace(
        probe,
        workload=workload,
        chat=False,
        concurrency=tuple(int(x) for x in loads) if closed else probe.concurrency,
        name="advise-confirm",
    )


def _verify(engine: Engine, server: Any, say: Say) -> tuple[str, ...]:
    from servelab.verify import from_command, verify

    result = verify(server.url, from_command(server.process.argv, engine=engine.name))
    lines = tuple(m.line for m in result.mismatches)
    say(
        "confirm: verified, "
        + ("no mismatch" if not lines else f"{len(lines)} mismatch(es): " + "; ".join(lines))
    )
    return lines


def _bench(
    url: str, config: BenchConfig, loads: tuple[float, ...], closed: bool, store: Any, setting: Setting
) -> tuple[tuple[str, ...], tuple[MeasuredLevel, ...]]:
    from servelab.bench.runner import run

    configs = (
        [replace(config, targets=(url,))]
        if closed
        else [replace(config, targets=(url,), rate=x) for x in loads]
    )
    run_ids: list[str] = []
    levels: list[MeasuredLevel] = []
    for cfg in configs:
        result = run(cfg, store)
        if result.run_id:
            run_ids.append(result.run_id)
        for lv, load in zip(result.targets[0].levels, loads if closed else (cfg.rate or 0.0,), strict=False):
            levels.append(_measured(lv.stats, load, closed, setting, lv.valid, lv.invalid_reason))
    return tuple(run_ids), tuple(levels)


def _measured(
    stats: LevelStats, load: float, closed: bool, setting: Setting, valid: bool, reason: str | None
) -> MeasuredLevel:
    return MeasuredLevel(
        load=load,
        goodput_tok_s=level_output_tok_s(stats, load, closed),
        ttft_p99_ms=stats.ttft_ms.p99,
        tpot_p99_ms=stats.tpot_ms.p99,
        misses=misses(setting.bounds, stats),
        valid=valid,
        invalid_reason=reason,
    )


def _calibrate(
    winner: Judged, setting: Setting, store: Any, run_ids: tuple[str, ...], save: bool
) -> tuple[Any, str, str | None, float]:
    """The fitted `Effective` of the measured runs (as `servelab calibrate`), a line about the fit, the profile."""
    from servelab.predict.calibrate import fit
    from servelab.predict.machine import emulated_engine
    from servelab.predict.measured import measured_setup
    from servelab.predict.profiles import Profile, machine_key, save_profile

    plan = winner.point.plan
    setup = measured_setup([store.load_run(r) for r in run_ids])
    result = fit(emulated_engine(plan, setting.model, setting.gpu), setup.records)
    profile = Profile(
        machine=machine_key(setting.gpu),
        machine_label=setting.gpu.label,
        engine=plan.engine,
        quant=plan.quant,
        rates=result.rates,
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        runs=setup.run_ids,
        model=setting.model.name,
        fit={
            "r2": result.r2,
            "rms_relative": result.rms_relative,
            "median_relative": result.median_relative,
            "intervals": result.intervals,
            "gaps": result.gaps,
            "prefills": result.prefills,
        },
        engine_version=setup.engine_version,
    )
    path = str(save_profile(profile)) if save else None
    note = (
        f"calibrated {profile.name} from {len(setup.records)} requests: |residual| median "
        f"{result.median_relative:.1%}" + (f", saved to {path}" if path else "")
    )
    return result.rates, note, path, result.median_relative


def _repredict(winner: Judged, setting: Setting, load: float, effective: Any) -> LevelStats | None:
    """The advised load predicted again with the fitted figures."""
    from servelab.predict.machine import emulated_engine

    plan = winner.point.plan
    speculation = setting.speculation if winner.point.speculative is not None else None
    engine = emulated_engine(plan, setting.model, setting.gpu, rates=effective, speculation=speculation)
    config = probe_config(setting.config, load, setting.demand.closed)
    return emulate_level(engine, config, setting.model.name, PromptPool())
