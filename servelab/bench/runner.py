"""`run(config, store) -> BenchResult`: the ladder per target, every record stored as it completes.

Targets run one after another with identical prompts in the same order. Before each level the server's
/metrics is snapshotted (and after); samplers (anything with ``start()`` and ``stop() -> list[dict]``,
e.g. the NVML power sampler) run during each level; their rows are stored labelled with ``target_index``,
``level`` and ``repeat``. Ctrl-C (SIGINT) cancels the requests in flight —
they are stored as ``cancelled`` — keeps every completed one, and the run ends as partial.

Records reach the store through `RecordSink` (journal line at once, SQLite from a writer thread). A level
during which a store write was held up for more than ``STORE_BLOCKED_LIMIT_S`` is not valid; a write that
fails for good stops the run and `run` raises its `StoreError` (the records wait in the journal).
"""

from __future__ import annotations

import asyncio
import functools
import json
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from servelab import __version__
from servelab.bench.aiohttp_edge import check_edge
from servelab.bench.client import StreamClient
from servelab.bench.config import BenchConfig
from servelab.bench.ladder import Ladder, most_levels
from servelab.bench.level import LevelState, run_closed, run_open
from servelab.bench.level_counts import (
    level_prompts,
    open_loop_arrivals,
    prompt_count,
    warmup_requests,
)
from servelab.bench.live import LevelProgress, LiveLevel
from servelab.bench.maker import PromptSlot, RequestMaker
from servelab.bench.metrics import mark_eviction
from servelab.bench.monitor import LoopMonitor, client_pinned, validity
from servelab.bench.ramp import ramped_arrival_offsets_ns
from servelab.bench.result import BenchResult, TargetResult
from servelab.bench.schedule import arrival_offsets_ns
from servelab.bench.server_metrics import GaugeSampler, level_server_metrics, pool_server_metrics
from servelab.bench.sink import RecordSink
from servelab.bench.summary import pool_repeats, summarize_level
from servelab.bench.target import Target, connect_target, target_prompts
from servelab.bench.worker_core import ClientSpec
from servelab.bench.workers import Fleet, open_fleet, preflight
from servelab.bench.workloads import Prompt
from servelab.errors import StoreError
from servelab.inert import inert_line
from servelab.net import is_loopback_url, public_url
from servelab.results.level_key import Level
from servelab.results.records import RequestRecord
from servelab.results.run import EdgeReport, RunMeta, RunWorkload
from servelab.results.stats import LevelSummary

STORE_BLOCKED_LIMIT_S = 1.0  # a level whose store writer waited longer than this is not valid


def run(
    config: BenchConfig,
    store: Any | None = None,
    *,
    samplers: Sequence[Any] = (),
    progress: LevelProgress | None = None,
) -> BenchResult:
    """Validate every target (no load sent on failure), then run the ladder on each; returns the result."""
    preflight(config)  # --ray: installed and reachable, before any run is stored
    targets = [connect_target(i, url, config) for i, url in enumerate(config.targets)]
    prompts = {t.index: target_prompts(t, config, prompt_count(config)) for t in targets}
    edge = check_edge()  # the path every client of this run takes through aiohttp
    run_id = store.create_run(_run_meta(config, edge)) if store is not None else None
    for t in targets:
        if store is not None:
            store.add_target(run_id, t.index, public_url(t.url), t.engine, t.info())
    runner = _Runner(config, store, run_id, samplers, progress, edge)
    try:
        result = _with_loop(runner.run_all(targets, prompts))
        if runner.sink is not None and runner.sink.error is not None:
            raise runner.sink.error
    except StoreError:  # finishing would wait on the failing store again: the run reads back "interrupted"
        if runner.sink is not None and runner.sink.error is not None:
            raise runner.sink.error from None  # it says where the records not stored are
        raise
    except BaseException:  # the run ends as partial in the store, never left "running"
        if store is not None:
            store.finish_run(run_id, partial=True)
        raise
    if store is not None:
        store.finish_run(run_id, partial=result.partial, summary=result.to_json())
    return result


