"""`servelab model make KIND -o FILE.gguf` (or `--format hf -o DIR`): write a small random-weight model the
project makes itself, as a GGUF file or a Hugging Face directory."""

from __future__ import annotations

from pathlib import Path

import typer

from servelab.cli.output import print_json, stdout_console
from servelab.modelmake import HF_KINDS, KINDS, WEIGHT_TYPES, MadeModel, make_model, shape_for


def render(made: MadeModel) -> None:
    s = made.shape
    stdout_console().print(
        f"wrote {made.path}: {made.kind} ({made.architecture}), {s.layers} layers, hidden {s.hidden}, "
        f"{made.n_params / 1e6:.2f} M params, {made.weight_type}, {made.file_bytes / 2**20:.2f} MiB, "
        f"n_ctx_train {s.ctx_train}"
    )


def register(app: typer.Typer) -> None:
    """Add `servelab model make` to the app."""
    model_app = typer.Typer(
        help="Models the project makes itself (random weights, real tokenizer).", no_args_is_help=True
    )
    app.add_typer(model_app, name="model")

    @model_app.command("make")
    def make(
        kind: str = typer.Argument(
            ..., help=f"GGUF: {', '.join(KINDS)}; --format hf: {', '.join(HF_KINDS)}."
        ),
        output: Path = typer.Option(
            ..., "-o", "--output", help="Where to write the .gguf file (--format hf: a new directory)."
        ),
        fmt: str = typer.Option(
            "gguf", "--format", help="gguf (llama.cpp) or hf (config.json + safetensors, for vLLM)."
        ),
        layers: int | None = typer.Option(None, help="Number of layers."),
        hidden: int | None = typer.Option(None, help="Hidden size (embedding length)."),
        heads: int | None = typer.Option(None, help="Attention heads."),
        kv_heads: int | None = typer.Option(None, help="Key/value heads (GQA)."),
        head_dim: int | None = typer.Option(None, help="Attention head dimension."),
        ffn: int | None = typer.Option(None, help="Feed-forward size."),
        vocab: int | None = typer.Option(None, help="Vocabulary size (at least 259)."),
        ctx_train: int | None = typer.Option(
            None, help="n_ctx_train: the context the model claims it was trained on."
        ),
        weight_type: str | None = typer.Option(
            None, help=f"Matrix type: {', '.join(WEIGHT_TYPES)} (--format hf: bf16)."
        ),
        seed: int | None = typer.Option(None, help="Random seed (same seed, same file)."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Write a dense (llama), hybrid (qwen35), quantized (Q8_0) or draft model to FILE.gguf, or with
        --format hf a llama, qwen3-next or granite-hybrid model directory."""
        shape = shape_for(
            kind,
            fmt,
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            ffn=ffn,
            vocab=vocab,
            ctx_train=ctx_train,
            weight_type=weight_type,
            seed=seed,
        )
        made = make_model(kind, output, shape, fmt)
        print_json(made) if as_json else render(made)
