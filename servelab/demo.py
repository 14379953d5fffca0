"""`servelab demo`: the whole chain on this machine with real engines and a model the project makes.

Two serving philosophies, live: llama.cpp's independent slots (-np 4: a long prompt's prefill stalls the other
slots' decode) and vLLM's continuous batching (every request shares each step, long prompts chunked), on one
tiny Llama made twice (`demo_pair`), under the same workloads, each held against its own plan for this CPU.
Each step is a small function that says what it does and why (through ``say``) and returns what it found;
``run_demo`` strings them together. Other layers (plan, verify, bench, report) are imported lazily; a step
those layers refuse (a ServelabError) says why and the demo goes on. The engines are reached through the
registry by the names in ``DEMO_ENGINES``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from servelab.demo_advise import advice_outcome
from servelab.demo_pair import ModelPair, make_pair
from servelab.demo_summary import with_memory
from servelab.engines import registry
from servelab.engines.base import Engine
from servelab.engines.process import EngineServer, free_port
from servelab.errors import ConfigError, EngineError, ServelabError
from servelab.hardware.pinning import CpuSplit, cpu_split, on_cpus

if TYPE_CHECKING:
    from servelab.advise.confirm import Say  # a line for the person watching


class BenchView(Protocol):
    """What watches a ladder while it runs (`cli/live_view.py` LadderView): the runner's progress callback."""

    def update(self, live: Any) -> None: ...
    def close(self) -> None: ...


Watch = Callable[[float], BenchView]  # the client's lag limit (ms) -> a view for one bench run
DEMO_ENGINE = "llama.cpp"  # the one that builds and serves on any machine: the context trap is its
SECOND_ENGINE = "vllm"  # continuous batching; its CPU build installs on first use
DEMO_ENGINES = (DEMO_ENGINE, SECOND_ENGINE)
VLLM_START_TIMEOUT_S = 600.0


@dataclass(frozen=True, kw_only=True)
class DemoConfig:
    workdir: Path
    ctx: int = 16384  # -c / --max-model-len for every launch; the models' n_ctx_train is the same
    slots: int = 4  # -np: the divided launch gives each slot ctx / slots; vLLM's --max-num-seqs alike
    threads: int = 2
    concurrency: tuple[int, ...] = (1, 2, 4)
    workloads: tuple[str, ...] = ("short", "mixed")
    requests_per_level: int = 100  # enough for a p99 that is not the largest of a few (issue 24.6)
    output_tokens: int = 32
    engines: tuple[str, ...] = ("llamacpp", "vllm")  # registry names, in run order
    pin: bool = True  # server and client on different CPUs where there are two or more


@dataclass(frozen=True)
class DemoStep:
    name: str
    outcome: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DemoResult:
    workdir: Path
    steps: tuple[DemoStep, ...]
    report_path: Path | None


def demo_engine(name: str = DEMO_ENGINE) -> Engine:
    return registry.get_engine(name)


def parse_engines(text: str) -> tuple[str, ...]:
    """``--engines llama.cpp,vllm`` as registry names in that order; ConfigError for any other engine."""
    allowed = {demo_engine(n).name: n for n in DEMO_ENGINES}
    names = [part.strip() for part in text.split(",") if part.strip()]
    found = [registry.find_engine(n) for n in names]
    wrong = [n for n, e in zip(names, found, strict=True) if e is None or e.name not in allowed]
    if wrong or not names:
        raise ConfigError(
            f"--engines {text!r}: the demo runs {', '.join(DEMO_ENGINES)} (one or both, "
            f"comma-separated){'; not ' + ', '.join(wrong) if wrong else ''}"
        )
    return tuple(dict.fromkeys(e.name for e in found if e is not None))


def ensure_llama_server(cfg: DemoConfig, say: Say) -> Path:
    """Step 1: llama.cpp's server, built from source if this machine has none yet."""
    engine = demo_engine()
    if engine.installer is None:
        raise EngineError(f"servelab cannot install {engine.label}, so the demo cannot run it")
    say(f"1. engines: looking for {engine.label}'s server (env, config, then servelab's cache)")
    try:
        found = engine.installer.find()
    except EngineError:
        say("   none found: building it from the pinned llama-cpp-python source (about 5 minutes on 2 cores)")
        found = engine.installer.install(cuda=False, progress=lambda line: say(f"   {line}"))
    say(f"   using {found.path} ({found.version})")
    return found.path