def _with_loop(coro):
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency, but optional in spirit
        return asyncio.run(coro)
    return uvloop.run(coro)


def _run_meta(config: BenchConfig, edge: EdgeReport) -> RunMeta:
    spec = config.workload
    return RunMeta(
        name=config.name,
        servelab_version=__version__,
        client_host=socket.gethostname(),
        workload=RunWorkload(
            kind="trace" if config.trace is not None else spec.kind,
            input_tokens=spec.input_tokens,
            output_tokens=spec.output_tokens,
            seed=spec.seed,
            chat=config.chat,
        ),
        settings=config.settings(),
        targets=tuple(public_url(u) for u in config.targets),  # never user:password@
        client_edge=edge,  # aiohttp's internals or its public reader (bench/aiohttp_edge.py)
        wall_anchor_ns=time.time_ns(),
        mono_anchor_ns=time.perf_counter_ns(),
    )


class _Runner:
    def __init__(self, config: BenchConfig, store, run_id, samplers, progress, edge: EdgeReport) -> None:
        self.config, self.store, self.run_id = config, store, run_id
        self.samplers, self.progress, self.edge = samplers, progress, edge
        self.stop_event = asyncio.Event()
        self.state: LevelState | None = None
        self.sink: RecordSink | None = None
        self.position = 0  # level-repeats started so far
        self.total = 0
        self.fleet: Fleet | None = None  # --workers / --ray: the load from worker processes

    async def run_all(self, targets: list[Target], prompts: dict[int, list[Prompt]]) -> BenchResult:
        self.stop_event = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = _install_sigint(loop, self._interrupt)
        result = BenchResult(self.run_id, partial=False)
        self.total = len(targets) * most_levels(self.config) * self.config.repeat
        self.sink = sink = RecordSink(self.store, self.run_id)
        try:
            self.fleet = await open_fleet(self.config)
            for target in targets:
                if self.stop_event.is_set():
                    break
                result.targets.append(await self._target(target, prompts[target.index], sink))
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
            if self.fleet is not None:
                await self.fleet.close()
            await sink.close(_notice)
        result.partial = self.stop_event.is_set()
        return result

    def _interrupt(self) -> None:
        self.stop_event.set()
        for task in list(self.state.tasks if self.state else ()):
            task.cancel()

    async def _target(self, target: Target, prompts: list[Prompt], sink: RecordSink) -> TargetResult:
        out = TargetResult(public_url(target.url), target.engine, target.model, target.context)
        base = 0
        keep_alive = target.extras.KEEP_ALIVE
        stall_s = self.config.stall_timeout_s
        config = self.config
        async with StreamClient(
            target.url,
            config.api_key,
            stall_timeout_s=stall_s,
            keep_alive=keep_alive,
            edge=self.edge,
            deadline_s=config.deadline_s,
            max_line_bytes=config.max_line_bytes,
            max_body_bytes=config.max_body_bytes,
            authorization=target.probe.authorization,
            secrets=target.probe.secrets,
            follow_redirects=config.follow_redirects,
        ) as client:
            ladder = Ladder(self.config)
            for level in ladder:
                slots = level.concurrency or 1
                repeats: list[tuple[list[RequestRecord], LevelSummary]] = []
                for rep in range(self.config.repeat):
                    count = level_prompts(self.config, slots)
                    records, result = await self._level(
                        client, target, level, slots, rep, prompts[base : base + count], sink
                    )
                    base += count
                    repeats.append((records, result))
                    if self.stop_event.is_set():
                        break
                pooled = _combine(level, self.config, repeats)
                if self.store is not None:
                    sink.later(
                        functools.partial(self.store.add_level_stats, self.run_id, target.index, pooled.stats)
                    )
                out.levels.append(pooled)
                ladder.judge(pooled)
                if self.stop_event.is_set():
                    break
        out.max_rate = ladder.answer()
        return out

    async def _level(
        self, client, target: Target, level: Level, slots: int, rep: int, prompts: list[Prompt], sink
    ) -> tuple[list[RequestRecord], LevelSummary]:
        config = self.config
        state = LevelState(warmup=warmup_requests(config, slots), stop=config.stop)
        self.state = state
        records: list[RequestRecord] = []
        make = _maker(target, config, level, rep, prompts, state.warmup)

        def on_record(record: RequestRecord) -> None:
            records.append(mark_eviction(record))
            sink.add(record)
            if sink.error is not None and not self.stop_event.is_set():
                self._interrupt()  # the store failed for good: stop sending, keep what finished

        monitor = LoopMonitor()
        live = LiveLevel(
            url=public_url(target.url),
            engine=target.engine,
            level=level.label,
            repeat=rep,
            position=self.position,
            total=self.total,
            planned=len(prompts) if config.stop.requests is not None else None,
            duration_s=config.stop.duration_s,
            state=state,
            records=records,
            monitor=monitor,
        )
        self.position += 1
        if self.progress:
            self.progress(live)

        before = self._snapshot(target, level.label, rep, "before", sink)
        gauges = GaugeSampler(target.probe) if _follows_gauges(target) else None
        if gauges is not None:
            gauges.start()
        for sampler in self.samplers:
            sampler.start()
        sink.window()
        monitor.start()
        offsets, ramp_count = (None, 0) if level.rate_rps is None else _arrivals(config, level.rate_rps)
        here = is_loopback_url(target.url)
        fleet = None
        if self.fleet is not None:
            fleet = await self.fleet.level(
                config,
                _client_spec(target, config),
                make,
                slots,
                offsets,
                state,
                on_record,
                self.stop_event,
                here,
                ramp_count,
            )
        elif offsets is None:
            await run_closed(client, slots, state, make, on_record, self.stop_event, config.ramp_s or 0.0)
        else:
            await run_open(client, offsets, state, make, on_record, self.stop_event, ramp_count)
        client_stats = await monitor.stop()
        if fleet is not None:
            client_stats = {**fleet.client, "coordinator": client_stats}
        client_stats["store_blocked_s"] = round(sink.blocked_s(), 3)
        if sink.error is not None:
            self._interrupt()
        self._stop_samplers({"target_index": target.index, "level": level.label, "repeat": rep}, sink)
        sampled = gauges.stop() if gauges is not None else []
        after = self._snapshot(target, level.label, rep, "after", sink)
        server = level_server_metrics(before, after, sampled, target.extras.SERVER_METRICS)
        if fleet is None:
            valid, why = validity(
                client_stats, config.lag_limit_ms, config.cpu_limit, server_here=here, pinned=client_pinned()
            )
        else:
            valid, why = fleet.valid, fleet.invalid_reason
        valid, why = _store_validity(valid, why, client_stats["store_blocked_s"])
        result = LevelSummary(
            summarize_level(records, level, config.slo, config.ramp_s),
            valid=valid,
            invalid_reason=why,
            partial=self.stop_event.is_set() or (fleet is not None and fleet.lost_worker),
            client=client_stats,
            server=server,
        )
        if self.store is not None:
            sink.later(functools.partial(self.store.add_level, self.run_id, target.index, rep, result))
        live.result = result
        if self.progress:
            self.progress(live)
        return records, result

    def _stop_samplers(self, labels: dict[str, Any], sink: RecordSink) -> None:
        """Store each sampler's rows of this level, every row labelled with its target index, level and repeat
        (written by the sink's writer, behind the level's records)."""
        for sampler in self.samplers:
            rows = sampler.stop()
            if self.store is not None and rows:
                labelled = [{**row, **labels} for row in rows]
                kind = getattr(sampler, "kind", "gpu_power")
                sink.later(functools.partial(self.store.add_samples, self.run_id, kind, labelled))

    def _snapshot(self, target: Target, level: str, rep: int, moment: str, sink: RecordSink) -> str | None:
        """Store each snapshot path's text (without a store: only /metrics, when the level's server figures need
        it); returns the /metrics text read, or None."""
        paths = target.extras.SNAPSHOT_PATHS if self.store is not None else _server_paths(target)
        metrics: str | None = None
        for path in paths:
            text = _safe_get_text(target, path)
            if path == "/metrics":
                metrics = text
            if text is not None and self.store is not None:
                label = moment if path == "/metrics" else f"{moment} {path}"
                add = self.store.add_metrics_snapshot
                sink.later(
                    functools.partial(add, self.run_id, target.index, level, rep, label, text, time.time_ns())
                )
        return metrics


