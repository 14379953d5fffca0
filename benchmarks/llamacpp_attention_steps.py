"""llama-server's decode time per token against the context it attends, on the CPU, one sequence.

Why: the roofline puts a pass's attention FLOPs inside max(memory, compute) with the weights' read, which holds on
a GPU; ggml's CPU backend runs the attention (flash-attention or the KQ / softmax / KQV ops) after the matmuls, on
the KV cache, at a rate of its own, so the decode step grows with the context by more than its KV bytes explain.
This measures that growth: the slope of ms per decoded token over the context is the attention's time per context
token, and 4 x attention width FLOPs per context token (servelab/predict/roofline.py) turn it into the rate the
emulator prices llama.cpp's CPU attention at (engines/llamacpp/engine.py).

A self-made Llama GGUF (the shape of benchmarks/predict_vs_measured.py: hidden 1024, 8 layers, 16 heads of 64, f16)
is served by servelab's llama-server build pinned to CPU 0 with one thread; the client (CPU 1) sends one completion
at a time (a prompt of N words, 64 tokens, ignore_eos, no prompt cache) and reads `timings`.

    python benchmarks/llamacpp_attention_steps.py [--words 20,40,80,120,160] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from llamacpp_batch_steps import completion_timings  # benchmarks/: the same request, timings read alike

from servelab.engines.llamacpp.launch import start_llama_server
from servelab.modelmake import make_model
from servelab.modelmake.shapes import shape_for

SHAPE = dict(hidden=1024, layers=8, heads=16, kv_heads=8, head_dim=64, ffn=2816)
SERVER_CPU, CLIENT_CPU = 0, 1
OUTPUT = 64


def one(url: str, words: int, seed: int) -> tuple[float, int]:
    t = completion_timings(url, " ".join(f"w{seed}x{k}" for k in range(words)), OUTPUT)
    return t["predicted_ms"] / t["predicted_n"], int(t["prompt_n"])


def slope(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y over x."""
    n = len(points)
    mx, my = sum(p[0] for p in points) / n, sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    b = sum((p[0] - mx) * (p[1] - my) for p in points) / sxx
    return my - b * mx, b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--words", default="20,40,80,120,160")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(n) for n in args.words.split(",")]
    model = Path(tempfile.mkdtemp(prefix="llamacpp-attn-")) / "m.gguf"
    make_model("dense", model, shape_for("dense", **SHAPE, weight_type="f16"))
    os.sched_setaffinity(0, {SERVER_CPU})  # the server inherits CPU 0
    server = start_llama_server(model, ["-t", "1", "-np", "1", "-c", "8192"])
    os.sched_setaffinity(0, {CLIENT_CPU})
    rows: dict[int, list[tuple[float, int]]] = {n: [] for n in sizes}
    try:
        one(server.url, sizes[0], -1)  # warm-up: the first request after start is slower
        for r in range(args.repeats):
            for n in sizes:
                rows[n].append(one(server.url, n, r))
    finally:
        server.stop()
    width = SHAPE["heads"] * SHAPE["head_dim"] * SHAPE["layers"]  # query heads x head dim over full layers
    print(f"model: {SHAPE}, f16; llama-server -t 1 -np 1 on CPU {SERVER_CPU}, client CPU {CLIENT_CPU}")
    print(f"{'prompt tokens':>13} {'mean context':>12} {'ms per decoded token (range)':>30}")
    points = []
    for n in sizes:
        prompt = rows[n][0][1]
        context = prompt + OUTPUT / 2
        ms = [m for m, _ in rows[n]]
        points += [(context, m) for m in ms]
        print(
            f"{prompt:>13} {context:>12.0f} {f'{min(ms):.2f}-{max(ms):.2f} (median {statistics.median(ms):.2f})':>30}"
        )
    base, per_token = slope(points)
    rate = 4 * width / (per_token * 1e-3)
    print(
        f"fit: {base:.2f} ms + {per_token * 1e3:.2f} us per context token -> attention at {rate / 1e9:.2f} GFLOP/s"
        f" (4 x {width} FLOPs per context token per decoded token)"
    )


if __name__ == "__main__":
    main()
