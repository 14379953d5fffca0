"""llama-server's decode time per step against the number of sequences decoding together, on the CPU.

Why: ggml's CPU backend multiplies a one-token pass with vector dot products and a pass of two or more tokens with
llamafile's tinyBLAS (ggml-cpu/llamafile/sgemm.cpp, `llamafile_sgemm`: n < 2 returns false), so a step of two
sequences costs well over twice a step of one. The emulator prices the two paths apart
(servelab/predict/roofline.py, `AchievedRates.batched_bandwidth_bytes_s`); this prints what the server does.

A self-made Llama GGUF (the same shape as benchmarks/predict_vs_measured.py: hidden 1024, 8 layers, f16, ~190 MB,
larger than the CPU's caches) is served by servelab's llama-server build pinned to CPU 0 with one thread; the
client (CPU 1) sends N completions at once (16 prompt words, 96 tokens, ignore_eos, no prompt cache) and reads
each answer's `timings.predicted_ms / predicted_n`: the time per decode step while N sequences decode.

    python benchmarks/llamacpp_batch_steps.py [--sizes 1,2,3,4,6,8,12,16] [--repeats 2] [--weights f16]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import urllib.request
from pathlib import Path

from servelab.engines.llamacpp.launch import start_llama_server
from servelab.modelmake import make_model
from servelab.modelmake.shapes import shape_for

SHAPE = dict(hidden=1024, layers=8, heads=16, kv_heads=8, head_dim=64, ffn=2816)
SERVER_CPU, CLIENT_CPU = 0, 1


def completion_timings(url: str, prompt: str, max_tokens: int) -> dict:
    """llama-server's `timings` for one non-streamed completion (ignore_eos, no prompt cache)."""
    body = {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": False,
        "cache_prompt": False,
    }
    request = urllib.request.Request(
        url + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())["timings"]


def one(url: str, i: int, out: list[tuple[float, float, int]]) -> None:
    t = completion_timings(url, f"w{i} " * 16, 96)
    out.append((t["predicted_ms"] / t["predicted_n"], t["prompt_ms"], t["prompt_n"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,2,3,4,6,8,12,16")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--weights", default="f16", help="GGUF weight type of the made model")
    args = ap.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    model = Path(tempfile.mkdtemp(prefix="llamacpp-batch-")) / "m.gguf"
    make_model("dense", model, shape_for("dense", **SHAPE, weight_type=args.weights))
    os.sched_setaffinity(0, {SERVER_CPU})  # the server inherits CPU 0
    server = start_llama_server(model, ["-t", "1", "-np", str(max(sizes)), "-c", str(max(sizes) * 512)])
    os.sched_setaffinity(0, {CLIENT_CPU})
    rows: dict[int, list[float]] = {n: [] for n in sizes}
    try:
        for _ in range(args.repeats):
            for n in sizes:
                out: list[tuple[float, float, int]] = []
                threads = [threading.Thread(target=one, args=(server.url, i, out)) for i in range(n)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                rows[n].append(statistics.median(o[0] for o in out))
    finally:
        server.stop()
    print(f"model: {SHAPE}, {args.weights}; llama-server -t 1 on CPU {SERVER_CPU}, client CPU {CLIENT_CPU}")
    print(f"{'N':>3} {'ms per step (range over repeats)':>34} {'ms per token':>13} {'x one sequence':>15}")
    one_seq = min(rows[sizes[0]]) if sizes[0] == 1 else None
    for n in sizes:
        lo, hi = min(rows[n]), max(rows[n])
        ratio = f"{lo / one_seq:.2f}" if one_seq else "-"
        print(f"{n:>3} {f'{lo:.2f}-{hi:.2f}':>34} {lo / n:>13.2f} {ratio:>15}")


if __name__ == "__main__":
    main()
