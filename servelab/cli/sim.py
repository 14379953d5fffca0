"""`servelab sim`: run the reference OpenAI-compatible server with exactly known timing and faults."""

from __future__ import annotations

import asyncio
import sys

import typer

from servelab.inert import inert_line
from servelab.sim.config import FAULT_KINDS, USAGE_MODES, SimConfig, parse_fault


def register(app: typer.Typer) -> None:
    """Add this command to the app."""

    @app.command("sim")
    def sim(
        port: int = typer.Option(..., "--port", help="Port to listen on (0: any free port, printed)."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback unless asked)."),
        model: str = typer.Option("sim-model", "--model", help="Model name served at /v1/models."),
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
        context: int = typer.Option(32768, "--context", help="Context length; longer requests get HTTP 400."),
        slots: int = typer.Option(
            0, "--slots", help="Answers generated at once; the rest queue in arrival order (0: no limit)."
        ),
        json_out: bool = typer.Option(False, "--json", help="Print the listening address as JSON."),
    ) -> None:
        """Serve an OpenAI-compatible API whose timing, chunking, usage and faults are known exactly."""
        config = SimConfig(
            host=host, port=port, model=model, ttft_ms=ttft_ms, itl_ms=itl_ms, tokens_per_chunk=tokens_per_chunk,
            max_tokens=max_tokens, role_chunk=role_chunk, usage=usage, honour_ignore_eos=ignore_eos,
            eos_after=eos_after or None, keepalive_ms=keepalive_ms or None,
            faults=tuple(parse_fault(f) for f in fault), context=context, slots=slots or None,
        )  # fmt: skip
        try:
            _run_loop(_serve(config, json_out))
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


async def _serve(config: SimConfig, json_out: bool) -> None:
    from servelab.sim.server import SimServer  # aiohttp: only when the server really starts

    async with SimServer(config) as url:
        line = f'{{"url": "{url}"}}' if json_out else f"servelab sim listening on {url}"
        print(line, flush=True)
        print(
            f"model {inert_line(config.model)}: ttft {config.ttft_ms} ms, itl {config.itl_ms} ms",
            file=sys.stderr,
        )
        await asyncio.Event().wait()
