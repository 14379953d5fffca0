"""`servelab sim`: run the reference OpenAI-compatible server with exactly known timing and faults."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import typer

from servelab.errors import ConfigError
from servelab.inert import inert_line
from servelab.sim.config import FAULT_KINDS, USAGE_MODES, SimConfig, parse_fault

MID_STREAM_FAULTS = ("drop", "malformed", "stall")


def register(app: typer.Typer) -> None:
    """Add this command to the app."""

    @app.command("sim")
    def sim(
        emulate_model: str | None = typer.Argument(
            None,
            help="With --emulate: catalog id, .gguf file or config.json (default: the --plan file's model).",
        ),
        port: int = typer.Option(..., "--port", help="Port to listen on (0: any free port, printed)."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback unless asked)."),
        model: str | None = typer.Option(
            None,
            "--model",
            help="Model name served at /v1/models (default sim-model; --emulate: the plan's).",
        ),
        ttft_ms: float = typer.Option(20.0, "--ttft-ms", help="Request received → first content chunk."),
        itl_ms: float = typer.Option(10.0, "--itl-ms", help="Interval per token."),
        tokens_per_chunk: int = typer.Option(1, "--tokens-per-chunk", help="Tokens carried by each chunk."),
        max_tokens: int = typer.Option(64, "--max-tokens", help="Output length when the request gives none."),
        role_chunk: bool = typer.Option(True, "--role-chunk/--no-role-chunk", help="Role-only first chunk."),
        usage: str = typer.Option("honour", "--usage", help=f"Usage reporting: {'|'.join(USAGE_MODES)}."),
        ignore_eos: bool = typer.Option(True, "--ignore-eos/--no-ignore-eos", help="Honour ignore_eos."),
        eos_after: int = typer.Option(0, "--eos-after", help="Natural answer length (0: never stops early)."),
        keepalive_ms: float = typer.Option(0.0, "--keepalive-ms", help="SSE keep-alive comment interval."),
        fault: list[str] = typer.Option(
            [],
            "--fault",
            help=f"KIND[:RATE], KIND in {'|'.join(FAULT_KINDS)}; repeated, each counts the requests earlier ones spared.",
        ),
        context: int | None = typer.Option(
            None,
            "--context",
            help="Context length (default 32768; --emulate: planned); longer requests get HTTP 400.",
        ),
        slots: int = typer.Option(
            0, "--slots", help="Answers generated at once; the rest queue in arrival order (0: no limit)."
        ),
        json_out: bool = typer.Option(False, "--json", help="Print the listening address as JSON."),
        emulate: bool = typer.Option(
            False,
            "--emulate",
            help="Time every answer by an emulated engine (as `servelab predict`) in real time.",
        ),
        plan_file: Path | None = typer.Option(
            None,
            "--plan",
            help="With --emulate: a saved plan (`servelab plan … --save FILE`); its first fitting entry.",
        ),
        gpu: str | None = typer.Option(None, "--gpu", help="With --emulate: GPU from the catalog."),
        engine: str | None = typer.Option(None, "--engine", help="With --emulate: vllm, sglang or llamacpp."),
        quant: str | None = typer.Option(None, "--quant", help="With --emulate: weight format."),
        kv_dtype: str | None = typer.Option(None, "--kv-dtype", help="With --emulate: KV cache dtype."),
        parallel: int = typer.Option(
            1, "--parallel", help="With --emulate: sequences to plan for (llama.cpp -np)."
        ),
        gpus: int = typer.Option(1, "--gpus", help="With --emulate: GPUs for tensor parallelism."),
        interconnect: str | None = typer.Option(
            None, "--interconnect", help="With --emulate: the GPUs' link."
        ),
    ) -> None:
        """Serve an OpenAI-compatible API whose timing, chunking, usage and faults are known exactly."""
        emulated = None
        if emulate:
            from servelab.cli.planning import PlanningInputs
            from servelab.cli.predict import emulated_target

            _check_emulated_faults(fault)
            asked = PlanningInputs(
                model=emulate_model,
                engine=engine,
                quant=quant,
                context=context,
                kv_dtype=kv_dtype,
                parallel=parallel,
                gpus=gpus,
                interconnect=interconnect,
                gpu=gpu,
            )
            emulated, planned_model = emulated_target(plan_file, asked)
            model, context = model or planned_model, emulated.context
        elif emulate_model is not None or plan_file is not None:
            raise ConfigError("MODEL and --plan describe an engine to emulate; add --emulate")
        config = SimConfig(
            host=host,
            port=port,
            model=model or "sim-model",
            ttft_ms=ttft_ms,
            itl_ms=itl_ms,
            tokens_per_chunk=tokens_per_chunk,
            max_tokens=max_tokens,
            role_chunk=role_chunk,
            usage=usage,
            honour_ignore_eos=ignore_eos,
            eos_after=eos_after or None,
            keepalive_ms=keepalive_ms or None,
            faults=tuple(parse_fault(f) for f in fault),
            context=context or 32768,
            slots=slots or None,
        )
        try:
            _run_loop(_serve(config, json_out, emulated))
        except KeyboardInterrupt:
            return


def _run_loop(coro) -> None:
    """uvloop when available: the sim must answer bursts of connections without falling behind."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(coro)
        return
    uvloop.run(coro)


def _check_emulated_faults(faults: list[str]) -> None:
    """The emulated engine writes every token itself: the faults that act mid-stream have no place there."""
    mid = [f for f in faults if parse_fault(f).kind in MID_STREAM_FAULTS]
    if mid:
        raise ConfigError(
            f"--fault {mid[0]} acts mid-stream, which --emulate leaves to the engine; use refuse, 500 or 429"
        )


async def _serve(config: SimConfig, json_out: bool, emulated=None) -> None:
    from servelab.sim.server import SimServer  # aiohttp: only when the server really starts

    async with SimServer(config, emulated) as url:
        line = f'{{"url": "{url}"}}' if json_out else f"servelab sim listening on {url}"
        print(line, flush=True)
        if emulated is None:
            timing = f"ttft {config.ttft_ms} ms, itl {config.itl_ms} ms"
        else:
            rates = emulated.roofline.rates
            timing = (
                f"emulating {emulated.engine} (effective figures: {rates.source}), context {config.context}"
            )
        print(f"model {inert_line(config.model)}: {timing}", file=sys.stderr)
        await asyncio.Event().wait()