def _server_paths(target: Target) -> tuple[str, ...]:
    return (
        ("/metrics",) if target.extras.SERVER_METRICS and "/metrics" in target.extras.SNAPSHOT_PATHS else ()
    )


def _follows_gauges(target: Target) -> bool:
    return "/metrics" in target.extras.SNAPSHOT_PATHS and any(
        m.kind == "gauge" for m in target.extras.SERVER_METRICS
    )


def _arrivals(config: BenchConfig, rate: float) -> tuple[list[int], int]:
    """An open-loop level's send offsets and how many of the first are the ramp's."""
    if config.trace is not None:
        return config.trace.offsets_ns(), 0
    count = open_loop_arrivals(config, rate)
    if config.ramp_s:
        return ramped_arrival_offsets_ns(
            rate, count, config.ramp_s, burstiness=config.burstiness, seed=config.seed
        )
    return arrival_offsets_ns(rate, count, burstiness=config.burstiness, seed=config.seed), 0


def _client_spec(target: Target, config: BenchConfig) -> ClientSpec:
    """How each worker's client reaches ``target`` (the same settings as the in-process client)."""
    return ClientSpec(
        url=target.url,
        api_key=config.api_key,
        authorization=target.probe.authorization,
        secrets=tuple(target.probe.secrets),
        stall_timeout_s=config.stall_timeout_s,
        keep_alive=target.extras.KEEP_ALIVE,
        deadline_s=config.deadline_s,
        max_line_bytes=config.max_line_bytes,
        max_body_bytes=config.max_body_bytes,
        follow_redirects=config.follow_redirects,
    )


