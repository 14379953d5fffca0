"""Planner versus a real llama-server: every buffer predicted beside the one its log reports (-lv 4).

    python benchmarks/plan_vs_llamacpp.py [--threads 1]

Makes the dense, hybrid and wide-state hybrid models in a temporary folder, launches llama-server for each
setting (-c / -np / --kv-unified / cache type), and prints MiB predicted / logged and the error, per buffer.
Needs a llama-server (`servelab engine install llama.cpp`).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from servelab.engines.llamacpp.launch import start_llama_server
from servelab.engines.llamacpp.logparse import compare_buffers, parse_server_log
from servelab.engines.llamacpp.memory import llamacpp_memory
from servelab.model import load_model
from servelab.modelmake import make_model, shape_for

MODELS = {
    "dense": {},
    "hybrid": {},
    "wide-hybrid": {"ssm_state": 64, "ssm_value_heads": 8},
}
SETTINGS = [
    (2048, 1, False, "f16"),
    (8192, 4, False, "f16"),
    (8192, 4, True, "f16"),
    (4096, 2, False, "q8_0"),
    (1000, 3, False, "f16"),
]
MIB = 2**20


def make(folder: Path, name: str, overrides: dict) -> Path:
    kind = "dense" if name == "dense" else "hybrid"
    return make_model(kind, folder / f"{name}.gguf", shape_for(kind, **overrides)).path


def measure(path: Path, setting: tuple, threads: int, log: Path):
    ctx, slots, unified, cache = setting
    args = ["-t", str(threads), "-c", str(ctx), "-np", str(slots), "-ctk", cache, "-ctv", cache, "-lv", "4"]
    with start_llama_server(path, args + (["--kv-unified"] if unified else []), log_path=log):
        pass
    logged = parse_server_log(log.read_text()).main
    predicted = llamacpp_memory(
        load_model(str(path)),
        n_ctx=ctx,
        n_parallel=slots,
        kv_unified=unified,
        cache_type_k=cache,
        cache_type_v=cache,
        n_gpu_layers=0,
    )
    return compare_buffers(predicted, logged)


def cell(check) -> str:
    rel = check.relative_error
    err = f"{rel:+.1%}" if rel is not None else "-"
    return f"{check.predicted_bytes / MIB:.3f} / {check.logged_bytes / MIB:.2f} ({err})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    threads = parser.parse_args().threads
    table = Table(
        title="llama.cpp buffers: planner MiB / logged MiB (error)",
        caption="llama-server prints MiB with 2 decimals (+-0.005 MiB), which dominates the error of tiny buffers",
    )
    for column in ("model", "setting", "weights", "KV", "state", "compute"):
        table.add_column(column)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, overrides in MODELS.items():
            path = make(folder, name, overrides)
            for i, setting in enumerate(SETTINGS):
                ctx, slots, unified, cache = setting
                label = f"-c {ctx} -np {slots}{' -kvu' if unified else ''} {cache}"
                checks = measure(path, setting, threads, folder / f"{name}-{i}.log")
                table.add_row(name, label, *(cell(c) for c in checks))
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
