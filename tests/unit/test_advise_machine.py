"""advise/machine.py: models ranked by their best configuration; a model that does not fit, one that misses the
SLO everywhere and one that cannot be read each keep a row with the reason, after the ranked ones."""

from __future__ import annotations

from servelab.advise.goal import Prices, parse_bounds
from servelab.advise.judge import Demand, Setting
from servelab.advise.machine import Offered, machine_advice
from servelab.bench.config import BenchConfig
from servelab.bench.workloads import WorkloadSpec
from servelab.hardware.gpus import card_for
from servelab.model.catalog import catalog_model


def test_rows_rank_what_delivers_and_say_why_the_rest_does_not() -> None:
    config = BenchConfig(targets=("advise",), concurrency=(1,), workload=WorkloadSpec("short"), seed=0)
    small, mid, huge = (
        catalog_model(i) for i in ("meta-llama/Llama-3.2-1B", "Qwen/Qwen3-8B", "deepseek-ai/DeepSeek-V3")
    )
    setting = Setting(
        model=small,
        gpu=card_for("rtx4090"),
        gpus=1,
        bounds=parse_bounds("tpot_p99_ms=40"),
        demand=Demand(users=2),
        prices=Prices(),
        config=config,
    )
    models = [
        Offered("broken.gguf", "llama.cpp", None, "/x/broken.gguf", "GGUF header: truncated"),
        Offered(huge.name, "catalog", huge),
        Offered(mid.name, "catalog", mid),
        Offered(small.name, "catalog", small),
    ]
    seen: list[tuple[int, int]] = []
    rows = machine_advice(
        models,
        setting,
        context=1024,
        engines=("vllm",),
        progress=lambda done, total, name: seen.append((done, total)),
    )
    assert [r.model.name for r in rows] == [small.name, mid.name, "broken.gguf", huge.name]
    first, second = rows[0], rows[1]
    assert first.best is not None and second.best is not None
    assert first.best.per_gpu_tok_s > second.best.per_gpu_tok_s  # the 1B model delivers more here
    assert first.single_tpot_ms is not None and first.single_tpot_ms < second.single_tpot_ms  # type: ignore[operator]
    assert first.to_json()["best"]["engine"] == "vllm" and first.to_json()["context"] == 1024
    assert rows[2].reason == "cannot be read: GGUF header: truncated" and rows[2].to_json()["reason"]
    assert rows[3].reason.startswith("does not fit (") and rows[3].best is None
    assert seen[0] == (0, 4) and seen[-1] == (4, 4)