def _maker(
    target: Target, config: BenchConfig, level: Level, rep: int, prompts: list[Prompt], warmup: int
) -> RequestMaker:
    path = "/v1/chat/completions" if config.chat else "/v1/completions"
    slots = []
    for prompt in prompts:  # encoded before the level, not while it runs
        body = target.request_body(prompt, config.chat, config.temperature)
        slots.append(
            PromptSlot(
                body,
                json.dumps(body).encode(),
                prompt.index,
                prompt.input_tokens if prompt.verified else None,
                prompt.expected_cached_tokens or None,
            )
        )
    return RequestMaker(path, target.index, level.label, rep, warmup, tuple(slots))


def _combine(
    level: Level, config: BenchConfig, repeats: list[tuple[list[RequestRecord], LevelSummary]]
) -> LevelSummary:
    """One level across repeats: its pooled stats; valid only when every repeat was."""
    results = [result for _, result in repeats]
    stats = pool_repeats(
        [(records, result.stats) for records, result in repeats], level, config.slo, config.ramp_s
    )
    return LevelSummary(
        stats,
        valid=all(r.valid for r in results),
        invalid_reason=next((r.invalid_reason for r in results if r.invalid_reason), None),
        partial=any(r.partial for r in results),
        client=results[-1].client,
        server=pool_server_metrics([r.server for r in results]),
    )


def _store_validity(valid: bool, why: str | None, blocked_s: float) -> tuple[bool, str | None]:
    """Not valid when the store held its writer up during the level (the records waited in the journal);
    that reason comes first, any other after it."""
    if blocked_s <= STORE_BLOCKED_LIMIT_S:
        return valid, why
    store = (
        f"result store blocked for {blocked_s:.1f} s during the level (another process held its write "
        "lock): records waited in the journal while the level was measured"
    )
    return False, store if why is None else f"{store}; {why}"


def _notice(line: str) -> None:
    """A line for the person waiting (stderr; stdout carries only the result)."""
    print(inert_line(line), file=sys.stderr, flush=True)


def _safe_get_text(target: Target, path: str) -> str | None:
    try:
        return target.probe.get_text(path)
    except Exception:
        return None


def _install_sigint(loop: asyncio.AbstractEventLoop, handler: Callable[[], None]) -> bool:
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
        return False
    return True
