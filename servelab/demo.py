"""`servelab demo`: the whole chain on this machine with a real llama-server and a model the project makes.

Each step is a small function that says what it does and why (through ``say``) and returns what it found;
``run_demo`` strings them together. Other layers (plan, verify, bench, report) are imported lazily; a
step those layers refuse (a ServelabError) says why and the demo goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab.engines import registry
from servelab.engines.base import Engine
from servelab.engines.process import EngineServer, free_port
from servelab.errors import ConfigError, EngineError, ServelabError

Say = Callable[[str], None]
DEMO_ENGINE = "llama.cpp"


@dataclass(frozen=True)
class DemoConfig:
    workdir: Path
    ctx: int = 16384  # -c for both launches; the model's n_ctx_train is the same
    slots: int = 4  # -np: the divided launch gives each slot ctx / slots
    threads: int = 2
    concurrency: tuple[int, ...] = (1, 2, 4)
    workloads: tuple[str, ...] = ("short", "mixed")
    requests_per_level: int = 8
    output_tokens: int = 32


@dataclass(frozen=True)
class DemoStep:
    name: str
    outcome: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DemoResult:
    workdir: Path
    steps: tuple[DemoStep, ...]
    report_path: Path | None


def demo_engine() -> Engine:
    """The engine the demo runs: llama.cpp, the one that builds and serves on any machine (through the registry)."""
    return registry.get_engine(DEMO_ENGINE)


def find_engine(cfg: DemoConfig, say: Say) -> Path:
    """Step 1: the engine's program, built from source if this machine has none yet."""
    engine = demo_engine()
    if engine.installer is None:
        raise EngineError(f"servelab cannot install {engine.label}, so the demo cannot run it")
    say(f"1. engine: looking for {engine.label}'s server (env, config, then servelab's cache)")
    try:
        found = engine.installer.find()
    except EngineError:
        say("   none found: building it from the pinned llama-cpp-python source (about 5 minutes on 2 cores)")
        found = engine.installer.install(cuda=False, progress=lambda line: say(f"   {line}"))
    say(f"   using {found.path} ({found.version})")
    return found.path


def make_hybrid(cfg: DemoConfig, say: Say) -> Path:
    """Step 2: a small qwen35 hybrid (full attention every 4th layer), like the field report's model."""
    from servelab.modelmake import make_model, shape_for

    say("2. model: making a small Qwen3.5-style hybrid: 2 of 8 layers keep a KV cache, 6 hold a fixed state")
    made = make_model("hybrid", cfg.workdir / "hybrid.gguf", shape_for("hybrid", ctx_train=cfg.ctx))
    say(f"   wrote {made.path} ({made.file_bytes / 2**20:.1f} MiB, n_ctx_train {cfg.ctx}, random weights)")
    return made.path


