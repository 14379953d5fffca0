"""The serving corpus beyond H200: GDDR and AMD cards, sglang off H200, dense models on A100/H100, many sources.

Lower bounds only: a new source may add to these counts, a removed or broken one makes them fail.
"""

from __future__ import annotations

from collections import Counter

from servelab.hardware.gpus import load_gpus
from servelab.predict.corpus import Measurement, gpu_class, load_corpus


def _used_serving_rows() -> tuple[Measurement, ...]:
    return tuple(row for row in load_corpus() if row.engine in ("vllm", "sglang") and not row.excluded)


def _figures(rows: tuple[Measurement, ...] | list[Measurement]) -> int:
    return sum(len(row.figures) for row in rows)


def test_serving_rows_reach_gddr_amd_and_blackwell_workstation_cards() -> None:
    rows = _used_serving_rows()
    per_gpu: Counter[str] = Counter()
    for row in rows:
        if row.gpu:
            per_gpu[row.gpu] += len(row.figures)
    for gpu in (
        "l4",
        "rtx3090",
        "rtx-a6000",
        "rtx6000-ada",
        "a100-40g",
        "rtx4090",
        "rtx-pro-6000",
        "rtx-pro-6000-server",
        "l40s",
        "rtx5090",
        "mi300x",
        "mi355x",
        "a100-80g",
        "h100-sxm",
    ):
        assert per_gpu[gpu] >= 15, f"{gpu}: {per_gpu[gpu]} figures"
    classes = {gpu.name: gpu_class(gpu) for gpu in load_gpus() if not gpu.is_cpu}
    per_class: Counter[str] = Counter()
    for gpu, count in per_gpu.items():
        per_class[classes[gpu]] += count
    assert per_class["gddr"] >= 1700 and per_class["amd"] >= 150 and per_class["hbm"] >= 3000


def test_sglang_rows_span_hbm_gddr_and_amd_cards() -> None:
    gpus = {row.gpu for row in _used_serving_rows() if row.engine == "sglang" and row.gpu}
    assert {"h200", "h100-sxm", "a100-80g", "mi300x", "rtx-pro-6000-server"} <= gpus
    assert len(gpus) >= 8


def test_dense_models_are_measured_on_a100_and_h100_for_both_engines() -> None:
    dense = [
        row
        for row in _used_serving_rows()
        if row.model_kind == "dense" and row.gpu in ("a100-80g", "h100-sxm")
    ]
    assert _figures(dense) >= 1200
    assert {row.engine for row in dense} == {"vllm", "sglang"}
    assert {1, 2, 4, 8} <= {row.workload.concurrency for row in dense}


def test_many_independent_sources_carry_the_serving_figures() -> None:
    rows = _used_serving_rows()
    per_source = Counter(row.source.id for row in rows)
    assert len(per_source) >= 55
    # No single source holds more than a quarter of the serving figures
    figures: Counter[str] = Counter()
    for row in rows:
        figures[row.source.id] += len(row.figures)
    assert max(figures.values()) <= _figures(rows) // 4
