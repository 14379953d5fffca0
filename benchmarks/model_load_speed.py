"""How fast model descriptions load, and what the catalog's weights weigh per quant, on this machine.

    python benchmarks/model_load_speed.py

Prints two tables: (1) milliseconds to build a ModelSpec from the catalog, from a GGUF header (the project's
own qwen35 hybrid model, plus a file with a 150,000-token vocabulary) and from safetensors headers
(8 shards × 500 tensors), with the peak Python allocation while reading; (2) weight GB of every catalog
model in bf16, fp8, awq (w4g128) and Q4_K_M, from parameter counts.
"""

from __future__ import annotations

import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from servelab.model import load_model
from servelab.model.catalog import catalog_ids
from servelab.modelmake import make_model
from tests.unit.model_files import write_gguf, write_safetensors


def measured(fn, repeat: int = 5) -> tuple[float, float]:
    """Median milliseconds over `repeat` calls, and the peak MiB Python allocates in one more (traced) call."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return sorted(times)[len(times) // 2], peak


def big_vocab_gguf(path: Path) -> Path:
    kvs = {
        "general.architecture": "llama",
        "llama.block_count": 32,
        "llama.embedding_length": 4096,
        "llama.context_length": 8192,
        "llama.attention.head_count": 32,
        "llama.attention.head_count_kv": 8,
        "tokenizer.ggml.tokens": [f"tok{i}" for i in range(150_000)],
    }
    tensors = [(f"blk.{i}.attn_q.weight", (4096, 4096), 12, 4096 * 4096 // 256 * 144) for i in range(32)]
    write_gguf(path, kvs, tensors)
    return path


def sharded_dir(root: Path) -> Path:
    (root / "config.json").write_text(
        '{"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,'
        ' "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}'
    )
    for shard in range(8):
        write_safetensors(
            root / f"model-{shard}.safetensors",
            {f"model.layers.{shard}.t{i}.weight": ("BF16", (8, 8)) for i in range(500)},
        )
    return root


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        hybrid = make_model("hybrid", root / "hybrid.gguf").path
        vocab = big_vocab_gguf(root / "vocab.gguf")
        (root / "st").mkdir()
        shards = sharded_dir(root / "st")
        from servelab.model.gguf_header import read_gguf_header

        rows = [
            ("catalog Qwen/Qwen3.5-27B", lambda: load_model("Qwen/Qwen3.5-27B")),
            ("catalog DeepSeek-V3 + Q4_K_M", lambda: load_model("deepseek-v3", quant="Q4_K_M")),
            ("GGUF qwen35 hybrid (109 tensors)", lambda: load_model(str(hybrid))),
            ("GGUF header, 150k-token vocab", lambda: read_gguf_header(vocab)),
            ("safetensors 8 shards x 500 tensors", lambda: load_model(str(shards))),
        ]
        print(f"{'what':38s} {'median ms':>10s} {'peak MiB':>9s}")
        for name, fn in rows:
            ms, peak = measured(fn)
            print(f"{name:38s} {ms:10.1f} {peak:9.1f}")
    print()
    quants = ("bf16", "fp8", "awq", "Q4_K_M")
    print(f"{'model':45s} {'params B':>9s} " + " ".join(f"{q + ' GB':>10s}" for q in quants))
    for model_id in catalog_ids():
        specs = [load_model(model_id, quant=q) for q in quants]
        sizes = " ".join(f"{s.weight_bytes / 1e9:10.2f}" for s in specs)
        print(f"{model_id:45s} {specs[0].total_params / 1e9:9.2f} {sizes}")


if __name__ == "__main__":
    main()