def find_second(say: Say) -> dict[str, Any]:
    """Step 1 for vLLM: the user's, or servelab's pinned CPU build installed now (about 2 minutes, 2.5 GB);
    where it cannot be installed here, one line says why and the demo goes on without it."""
    engine = demo_engine(SECOND_ENGINE)
    if engine.installer is None:
        return {"skipped": f"servelab cannot install {engine.label}"}
    say(f"   looking for {engine.label} (env, config, then servelab's CPU venv)")
    try:
        found = engine.installer.find()
    except EngineError:
        say(
            "   none found: installing vLLM's CPU build into servelab's cache (about 2 minutes, 2.5 GB, once)"
        )
        try:
            found = engine.installer.install(cuda=False, progress=lambda line: say(f"   {line}"))
        except ServelabError as exc:
            say(f"   vLLM skipped: it cannot be installed here ({exc})")
            return {"skipped": f"cannot be installed here: {exc}"}
    say(f"   using {found.path} ({found.version})")
    return {"program": str(found.path), "version": found.version}


def make_models(cfg: DemoConfig, say: Say) -> ModelPair:
    """Step 2: one tiny Llama, as a GGUF for llama.cpp and a Hugging Face folder for vLLM."""
    say("2. model: one small Llama (4 layers, hidden 256, GQA 4/2, vocab 4096), written twice from one seed:")
    pair = make_pair(cfg.workdir, cfg.ctx)
    say(
        f"   {pair.gguf} (f16, for llama.cpp) and {pair.hf}/ (bf16, for vLLM): {pair.params:,} parameters, "
        f"n_ctx_train {cfg.ctx}, random weights"
    )
    say(
        f"   {pair.same_weights}; one tokenizer (the vocabulary servelab trains); different: the storage type "
        "and the q/k rotary layout, so the same work per token, not the same tokens out"
    )
    return pair


