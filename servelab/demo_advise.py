"""The demo's closing question (issue 24 item 4): after benchmarking both engines, what should run here for the
demo's workload and SLO? Each engine's runs are calibrated (in memory: the demo's tiny model must not leave a
profile that the user's own models would then pick up), the launched configurations are predicted again with
that calibration and held to what was measured, and `advise` searches every engine's grid with the calibrated
figures. The bill shows the advice beside predicted vs measured.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servelab.advise.confirm import Say  # a line for the person watching

DEMO_SLO = (
    "ttft_p99_ms=5000,tpot_p99_ms=100"  # a chat on this CPU: the first token within 5 s, 10 tok/s or more
)


def advise_step(
    cfg: Any,
    benched: Mapping[str, Sequence[tuple[str, str]]],
    plans: Mapping[str, tuple[Any, Any]],
    say: Say,
    step: int = 9,
) -> dict[str, Any] | None:
    """`benched`: engine -> its stored (run id, workload) pairs; `plans`: engine -> (its plan as launched, the
    model spec) (demo.py `launched_plans`). The advice as `servelab advise --json` writes it, with the
    calibrated predictions of the launched configurations against the measured levels
    (`predicted_vs_measured`); saved as advice.json in the demo's folder. None without runs."""
    from servelab.advise.core import Advice
    from servelab.advise.goal import parse_bounds
    from servelab.advise.rank import pareto, ranked
    from servelab.store import Store

    if not benched:
        return None
    workload = cfg.workloads[-1]
    users = max(cfg.concurrency)
    say(
        f"{step}. advise: what to run here for the {workload} workload, {users} users, SLO {DEMO_SLO}, with the "
        "calibration these runs make"
    )
    checks: list[dict[str, Any]] = []
    advices: list[Advice] = []
    with Store.open(cfg.workdir / "runs.db", must_exist=True) as store:
        for engine, stored in benched.items():
            plan, spec = plans[engine]
            runs = [(store.load_run(r), kind) for r, kind in stored]
            effective = _calibrated(plan, spec, [run for run, _ in runs])
            say(f"   {engine}: calibrated from its {len(runs)} runs")
            checks += _held_to_measured(plan, spec, effective, runs, cfg)
            advices.append(
                _advise(plan, spec, effective, cfg, workload, users, parse_bounds(DEMO_SLO), engine)
            )
    judged = tuple(j for a in advices for j in a.judged)
    order = tuple(ranked(judged))
    first = advices[0]
    merged = Advice(
        setting=first.setting,
        interconnect=None,
        context=first.context,
        candidates=sum(a.candidates for a in advices),
        pruned=tuple(p for a in advices for p in a.pruned),
        judged=judged,
        order=order,
        pareto=pareto(order),
        seconds=sum(a.seconds for a in advices),
        screened=tuple(x for a in advices for x in a.screened),
        emulated=sum(a.emulated for a in advices),
    )
    doc = {**merged.to_json(), "predicted_vs_measured": checks}
    front = merged.pareto.front
    say(
        f"   advice: {front[0].point.name} ({front[0].per_gpu_tok_s:.1f} tok/s at {users} users)"
        if front
        else "   advice: nothing meets the SLO here"
    )
    errors = [abs(c["error"]) for c in checks if c["error"] is not None]
    if errors:
        say(
            f"   the calibration predicts the measured levels within {sorted(errors)[len(errors) // 2]:.0%} "
            f"(median |error| over {len(errors)} figures)"
        )
    path = cfg.workdir / "advice.json"
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return doc


def _calibrated(plan: Any, spec: Any, runs: list[Any]) -> Any:
    """The runs' fitted figures (`servelab calibrate`'s fit), not saved as a profile."""
    from servelab.hardware.gpus import CPU_DEVICE, find_gpu
    from servelab.predict.calibrate import fit
    from servelab.predict.machine import emulated_engine
    from servelab.predict.measured import measured_setup

    setup = measured_setup(runs)
    return fit(emulated_engine(plan, spec, find_gpu(CPU_DEVICE)), setup.records).rates


