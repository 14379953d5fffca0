"""`servelab bench`: the concurrency ladder against one or more OpenAI-compatible servers.

On NVIDIA machines GPU power, utilisation and clocks are sampled during each level and stored with the run
("gpu_power" samples; `servelab report` reads them for the bound verdict).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.table import Table

from servelab.bench.config import MAX_RATE, BenchConfig, load_experiment
from servelab.bench.limits import (
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_ENDPOINT_BYTES,
    DEFAULT_MAX_LINE_BYTES,
)
from servelab.bench.metrics import SLO_KEYS, Slo, parse_slo
from servelab.bench.rate_search import DEFAULT_ATTAINMENT, DEFAULT_CAP_FACTOR, DEFAULT_PROBES, SearchSpec
from servelab.bench.result import BenchResult
from servelab.bench.schedule import StopRule, parse_concurrency
from servelab.bench.trace import Trace, load_trace
from servelab.bench.workloads import WorkloadSpec
from servelab.cli.live_view import LadderView
from servelab.cli.output import print_json, stderr_console, stdout_console
from servelab.errors import ConfigError
from servelab.ranges import count

DEFAULT_REQUESTS = 32  # measured requests per level when neither --requests nor --duration is given


def register(app: typer.Typer) -> None:
    """Add this command to the app."""

    @app.command("bench")
    def bench(
        urls: list[str] = typer.Argument(
            None, help="Base URLs of OpenAI-compatible servers, e.g. http://127.0.0.1:8080."
        ),
        concurrency: str = typer.Option(
            "1,2,4,8,16", "--concurrency", help="Closed-loop concurrency levels."
        ),
        workload: str = typer.Option(
            "short", "--workload", help="short|long|mixed|shared-prefix|multi-turn|FILE."
        ),
        input_tokens: int = typer.Option(None, "--input-tokens", help="Prompt length in tokens."),
        output_tokens: int = typer.Option(
            None, "--output-tokens", help="Output length in tokens (ignore_eos)."
        ),
        requests: int = typer.Option(None, "--requests", help="Measured requests per level (default 32)."),
        duration: float = typer.Option(None, "--duration", help="Seconds per level instead of --requests."),
        rate: float = typer.Option(
            None, "--rate", help="Open loop: requests/s on a seeded absolute schedule."
        ),
        burstiness: float = typer.Option(1.0, "--burstiness", help="Gamma shape of arrivals (1 = Poisson)."),
        repeat: int = typer.Option(
            1, "--repeat", help="Repeat each level N times (95% confidence intervals)."
        ),
        warmup: int = typer.Option(
            None, "--warmup", help="Warm-up requests per level (default: one per slot)."
        ),
        max_errors: int = typer.Option(None, "--max-errors", help="End a level after this many errors."),
        find_max_rate: bool = typer.Option(
            False, "--find-max-rate", help="Search the open-loop rate for the highest that meets --slo."
        ),
        max_rate: float = typer.Option(
            None, "--max-rate", help="--find-max-rate: the cap (default 100 x --rate, the first probe)."
        ),
        probes: int = typer.Option(
            None, "--probes", help="--find-max-rate: most levels to try (default 12)."
        ),
        attainment: float = typer.Option(
            None, "--attainment", help="--find-max-rate: fraction of requests that must meet --slo (0.9)."
        ),
        trace: Path = typer.Option(
            None, "--trace", help="Replay arrivals and lengths: Mooncake JSONL, Azure CSV or servelab JSONL."
        ),
        trace_speed: float = typer.Option(
            None, "--trace-speed", help="--trace: replay this many times faster (2 = half the gaps)."
        ),
        ramp: float = typer.Option(
            None,
            "--ramp",
            help="Seconds of linear rise (concurrency or rate) at each level's start, not measured (with --workers too).",
        ),
        slo: str = typer.Option(None, "--slo", help="Goodput SLOs, e.g. ttft_ms=500,tpot_ms=50."),
        seed: int = typer.Option(0, "--seed", help="Seed for prompts and arrivals."),
        temperature: float = typer.Option(
            None, "--temperature", help="Sampling temperature sent with each request (0 = greedy)."
        ),
        db: Path = typer.Option(None, "--db", help="Result store (default: the user data directory)."),
        name: str = typer.Option(None, "--name", help="A name for the run."),
        api_key: str = typer.Option(
            None, "--api-key", help="API key (else OPENAI_API_KEY / SERVELAB_API_KEY)."
        ),
        model: str = typer.Option(None, "--model", help="Model name (default: the server's first)."),
        chat: bool = typer.Option(True, "--chat/--completions", help="Chat or completions endpoint."),
        config_path: Path = typer.Option(None, "--config", help="Experiment YAML (targets and settings)."),
        power_hz: float = typer.Option(
            5.0, "--power-hz", help="GPU power samples per second on NVIDIA GPUs (1-10)."
        ),
        no_power: bool = typer.Option(
            False, "--no-power", help="Do not sample GPU power, utilisation and clocks."
        ),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
        workers: int = typer.Option(
            None, "--workers", help="Send the load from N worker processes (Ray actors with --ray)."
        ),
        ray: str = typer.Option(
            None, "--ray", help="Workers as Ray actors: auto (the cluster Ray finds), local or HOST:PORT."
        ),
        deadline: float = typer.Option(
            DEFAULT_DEADLINE_S, "--deadline", help="Seconds a whole request may take (error kind deadline)."
        ),
        stall_timeout: float = typer.Option(
            120.0, "--stall-timeout", help="Seconds without a byte before a request fails (kind timeout)."
        ),
        max_line_bytes: int = typer.Option(
            DEFAULT_MAX_LINE_BYTES, "--max-line-bytes", help="Longest SSE line or event (kind too_large)."
        ),
        max_body_bytes: int = typer.Option(
            DEFAULT_MAX_BODY_BYTES, "--max-body-bytes", help="Longest answer body (kind too_large)."
        ),
        max_endpoint_bytes: int = typer.Option(
            DEFAULT_MAX_ENDPOINT_BYTES, "--max-endpoint-bytes", help="Longest /v1/models, /props ... body."
        ),
        follow_redirects: bool = typer.Option(
            False,
            "--follow-redirects",
            help="Follow a redirect to the same host and port (else kind redirect).",
        ),
    ) -> None:
        """Run the concurrency ladder (or an open-loop rate) and store every request as it completes."""
        options = {
            "targets": list(urls or []),
            "concurrency": concurrency,
            "workload": workload,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "requests": requests,
            "duration": duration,
            "rate": rate,
            "burstiness": burstiness,
            "repeat": repeat,
            "warmup": warmup,
            "max_errors": max_errors,
            "slo": slo,
            "seed": seed,
            "name": name,
            "model": model,
            "chat": chat,
            "deadline_s": deadline,
            "stall_timeout_s": stall_timeout,
            "max_line_bytes": max_line_bytes,
            "max_body_bytes": max_body_bytes,
            "max_endpoint_bytes": max_endpoint_bytes,
            "ramp": ramp,
            "find_max_rate": find_max_rate,
            "max_rate": max_rate,
            "probes": probes,
            "attainment": attainment,
            "trace": trace,
            "trace_speed": trace_speed,
            "workers": workers,
            "ray": ray,
            "temperature": temperature,
            "follow_redirects": follow_redirects,
        }
        if config_path is not None:
            options = _merge_yaml(options, load_experiment(config_path))
        key = api_key or os.environ.get("SERVELAB_API_KEY") or os.environ.get("OPENAI_API_KEY")
        check_power_hz(power_hz)
        config = build_config(options, key)
        result = _run_with_store(config, db, None if no_power else power_hz)
        failed = [] if result.partial else result.failed_levels()
        _render(result, json_out, failed, config.slo)
        if result.partial:
            raise typer.Exit(130)
        unanswered = [t.max_rate for t in result.targets if t.max_rate and t.max_rate.outcome != "found"]
        if unanswered and not failed:
            line = unanswered[0].line(slo_text(config.slo))
            stderr_console().print(f"servelab: error: {line} (run {result.run_id} is stored)", markup=False)
            raise typer.Exit(1)
        if failed:
            stderr_console().print(
                f"servelab: error: every request failed at {'; '.join(failed)} (run {result.run_id} is stored)"
            )
            raise typer.Exit(1)


def build_config(o: dict[str, Any], api_key: str | None) -> BenchConfig:
    """CLI/YAML options → BenchConfig (ConfigError on bad values)."""
    if o.get("requests") is not None and o.get("duration") is not None:
        raise ConfigError("give --requests or --duration, not both")
    trace = _trace(o)
    levels = o["concurrency"]
    levels = parse_concurrency(",".join(map(str, levels)) if isinstance(levels, list) else str(levels))
    requests = o.get("requests")
    if requests is None and o.get("duration") is None:
        requests = DEFAULT_REQUESTS
    stop = StopRule(requests=requests, duration_s=o.get("duration"), max_errors=o.get("max_errors"))
    rate, search = o.get("rate"), None
    given = [f"--{k.replace('_', '-')}" for k in ("max_rate", "probes", "attainment") if o.get(k) is not None]
    if given and not o.get("find_max_rate"):
        raise ConfigError(f"{', '.join(given)} only go with --find-max-rate")
    if o.get("find_max_rate"):
        rate = 1.0 if rate is None else rate
        search = search_spec(o, rate)
    spec = WorkloadSpec(
        str(o["workload"]), o.get("input_tokens"), o.get("output_tokens"), o.get("seed") or 0, o["chat"]
    )
    return BenchConfig(
        targets=tuple(o["targets"]),
        concurrency=levels,
        workload=spec,
        stop=stop,
        rate=rate,
        search=search,
        trace=trace,
        burstiness=1.0 if o.get("burstiness") is None else o["burstiness"],
        repeat=1 if o.get("repeat") is None else o["repeat"],
        warmup=o.get("warmup"),
        api_key=api_key,
        model=o.get("model"),
        chat=o["chat"],
        slo=parse_slo(o.get("slo")),
        name=o.get("name"),
        seed=count(o.get("seed") or 0, "--seed", 0, 2**32 - 1),
        ramp_s=o.get("ramp"),
        temperature=o.get("temperature"),
        **{k: o[k] for k in LIMIT_KEYS if o.get(k) is not None},
    )


def _trace(o: dict[str, Any]) -> Trace | None:
    """--trace FILE read (its first --requests rows, or those within --duration); ConfigError on a bad row."""
    if o.get("trace") is None:
        if o.get("trace_speed") is not None:
            raise ConfigError("--trace-speed only goes with --trace FILE")
        return None
    given = [
        flag
        for key, flag in (("rate", "--rate"), ("find_max_rate", "--find-max-rate"), ("ramp", "--ramp"))
        if o.get(key)
    ]
    if given:
        raise ConfigError(f"--trace replays the trace's own arrivals: drop {', '.join(given)}")
    speed = 1.0 if o.get("trace_speed") is None else o["trace_speed"]
    return load_trace(
        Path(str(o["trace"])), speed=speed, max_rows=o.get("requests"), max_seconds=o.get("duration")
    )


def search_spec(o: dict[str, Any], rate: float) -> SearchSpec:
    """--find-max-rate's settings; the cap defaults to 100 x the first rate."""
    cap = o.get("max_rate")
    return SearchSpec(
        cap_rps=min(rate * DEFAULT_CAP_FACTOR, MAX_RATE) if cap is None else cap,
        probes=DEFAULT_PROBES if o.get("probes") is None else o["probes"],
        attainment=DEFAULT_ATTAINMENT if o.get("attainment") is None else o["attainment"],
    )