def plan_launch(pair: ModelPair, cfg: DemoConfig, say: Say) -> dict[str, Any]:
    """Step 3: what each engine should allocate, and what the planner warns about, before launching. The
    device is this machine's CPU (its memory bandwidth measured once and cached); plan.json holds one entry
    per engine, so the bill measures each against its own ceiling."""
    say(
        f"3. plan: what {demo_engine().label} should allocate for -c {cfg.ctx} -np {cfg.slots}, before anything runs"
    )
    try:
        from servelab.hardware.gpus import CPU_DEVICE, find_gpu
        from servelab.model import load_model
        from servelab.plan.make import make_plan
        from servelab.sizing.types import PlanSet

        say("   device: this machine's CPU (the first run measures its memory bandwidth, a few seconds)")
        cpu, spec = find_gpu(CPU_DEVICE), load_model(str(pair.gguf))
        name = demo_engine().name
        plan = make_plan(spec, cpu, engine=name, context=cfg.ctx // cfg.slots, parallel=cfg.slots)
        planned = launched_plans(pair, cfg)
        right = planned[name][0]
        plans = [p for p, _ in planned.values()]
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
    ceilings = {}
    for entry in plans:
        ceiling = entry.decode_ceiling_tok_s
        ceilings[entry.engine] = ceiling.short
        say(
            f"   {entry.engine} decode ceiling on this machine: {ceiling.short} tok/s per stream at "
            f"{ceiling.short_context} tokens ({entry.quant} weights)"
        )
    path = _save_plan(PlanSet(right.model, right.gpu, 1, None, tuple(plans)), cfg.workdir / "plan.json")
    return {
        "available": True,
        "context_per_slot": plan.context_served,
        "warnings": list(plan.warnings),
        "plan_file": str(path),
        "device": right.gpu,
        "bandwidth_gb_s": cpu.bandwidth_gb_s,
        "decode_ceiling_tok_s": ceilings[right.engine],
        "decode_ceilings_tok_s": ceilings,
    }


def launched_plans(pair: ModelPair, cfg: DemoConfig) -> dict[str, tuple[Any, Any]]:
    """Engine -> (its plan for this CPU as the demo launches it, the model spec): llama.cpp's right launch
    (a unified KV cache) on the GGUF, vLLM on the folder (when asked for)."""
    from servelab.hardware.gpus import CPU_DEVICE, find_gpu
    from servelab.model import load_model
    from servelab.plan.make import make_plan

    cpu, gguf = find_gpu(CPU_DEVICE), load_model(str(pair.gguf))
    name = demo_engine().name
    out = {
        name: (
            make_plan(
                gguf,
                cpu,
                engine=name,
                context=cfg.ctx,
                parallel=cfg.slots,
                kv_unified=True,
                model_path=str(pair.gguf),
            ),
            gguf,
        )
    }
    if SECOND_ENGINE in cfg.engines:
        hf = load_model(str(pair.hf))
        out[SECOND_ENGINE] = (
            make_plan(
                hf, cpu, engine=SECOND_ENGINE, context=cfg.ctx, parallel=cfg.slots, model_path=str(pair.hf)
            ),
            hf,
        )
    return out


def _save_plan(plans: Any, path: Path) -> Path:
    """The plans as `servelab plan --json` writes them, for the report's --plan (and for the reader)."""
    import dataclasses
    import json

    path.write_text(json.dumps(dataclasses.asdict(plans), indent=2) + "\n", encoding="utf-8")
    return path


def launch(
    engine: Engine,
    model: Path,
    args: list[str],
    cfg: DemoConfig,
    name: str,
    cpus: CpuSplit | None,
    timeout_s: float | None = None,
) -> EngineServer:
    """An engine on loopback, on a free port, its log in the demo's folder, started on the server's CPUs."""
    launcher = engine.launcher
    if launcher is None:
        raise EngineError(f"servelab cannot start {engine.label}, so the demo cannot run it")
    with on_cpus(cpus.server if cpus else None):
        return launcher.start(
            str(model),
            args,
            host="127.0.0.1",
            port=free_port(),
            log_path=cfg.workdir / f"{name}.log",
            timeout_s=timeout_s or launcher.HEALTH_TIMEOUT_S,
        )


def verify_launch(engine: Engine, server: EngineServer, say: Say) -> dict[str, Any]:
    """Read what the server really got (its endpoints) and diff it against its command line."""
    from servelab.verify import from_command, verify

    result = verify(server.url, from_command(server.process.argv, engine=engine.name))
    eff = result.effective
    say(f"   the server reports: {reported_line(eff)}")
    for mismatch in result.mismatches:
        say(f"   MISMATCH: {mismatch.line}")
    if not result.mismatches:
        say("   no mismatch: the server runs with what was asked")
    return {
        "context_per_slot": eff.context_per_slot,
        "slots": eff.slots,
        "mismatches": [m.line for m in result.mismatches],
    }


def reported_line(eff: Any) -> str:
    """What the server said of its context and concurrency, naming only what it reports (vLLM has no slots: its
    KV pool in tokens instead)."""
    said = [
        (eff.context_per_slot, "context per request {}"),
        (eff.slots, "slots {}"),
        (eff.max_total_tokens, "KV pool {:,} tokens"),
        (eff.kv_cache_dtype, "KV cache {}"),
    ]
    words = [form.format(value) for value, form in said if value is not None]
    return ", ".join(words) or "nothing about its context or slots"


def llama_args(cfg: DemoConfig, cpus: CpuSplit | None) -> list[str]:
    threads = min(cfg.threads, len(cpus.server)) if cpus else cfg.threads
    return ["-t", str(threads)]


def divided_launch(
    binary: Path, pair: ModelPair, cfg: DemoConfig, say: Say, cpus: CpuSplit | None
) -> dict[str, Any]:
    """Step 4: the field report's trap: -c N -np 4 quietly gives each slot N/4."""
    args = ["-c", str(cfg.ctx), "-np", str(cfg.slots)]
    say(f"4. launch as in the field report: llama-server -c {cfg.ctx} -np {cfg.slots}, then verify it")
    with launch(demo_engine(), pair.gguf, llama_args(cfg, cpus) + args, cfg, "divided", cpus) as server:
        return {"args": args, **verify_launch(demo_engine(), server, say)}


def right_args(cfg: DemoConfig) -> list[str]:
    return ["-c", str(cfg.ctx), "-np", str(cfg.slots), "--kv-unified"]


def vllm_args(cfg: DemoConfig) -> list[str]:
    """Eager (no torch.compile: 25-30 s to healthy instead of 70 here), the same context, as many sequences
    at once as llama.cpp has slots (docs/reference/vllm-cpu.md §3)."""
    return ["--max-model-len", str(cfg.ctx), "--max-num-seqs", str(cfg.slots), "--enforce-eager"]


def bench_ladder(
    label: str,
    server: EngineServer,
    cfg: DemoConfig,
    say: Say,
    step: int,
    cpus: CpuSplit | None,
    watch: Watch | None = None,
) -> tuple[list[str], list[dict[str, Any]]]:
    """The concurrency ladder with short and mixed prompts through servelab's bench library, on the client's
    CPU. Returns the stored run ids and one row per workload and level."""
    from servelab.bench.config import BenchConfig
    from servelab.bench.runner import run
    from servelab.bench.schedule import StopRule
    from servelab.bench.workloads import WorkloadSpec
    from servelab.store import Store

    run_ids, rows = [], []
    with Store.open(cfg.workdir / "runs.db") as store, on_cpus(cpus.client if cpus else None):
        for kind in cfg.workloads:
            say(
                f"{step}. bench {label}: {kind} prompts at concurrency {', '.join(map(str, cfg.concurrency))} "
                f"({cfg.requests_per_level} requests per level)"
            )
            config = (
                BenchConfig(  # token-id prompts: exact lengths whatever the tiny vocabulary makes of words
                    targets=(server.url,),
                    concurrency=cfg.concurrency,
                    name=f"demo-{label}-{kind}",
                    chat=False,
                    workload=WorkloadSpec(
                        kind=kind, output_tokens=cfg.output_tokens, chat=False, use_token_ids=True
                    ),
                    stop=StopRule(requests=cfg.requests_per_level),
                )
            )
            view = watch(config.lag_limit_ms) if watch else None
            try:
                result = run(config, store, progress=view.update if view else None)
            finally:
                if view is not None:
                    view.close()
            run_ids.append(result.run_id)
            resident = server.resident_peak_bytes()  # a CPU engine's memory used: its processes' peak RSS
            for level in result.targets[0].levels:
                stats = level.stats
                row = {
                    "engine": label,
                    "workload": kind,
                    "run_id": result.run_id,
                    "memory_used_bytes": resident,
                    "level": stats.level.label,
                    "completed": stats.completed,
                    "errors": stats.errors,
                    "evictions": stats.evictions,
                    "output_tok_s": stats.output_tok_s,
                    "ttft_p50_ms": stats.ttft_ms.p50,
                    "ttft_p99_ms": stats.ttft_ms.p99,
                    "tpot_p99_ms": stats.tpot_ms.p99,
                }
                rows.append(row)
                say(
                    f"   {row['level']}: {_fmt(row['output_tok_s'])} tok/s in total, TTFT p50 "
                    f"{_fmt(row['ttft_p50_ms'])} ms, p99 {_fmt(row['ttft_p99_ms'])} ms, evicted {row['evictions']}, "
                    f"errors {row['errors']}"
                )
    return [r for r in run_ids if r], rows


def _fmt(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "-"


def right_launch_and_bench(
    binary: Path,
    pair: ModelPair,
    cfg: DemoConfig,
    say: Say,
    cpus: CpuSplit | None,
    watch: Watch | None = None,
) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    """Step 5 and 6: relaunch with a unified KV cache (every slot may use the whole -c), verify, benchmark."""
    args = right_args(cfg)
    say(
        f"5. relaunch right: --kv-unified lets any slot use all {cfg.ctx} tokens (or use -np 1); verify again"
    )
    with launch(demo_engine(), pair.gguf, llama_args(cfg, cpus) + args, cfg, "right", cpus) as server:
        verified = {"args": args, **verify_launch(demo_engine(), server, say)}
        run_ids, rows = bench_ladder(demo_engine().name, server, cfg, say, 6, cpus, watch)
    return verified, run_ids, rows


def second_launch_and_bench(
    pair: ModelPair, cfg: DemoConfig, say: Say, cpus: CpuSplit | None, watch: Watch | None = None
) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    """Step 7 and 8: vLLM on the same model (its folder), verified, under the same ladder and workloads."""
    engine = demo_engine(SECOND_ENGINE)
    args = vllm_args(cfg)
    say(f"7. launch {engine.label}: vllm serve {pair.hf.name} {' '.join(args)} (about 30 s to healthy here)")
    started = time.monotonic()
    try:
        server = launch(engine, pair.hf, args, cfg, "vllm", cpus, VLLM_START_TIMEOUT_S)
    except ServelabError as exc:
        say(f"   vLLM did not start here ({exc}); the bill shows llama.cpp only")
        return {"skipped": f"did not start: {exc}"}, [], []
    with server:
        say(f"   healthy in {time.monotonic() - started:.0f} s")
        verified = {"args": args, **verify_launch(engine, server, say)}
        run_ids, rows = bench_ladder(engine.name, server, cfg, say, 8, cpus, watch)
    return verified, run_ids, rows


def write_report(
    cfg: DemoConfig,
    run_ids: list[str],
    say: Say,
    plan_file: str | None = None,
    advice: dict[str, Any] | None = None,
    memory: dict[str, int] | None = None,
) -> tuple[Path | None, dict[str, Any]]:
    """Step 10: the bill, as a self-contained HTML page rendered from the stored runs, each engine held against
    its own plan for this machine (step 3), the advice (step 9) and the summary it opens with; `memory`: run id
    -> the server's peak resident memory, the memory a CPU engine used."""
    if not run_ids:
        return None, {}
    say("10. report: every figure side by side, rendered from the stored runs, and the advice")
    try:
        from servelab.plan.io import load_plan
        from servelab.report import assemble, render_report
        from servelab.report.advice import AdviceDoc
        from servelab.store import Store

        plan_doc = load_plan(plan_file) if plan_file else None
        if plan_doc is None:
            say("   no plan for this machine, so the bill has no ceilings")
        with Store.open(cfg.workdir / "runs.db", must_exist=True) as store:
            runs = [store.load_run(run_id) for run_id in run_ids]
        bill = with_memory(assemble(runs, plan_doc), memory or {})
        advised = None if advice is None else AdviceDoc.from_json(advice, "the demo's advice")
        html, _ = render_report(bill, "html", advised=advised)
    except ServelabError as exc:
        say(f"   report not available ({exc}); the results are in {cfg.workdir / 'runs.db'}")
        return None, {}
    path = cfg.workdir / "report.html"
    path.write_text(html, encoding="utf-8")
    say(f"   wrote {path}")
    from servelab.demo_summary import summary

    return path, summary(bill)


def _advise(
    pair: ModelPair, cfg: DemoConfig, levels: list[dict[str, Any]], say: Say
) -> dict[str, Any] | None:
    """Step 9 (demo_advise.py): advise for the demo's goal with the calibration the runs just made."""
    from servelab.demo_advise import advise_step, benched_runs

    try:
        return advise_step(cfg, benched_runs(levels), launched_plans(pair, cfg), say)
    except ServelabError as exc:
        say(f"   advice not available ({exc})")
        return None


def run_demo(cfg: DemoConfig, say: Say, watch: Watch | None = None) -> DemoResult:
    """Every step in order; engines are stopped whatever happens. ``watch`` makes a live view per bench run."""
    start = time.monotonic()
    try:
        cfg.workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"--workdir {cfg.workdir}: cannot make it a directory ({exc.strerror or exc})"
        ) from exc
    cpus = cpu_split() if cfg.pin else None
    with_llama, with_vllm = demo_engine().name in cfg.engines, SECOND_ENGINE in cfg.engines
    binary = ensure_llama_server(cfg, say) if with_llama else None
    second = find_second(say) if with_vllm else {"skipped": "not asked (--engines)"}
    pair = make_models(cfg, say)
    say(f"   {cpus.line} (pinned: the machine is shared and noisy)" if cpus else "   one CPU: not pinned")
    planned = plan_launch(pair, cfg, say)
    steps = [
        DemoStep("engine", {"llama_server": str(binary) if binary else None, "vllm": second}),
        DemoStep("model", {"path": str(pair.gguf), "hf": str(pair.hf), "weights": pair.same_weights}),
        DemoStep("plan", planned),
    ]
    run_ids: list[str] = []
    levels: list[dict[str, Any]] = []
    if binary is not None:
        steps.append(DemoStep("divided", divided_launch(binary, pair, cfg, say, cpus)))
        right, ids, rows = right_launch_and_bench(binary, pair, cfg, say, cpus, watch)
        steps.append(DemoStep("right", right))
        run_ids, levels = run_ids + ids, levels + rows
    if "skipped" not in second:
        verified, ids, rows = second_launch_and_bench(pair, cfg, say, cpus, watch)
        second = {**second, **verified}
        run_ids, levels = run_ids + ids, levels + rows
    advice = _advise(pair, cfg, levels, say)
    memory = {row["run_id"]: row["memory_used_bytes"] for row in levels if row["memory_used_bytes"]}
    report, glance = write_report(cfg, run_ids, say, planned.get("plan_file"), advice, memory)
    seconds = time.monotonic() - start
    say(f"done in {seconds:.0f} s; everything is in {cfg.workdir}")
    steps += [
        DemoStep("vllm", second),
        DemoStep("bench", {"run_ids": run_ids, "db": str(cfg.workdir / "runs.db"), "levels": levels}),
        DemoStep("advice", advice_outcome(advice, cfg.workdir)),
        DemoStep("summary", {**glance, "wall_s": round(seconds)}),
    ]
    return DemoResult(cfg.workdir, tuple(steps), report)
