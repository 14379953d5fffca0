"""`predict(config, engine, store)`: the ladder in virtual time, stored as a run marked predicted.

The run's meta carries `predicted` (what was emulated: engine, model, GPU, plan figures, where the effective
figures came from), so `runs`, `compare`, `export` and `report` read it like a measured run, and a reader can
tell the two apart. Every record and level statistic goes through the store's own writers.

`progress` is the bench's (`cli/live_view.py` LadderView.update): it gets a finished `LiveLevel` as each
virtual level is computed (once a level: there is no level in flight to watch).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from servelab import __version__
from servelab.bench.config import BenchConfig
from servelab.bench.level import LevelState
from servelab.bench.level_counts import prompt_count
from servelab.bench.live import LevelProgress, LiveLevel
from servelab.bench.monitor import LoopMonitor
from servelab.bench.result import BenchResult
from servelab.bench.workloads import build_prompts
from servelab.predict.machine import EmulatedEngine
from servelab.predict.virtual_ladder import predict_ladder
from servelab.predict.words import WordTokenizer
from servelab.results.level_key import Level
from servelab.results.records import RequestRecord
from servelab.results.run import Prediction, PredictTarget, RunMeta, RunWorkload, TargetInfo
from servelab.results.stats import LevelSummary


def _reporter(
    config: BenchConfig, engine: EmulatedEngine, target: PredictTarget, progress: LevelProgress | None
):
    """An `on_level` that hands each predicted level-repeat to `progress` as a finished `LiveLevel`."""
    total, position = len(config.levels) * config.repeat, 0

    def report(records: list[RequestRecord], level: Level, repeat: int, result: LevelSummary) -> None:
        nonlocal position
        if progress is None:
            return
        state = LevelState(warmup=0, stop=config.stop, done=len(records))
        live = LiveLevel(
            url=target.url,
            engine=engine.engine,
            level=level.label,
            repeat=repeat,
            position=position,
            total=total,
            planned=result.stats.requests,
            duration_s=None,
            state=state,
            records=records,
            monitor=LoopMonitor(),
            result=result,
        )
        position += 1
        progress(live)

    return report


def predict(
    config: BenchConfig,
    engine: EmulatedEngine,
    target: PredictTarget,
    store: Any | None = None,
    progress: LevelProgress | None = None,
) -> BenchResult:
    """Emulate every level of `config`; with a `store`, keep it as a run whose meta says `predicted`."""
    tokenizer = WordTokenizer()
    prompts = build_prompts(config.workload, prompt_count(config), tokenizer, engine.context)
    report = _reporter(config, engine, target, progress)
    if store is None:
        result, _ = predict_ladder(
            engine, config, prompts, tokenizer, label=target.url, model=target.model, on_level=report
        )
        return result
    run_id = store.create_run(run_meta(config, engine, target))
    info = TargetInfo(model=target.model, context_per_slot=engine.context, predicted=True)
    store.add_target(run_id, 0, target.url, engine.engine, info)

    def keep(records: list[RequestRecord], level: Level, repeat: int, result: LevelSummary) -> None:
        store.add_requests(run_id, records)
        store.add_level(run_id, 0, repeat, result)
        report(records, level, repeat, result)

    try:
        result, _ = predict_ladder(
            engine, config, prompts, tokenizer, label=target.url, model=target.model, on_level=keep
        )
        for level in result.targets[0].levels:
            store.add_level_stats(run_id, 0, level.stats)
    except BaseException:
        store.finish_run(run_id, partial=True)
        raise
    result.run_id = run_id
    store.finish_run(run_id, partial=False, summary=result.to_json())
    return result


def run_meta(config: BenchConfig, engine: EmulatedEngine, target: PredictTarget) -> RunMeta:
    """The bench's run meta (bench/runner.py) with `predicted` in place of the client's figures; virtual
    timestamps start at 0, anchored at the wall clock of the prediction."""
    spec = config.workload
    speculation = None if engine.speculation is None else asdict(engine.speculation)
    return RunMeta(
        name=config.name,
        servelab_version=__version__,
        workload=RunWorkload(
            kind=spec.kind,
            input_tokens=spec.input_tokens,
            output_tokens=spec.output_tokens,
            seed=spec.seed,
            chat=config.chat,
        ),
        settings=config.settings(),
        targets=(target.url,),
        predicted=Prediction(target=target, effective=asdict(engine.roofline.rates), speculation=speculation),
        wall_anchor_ns=time.time_ns(),
        mono_anchor_ns=0,
    )
