"""`servelab plan`: will a model fit, with which engine flags, and how fast can it possibly go."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from servelab.cli.output import print_json, stderr_console, stdout_console, to_jsonable
from servelab.engines import registry
from servelab.errors import ConfigError


def _gpu(name: str | None, vram: float | None, bandwidth: float | None, tflops: float | None):
    from servelab.hardware.gpus import find_gpu, with_overrides

    if name is None and vram is not None and bandwidth is not None:
        return with_overrides(None, vram_gib=vram, bandwidth_gb_s=bandwidth, tflops=tflops)
    base = find_gpu("rtx4090" if name is None else name)
    return with_overrides(base, vram_gib=vram, bandwidth_gb_s=bandwidth, tflops=tflops)


def _launch_path(model: str) -> str:
    """A local model as an absolute path, so the command and the compose mount work from any directory."""
    return str(Path(model).absolute()) if Path(model).exists() else model


def _emit(plan, emit: str, host: str, gpus: int) -> str:
    from servelab.engines.registry import get_engine
    from servelab.plan.emit import compose_service

    if emit == "cmd":
        return plan.command_line
    engine = get_engine(plan.engine)
    port = int(plan.command[plan.command.index("--port") + 1])
    return compose_service(
        plan.engine,
        list(plan.command),
        image=engine.image or "",
        port=port,
        health_path=engine.health_path,
        host=host,
        gpus=gpus,
    ).rstrip("\n")


def register(app: typer.Typer) -> None:
    """Add `servelab plan` to the app."""

    @app.command("plan")
    def plan_command(
        model: str = typer.Argument(
            ..., help="Catalog id (Qwen/Qwen3.5-27B), a .gguf file, config.json or model dir."
        ),
        gpu: str | None = typer.Option(None, "--gpu", help="GPU name from the catalog (default rtx4090)."),
        engine: str = typer.Option(
            "all", "--engine", help=f"{', '.join(e.name for e in registry.planned())} or all."
        ),
        quant: str = typer.Option("all", "--quant", help="Weight format (awq, fp8, bf16, Q4_K_M, …) or all."),
        context: int | None = typer.Option(
            None, "--context", help="Longest request in tokens (default: the model's)."
        ),
        kv_dtype: str | None = typer.Option(
            None, "--kv-dtype", help="KV cache dtype: bf16, fp8_e5m2, fp8_e4m3, q8_0, q4_0 …"
        ),
        parallel: int = typer.Option(
            1, "--parallel", help="Concurrent sequences to plan for (llama.cpp -np)."
        ),
        gpus: int = typer.Option(1, "--gpus", help="GPUs for tensor parallelism."),
        interconnect: str | None = typer.Option(
            None, "--interconnect", help="nvlink, pcie-p2p or pcie-host-staged."
        ),
        vram: float | None = typer.Option(None, "--vram", help="Override GPU memory, GiB."),
        bandwidth: float | None = typer.Option(None, "--bandwidth", help="Override memory bandwidth, GB/s."),
        tflops: float | None = typer.Option(None, "--tflops", help="Override dense BF16 TFLOPS."),
        hf: bool = typer.Option(
            False, "--hf", help="Fetch config and safetensors headers from the Hugging Face Hub."
        ),
        emit: str | None = typer.Option(None, "--emit", help="Print the launch recipe: cmd or compose."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address the launched server binds."),
        mem_fraction_static: float | None = typer.Option(
            None, "--mem-fraction-static", help="sglang override."
        ),
        gpu_memory_utilization: float | None = typer.Option(
            None, "--gpu-memory-utilization", help="vLLM override."
        ),
        max_total_tokens: int | None = typer.Option(
            None, "--max-total-tokens", help="sglang --max-total-tokens."
        ),
        max_mamba_cache_size: int | None = typer.Option(
            None, "--max-mamba-cache-size", help="sglang state slots."
        ),
        kv_unified: bool = typer.Option(
            False, "--kv-unified", help="llama.cpp: one KV pool shared by all slots."
        ),
        n_gpu_layers: int | None = typer.Option(
            None, "--n-gpu-layers", "-ngl", help="llama.cpp layers on the GPU."
        ),
        max_num_seqs: int | None = typer.Option(None, "--max-num-seqs", help="vLLM --max-num-seqs."),
        max_num_batched_tokens: int | None = typer.Option(
            None, "--max-num-batched-tokens", help="vLLM --max-num-batched-tokens."
        ),
        kv_cache_memory_bytes: int | None = typer.Option(
            None, "--kv-cache-memory-bytes", help="vLLM --kv-cache-memory-bytes (the KV pool per GPU)."
        ),
        n_batch: int | None = typer.Option(None, "--batch-size", "-b", help="llama.cpp -b (default 2048)."),
        n_ubatch: int | None = typer.Option(
            None, "--ubatch-size", "-ub", help="llama.cpp -ub (default 512)."
        ),
        n_cpu_moe: int | None = typer.Option(
            None, "--n-cpu-moe", help="llama.cpp: experts of the first N layers in host RAM."
        ),
        cpu_moe: bool = typer.Option(
            False, "--cpu-moe", help="llama.cpp: every layer's experts in host RAM (-ot exps=CPU)."
        ),
        save: Path | None = typer.Option(None, "--save", help="Also write the JSON plan to this file."),
        json_out: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
    ) -> None:
        """Plan memory, flags and speed ceilings for serving MODEL."""
        from servelab.hardware.gpus import INTERCONNECTS, default_interconnect
        from servelab.model.load import load_model
        from servelab.plan.emit import check_emit
        from servelab.plan.make import (
            check_plan_numbers,
            check_setting_numbers,
            compare_plans,
            plan_set,
            search_plan,
        )

        check_emit(emit)
        if interconnect is not None and interconnect not in INTERCONNECTS:
            raise ConfigError(f"--interconnect {interconnect!r}; choose one of: {', '.join(INTERCONNECTS)}")
        check_plan_numbers(context, parallel, gpus)
        if n_gpu_layers is not None and n_gpu_layers < -1:
            raise ConfigError(
                f"-ngl must be -1 (all layers), 0 or a positive layer count, got {n_gpu_layers}"
            )
        if engine.lower() != "all":
            registry.get_engine(engine, registry.planned(), also=("all",))
        card = _gpu(gpu, vram, bandwidth, tflops)
        spec = load_model(model, hf=hf)
        flags: dict[str, Any] = {
            k: v
            for k, v in (
                ("mem_fraction_static", mem_fraction_static),
                ("max_total_tokens", max_total_tokens),
                ("gpu_memory_utilization", gpu_memory_utilization),
                ("max_mamba_cache_size", max_mamba_cache_size),
                ("n_gpu_layers", n_gpu_layers),
                ("kv_unified", kv_unified or None),
                ("max_num_seqs", max_num_seqs),
                ("max_num_batched_tokens", max_num_batched_tokens),
                ("kv_cache_memory_bytes", kv_cache_memory_bytes),
                ("n_batch", n_batch),
                ("n_ubatch", n_ubatch),
                ("n_cpu_moe", n_cpu_moe),
                ("cpu_moe", cpu_moe or None),
            )
            if v is not None
        }
        check_setting_numbers(flags)
        common: dict[str, Any] = dict(
            context=context,
            kv_dtype=kv_dtype,
            parallel=parallel,
            gpus=gpus,
            interconnect=interconnect,
            model_path=_launch_path(model),
            host=host,
            **flags,
        )
        one_quant = None if quant.lower() == "all" else quant
        if engine.lower() != "all" and one_quant is not None:
            plans = plan_set(
                search_plan(spec, card, engine=engine, quant=one_quant, **common),
                gpus,
                interconnect or default_interconnect(card),
            )
        else:
            engines = None if engine.lower() == "all" else (engine,)
            plans = compare_plans(spec, card, engines=engines, quant=one_quant, **common)
        _output(plans, json_out=json_out, emit=emit, host=host, save=save)


def _output(plans, *, json_out: bool, emit: str | None, host: str, save: Path | None) -> None:
    import json

    from servelab.plan.render import comparison_table, render_plan

    if save is not None:
        try:
            save.write_text(json.dumps(to_jsonable(plans), indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--save {save}: cannot write it ({exc.strerror or exc})") from exc
        stderr_console().print(f"plan saved to {save}", markup=False)
    best = next((p for p in plans.plans if p.fits), plans.plans[0])
    if emit is not None and not best.fits:
        stderr_console().print(
            f"warning: nothing fits; this recipe is for {best.engine} {best.quant}, which does "
            "not fit either",
            markup=False,
        )
    if json_out:
        recipe = (
            {} if emit is None else {"recipe": {"format": emit, "text": _emit(best, emit, host, plans.gpus)}}
        )
        print_json({**to_jsonable(plans), **recipe})
    elif emit is not None:
        typer.echo(_emit(best, emit, host, plans.gpus))
    elif len(plans.plans) == 1:
        render_plan(stdout_console(), best)
    else:
        console = stdout_console()
        console.width = max(console.width, 110)
        console.print(comparison_table(plans))
        console.print(f"best: {best.engine} {best.quant} — {best.command_line}", markup=False)
        if not best.fits:
            stderr_console().print(
                "nothing fits: lower --context, pick a smaller --quant or add GPUs", markup=False
            )