def plan_launch(model: Path, cfg: DemoConfig, say: Say) -> dict[str, Any]:
    """Step 3: what the planner expects the engine to allocate, and what it warns about, before launching.
    The device is this machine's CPU (its memory bandwidth measured once and cached): the divided launch of
    step 4, and the right launch of step 5, whose plan (saved as plan.json) gives the bill its ceilings."""
    say(
        f"3. plan: what {demo_engine().label} should allocate for -c {cfg.ctx} -np {cfg.slots}, before anything runs"
    )
    try:
        from servelab.hardware.gpus import CPU_DEVICE, find_gpu
        from servelab.model import load_model
        from servelab.plan.make import make_plan, plan_set

        say("   device: this machine's CPU (the first run measures its memory bandwidth, a few seconds)")
        cpu, spec = find_gpu(CPU_DEVICE), load_model(str(model))
        name = demo_engine().name
        plan = make_plan(spec, cpu, engine=name, context=cfg.ctx // cfg.slots, parallel=cfg.slots)
        right = make_plan(spec, cpu, engine=name, context=cfg.ctx, parallel=cfg.slots, kv_unified=True,
                          model_path=str(model))  # fmt: skip
    except ServelabError as exc:
        say(f"   planner not available for this model yet ({exc}); skipping")
        return {"available": False}
    memory = plan.memory_bytes
    say(f"   {right.device_note}")
    say(
        f"   context per slot {plan.context_served}, KV {memory.kv_cache / 2**20:.2f} MiB, "
        f"state {memory.recurrent_state / 2**20:.2f} MiB, weights {memory.weights / 2**20:.2f} MiB"
    )
    for warning in plan.warnings:
        say(f"   warning: {warning}")
    ceiling = right.decode_ceiling_tok_s
    say(
        f"   decode ceiling on this machine: {ceiling.short} tok/s per stream at {ceiling.short_context} tokens"
    )
    path = _save_plan(plan_set(right), cfg.workdir / "plan.json")
    return {
        "available": True,
        "context_per_slot": plan.context_served,
        "warnings": list(plan.warnings),
        "plan_file": str(path),
        "device": right.gpu,
        "bandwidth_gb_s": cpu.bandwidth_gb_s,
        "decode_ceiling_tok_s": ceiling.short,
    }


def _save_plan(plans: Any, path: Path) -> Path:
    """The plan as `servelab plan --json` writes it, for the report's --plan (and for the reader)."""
    import dataclasses
    import json

    path.write_text(json.dumps(dataclasses.asdict(plans), indent=2) + "\n", encoding="utf-8")
    return path


def launch(binary: Path, model: Path, args: list[str], cfg: DemoConfig, name: str) -> EngineServer:
    """The demo engine on loopback, on a free port, its log in the demo's folder (``binary``: what step 1 found,
    the one the engine's launcher finds too)."""
    launcher = demo_engine().launcher
    if launcher is None:
        raise EngineError(f"servelab cannot start {demo_engine().label}, so the demo cannot run it")
    return launcher.start(str(model), ["-t", str(cfg.threads), *args], host="127.0.0.1", port=free_port(),
                          log_path=cfg.workdir / f"{name}.log", timeout_s=launcher.HEALTH_TIMEOUT_S)  # fmt: skip


def verify_launch(server: EngineServer, say: Say) -> dict[str, Any]:
    """Read what the server really got (/props, /slots, /v1/models) and diff it against its command line."""
    from servelab.verify import from_command, verify

    result = verify(server.url, from_command(server.process.argv, engine=demo_engine().name))
    eff = result.effective
    say(f"   the server reports: context per slot {eff.context_per_slot}, slots {eff.slots}")
    for mismatch in result.mismatches:
        say(f"   MISMATCH: {mismatch.line}")
    if not result.mismatches:
        say("   no mismatch: the server runs with what was asked")
    return {
        "context_per_slot": eff.context_per_slot,
        "slots": eff.slots,
        "mismatches": [m.line for m in result.mismatches],
    }


def divided_launch(binary: Path, model: Path, cfg: DemoConfig, say: Say) -> dict[str, Any]:
    """Step 4: the field report's trap: -c N -np 4 quietly gives each slot N/4."""
    args = ["-c", str(cfg.ctx), "-np", str(cfg.slots)]
    say(f"4. launch as in the field report: llama-server -c {cfg.ctx} -np {cfg.slots}, then verify it")
    with launch(binary, model, args, cfg, "divided") as server:
        return {"args": args, **verify_launch(server, say)}


def right_args(cfg: DemoConfig) -> list[str]:
    return ["-c", str(cfg.ctx), "-np", str(cfg.slots), "--kv-unified"]


def bench_ladder(server: EngineServer, cfg: DemoConfig, say: Say) -> tuple[list[str], list[dict[str, Any]]]:
    """Step 6: the concurrency ladder with short and mixed prompts through servelab's bench library.
    Returns the stored run ids and one row per workload and level."""
    from servelab.bench.config import BenchConfig
    from servelab.bench.runner import run
    from servelab.bench.schedule import StopRule
    from servelab.bench.workloads import WorkloadSpec
    from servelab.store import Store

    run_ids, rows = [], []
    with Store.open(cfg.workdir / "runs.db") as store:
        for kind in cfg.workloads:
            say(
                f"6. bench: {kind} prompts at concurrency {', '.join(map(str, cfg.concurrency))} "
                f"({cfg.requests_per_level} requests per level)"
            )
            config = (
                BenchConfig(  # token-id prompts: exact lengths whatever the tiny vocabulary makes of words
                    targets=(server.url,),
                    concurrency=cfg.concurrency,
                    name=f"demo-{kind}",
                    chat=False,
                    workload=WorkloadSpec(
                        kind=kind, output_tokens=cfg.output_tokens, chat=False, use_token_ids=True
                    ),
                    stop=StopRule(requests=cfg.requests_per_level),
                )
            )
            result = run(config, store)
            run_ids.append(result.run_id)
            for level in result.targets[0].levels:
                stats = level.stats
                row = {
                    "workload": kind,
                    "level": stats.level.label,
                    "completed": stats.completed,
                    "errors": stats.errors,
                    "output_tok_s": stats.output_tok_s,
                    "ttft_p50_ms": stats.ttft_ms.p50,
                }
                rows.append(row)
                say(
                    f"   {row['level']}: {_fmt(row['output_tok_s'])} tok/s in total, "
                    f"TTFT p50 {_fmt(row['ttft_p50_ms'])} ms, errors {row['errors']}"
                )
    return [r for r in run_ids if r], rows


def _fmt(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "-"


def right_launch_and_bench(
    binary: Path, model: Path, cfg: DemoConfig, say: Say
) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    """Step 5 and 6: relaunch with a unified KV cache (every slot may use the whole -c), verify, benchmark."""
    args = right_args(cfg)
    say(
        f"5. relaunch right: --kv-unified lets any slot use all {cfg.ctx} tokens (or use -np 1); verify again"
    )
    with launch(binary, model, args, cfg, "right") as server:
        verified = {"args": args, **verify_launch(server, say)}
        run_ids, rows = bench_ladder(server, cfg, say)
    return verified, run_ids, rows


def write_report(cfg: DemoConfig, run_ids: list[str], say: Say, plan_file: str | None = None) -> Path | None:
    """Step 7: the bill, as a self-contained HTML page rendered from the stored runs, held against the plan for
    this machine (step 3) so every figure stands beside this machine's ceiling."""
    if not run_ids:
        return None
    say("7. report: every figure side by side, rendered from the stored runs")
    try:
        from servelab.plan.io import load_plan
        from servelab.report import assemble, render_report
        from servelab.store import Store

        plan_doc = load_plan(plan_file) if plan_file else None
        if plan_doc is None:
            say("   no plan for this machine, so the bill has no ceilings")
        with Store.open(cfg.workdir / "runs.db", must_exist=True) as store:
            runs = [store.load_run(run_id) for run_id in run_ids]
        html, _ = render_report(assemble(runs, plan_doc), "html")
    except ServelabError as exc:
        say(f"   report not available ({exc}); the results are in {cfg.workdir / 'runs.db'}")
        return None
    path = cfg.workdir / "report.html"
    path.write_text(html, encoding="utf-8")
    say(f"   wrote {path}")
    return path


def run_demo(cfg: DemoConfig, say: Say) -> DemoResult:
    """Every step in order; engines are stopped whatever happens."""
    start = time.monotonic()
    try:
        cfg.workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"--workdir {cfg.workdir}: cannot make it a directory ({exc.strerror or exc})"
        ) from exc
    binary = find_engine(cfg, say)
    model = make_hybrid(cfg, say)
    planned = plan_launch(model, cfg, say)
    divided = divided_launch(binary, model, cfg, say)
    right, run_ids, levels = right_launch_and_bench(binary, model, cfg, say)
    report = write_report(cfg, run_ids, say, planned.get("plan_file"))
    say(f"done in {time.monotonic() - start:.0f} s; everything is in {cfg.workdir}")
    steps = (
        DemoStep("engine", {"llama_server": str(binary)}),
        DemoStep("model", {"path": str(model)}),
        DemoStep("plan", planned),
        DemoStep("divided", divided),
        DemoStep("right", right),
        DemoStep("bench", {"run_ids": run_ids, "db": str(cfg.workdir / "runs.db"), "levels": levels}),
    )
    return DemoResult(cfg.workdir, steps, report)