def slo_text(slo: Slo) -> str:
    """``ttft_ms<=500, tpot_ms<=50``: the SLOs as given."""
    return ", ".join(f"{k}<={getattr(slo, k):g}" for k in SLO_KEYS if getattr(slo, k) is not None)


LIMIT_KEYS = (
    "deadline_s",
    "stall_timeout_s",
    "max_line_bytes",
    "max_body_bytes",
    "max_endpoint_bytes",
    "workers",
    "ray",
    "follow_redirects",
)


def _merge_yaml(cli: dict[str, Any], yaml_values: dict[str, Any]) -> dict[str, Any]:
    """YAML gives the settings; URLs on the command line are added to its targets."""
    merged = dict(cli)
    for key, value in yaml_values.items():
        if key == "targets":
            merged["targets"] = list(value) + [u for u in cli["targets"] if u not in value]
        elif value is not None:
            merged[key] = value
    return merged


def check_power_hz(hz: float) -> None:
    if not 1 <= hz <= 10:
        raise ConfigError(f"--power-hz must be between 1 and 10 samples per second, got {hz:g}")


def _run_with_store(config: BenchConfig, db: Path | None, power_hz: float | None) -> BenchResult:
    from servelab.diagnose.power import gpu_sampler
    from servelab.store import Store

    with Store.open(db) as store:
        sampler = None if power_hz is None else gpu_sampler(power_hz)  # None without NVIDIA GPUs
        samplers = [GuardedSampler(sampler, stderr_console())] if sampler else []
        view = LadderView(stderr_console(), config.lag_limit_ms)
        try:
            from servelab.bench.runner import run  # aiohttp: only when a benchmark really runs

            return run(config, store, samplers=samplers, progress=view.update)
        finally:
            view.close()
            for guarded in samplers:
                guarded.stop()  # a level that raised left its window open; stopping twice is harmless
            if sampler is not None:
                sampler.close()