def _workload_config(cfg: Any, kind: str, levels: tuple[int, ...]) -> Any:
    from servelab.bench.config import BenchConfig
    from servelab.bench.schedule import StopRule
    from servelab.bench.workloads import WorkloadSpec

    spec = WorkloadSpec(kind=kind, output_tokens=cfg.output_tokens, chat=False, use_token_ids=True)
    return BenchConfig(
        targets=("demo",),
        concurrency=levels,
        workload=spec,
        chat=False,
        stop=StopRule(requests=cfg.requests_per_level),
    )


FIGURES = (("output tok/s", "output_tok_s"), ("TTFT p99 ms", "ttft_p99"), ("TPOT p99 ms", "tpot_p99"))


def _held_to_measured(
    plan: Any, spec: Any, effective: Any, runs: list[tuple[Any, str]], cfg: Any
) -> list[dict[str, Any]]:
    """Each measured level of the launched configuration beside its calibrated prediction, per figure."""
    from servelab.bench.level_counts import prompt_count
    from servelab.bench.workloads import build_prompts
    from servelab.hardware.gpus import CPU_DEVICE, find_gpu
    from servelab.predict.machine import emulated_engine
    from servelab.predict.virtual_ladder import predict_ladder
    from servelab.predict.words import WordTokenizer
    from servelab.report.levels import all_level_figures

    engine = emulated_engine(plan, spec, find_gpu(CPU_DEVICE), rates=effective)
    tokenizer, rows = WordTokenizer(), []
    for run, kind in runs:
        config = _workload_config(cfg, kind, cfg.concurrency)
        prompts = build_prompts(config.workload, prompt_count(config), tokenizer, engine.context)
        result, _ = predict_ladder(engine, config, prompts, tokenizer, label="demo", model=spec.name)
        predicted = {lv.stats.level.label: lv.stats for lv in result.targets[0].levels}
        for measured in all_level_figures(run):
            other = predicted.get(measured.label)
            if other is None:
                continue
            for name, key in FIGURES:
                got, want = _figure(measured.stats, key), _figure(other, key)
                rows.append(
                    {
                        "engine": plan.engine,
                        "workload": kind,
                        "level": measured.label,
                        "figure": name,
                        "predicted": want,
                        "measured": got,
                        "error": None if got in (None, 0) or want is None else (want - got) / got,
                    }
                )
    return rows


def _figure(stats: Any, key: str) -> float | None:
    if key == "output_tok_s":
        return stats.output_tok_s
    return getattr(stats, f"{key[:4]}_ms").p99


def _advise(
    plan: Any, spec: Any, effective: Any, cfg: Any, workload: str, users: int, bounds: Any, engine: str
) -> Any:
    """This engine's grid for the demo's goal, each point of the launched weight format priced with the
    calibration (others: the plans' figures)."""
    from servelab.advise.core import advise
    from servelab.advise.goal import Prices
    from servelab.advise.judge import Demand, Setting
    from servelab.hardware.gpus import CPU_DEVICE, find_gpu

    config = replace(_workload_config(cfg, workload, (users,)), targets=("advise",))
    setting = Setting(
        model=spec,
        gpu=find_gpu(CPU_DEVICE),
        gpus=1,
        bounds=bounds,
        demand=Demand(users=users),
        prices=Prices(),
        config=config,
        rates=lambda p: effective if p.engine == plan.engine and p.quant == plan.quant else None,
    )
    return advise(setting, context=cfg.ctx, engines=(engine,))


def benched_runs(levels: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """The demo's level rows as engine -> its (run id, workload) pairs, in run order."""
    benched: dict[str, list[tuple[str, str]]] = {}
    for row in levels:
        pairs = benched.setdefault(row["engine"], [])
        if row["run_id"] and (row["run_id"], row["workload"]) not in pairs:
            pairs.append((row["run_id"], row["workload"]))
    return benched


def advice_outcome(advice: dict[str, Any] | None, workdir: Path) -> dict[str, Any]:
    """The advice step for --json and the summary: the first front member, and where the whole advice is."""
    if advice is None:
        return {"available": False}
    front = advice["front"]
    checks = [abs(c["error"]) for c in advice["predicted_vs_measured"] if c["error"] is not None]
    return {
        "available": True,
        "file": str(workdir / "advice.json"),
        "advised": front[0]["candidate"] if front else None,
        "advised_output_tok_s": front[0]["output_tok_s"] if front else None,
        "median_abs_error": sorted(checks)[len(checks) // 2] if checks else None,
    }