class GuardedSampler:
    """A sampler whose failure (a driver error mid-run) ends its sampling with a warning, never the run."""

    def __init__(self, sampler: Any, console: Any) -> None:
        self.sampler, self.console, self.kind = sampler, console, getattr(sampler, "kind", "gpu_power")
        self.failed = False

    def _fail(self, when: str, exc: Exception) -> None:
        self.failed = True
        self.console.print(
            f"warning: {self.kind} sampling stopped ({when}: {type(exc).__name__}: {exc})", markup=False
        )

    def start(self) -> None:
        if not self.failed:
            try:
                self.sampler.start()
            except Exception as exc:  # any sampler failure is reported; the load goes on
                self._fail("start", exc)

    def stop(self) -> list[dict]:
        if self.failed:
            return []
        try:
            return self.sampler.stop()
        except Exception as exc:  # as in start()
            self._fail("stop", exc)
            return []


def _render(
    result: BenchResult, json_out: bool, failed: list[str] | None = None, slo: Slo | None = None
) -> None:
    if json_out:
        print_json(result.to_json())
        return
    console = stdout_console()
    for target in result.targets:
        console.print(_ladder_table(target))
        if target.max_rate is not None and target.max_rate.outcome == "found":
            console.print(target.max_rate.line(slo_text(slo or Slo())), markup=False)
        for lv in target.levels:
            if lv.client.get("workers"):
                console.print(_fleet_line(lv), markup=False)
        for lv in target.levels:
            if not lv.valid:
                console.print(
                    f"{lv.stats.level} not valid: {lv.invalid_reason or 'no reason recorded'}", markup=False
                )
    state = "partial (interrupted)" if result.partial else "complete"
    if failed:
        state = "finished, but every request of a level failed"
    console.print(f"run {result.run_id}: {state}")


def _ladder_table(target) -> Table:
    title = f"{target.url} ({target.engine}, {target.model})"
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    # short stacked headers and no vertical rules: the ladder fits an 80-column terminal
    for column in (
        "level",
        "stream\ntok/s\np50",
        "output\ntok/s",
        "TTFT\np50 ms",
        "TTFT\np99 ms",
        "ITL\np50 ms",
        "ITL\np99 ms",
        "errors",
        "evicted",
        "valid",
    ):
        table.add_column(
            column, justify="right", overflow="fold"
        )  # a narrow terminal wraps digits, never hides them
    for lv in target.levels:
        s = lv.stats
        table.add_row(
            s.level.label,
            _f(s.per_stream_tok_s.p50),
            _f(s.output_tok_s),
            _f(s.ttft_ms.p50),
            _f(s.ttft_ms.p99),
            _f(s.itl_ms.p50),
            _f(s.itl_ms.p99),
            str(s.errors),
            str(s.evictions),
            "yes" if lv.valid else "NO",
        )
    return table


def _fleet_line(lv) -> str:
    """Beside the timing figures of a level sent by workers: how many, and the bound on their clock alignment."""
    client = lv.client
    bound = client.get("clock_bound_ms") or 0.0
    where = (
        "one clock (shared CLOCK_MONOTONIC)"
        if bound == 0 and str(client.get("clock_source", "")).startswith("shared")
        else f"timings ±{bound:.3f} ms (worker clocks aligned by {client.get('clock_source')})"
    )
    return f"{lv.stats.level}: {len(client['workers'])} workers, {where}"


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
