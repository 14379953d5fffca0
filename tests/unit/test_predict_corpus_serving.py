"""The shipped vLLM and sglang corpus files: they load, every figure is in its row's verbatim lines, and the
serving part of the corpus spans the GPUs, model kinds, concurrencies and parallelism it claims."""

from __future__ import annotations

import re
from decimal import Decimal

from servelab.hardware.gpus import load_gpus
from servelab.predict.corpus import Measurement, gpu_class, load_corpus

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# A printed figure is milliseconds or tokens/s as shown, or seconds in a saved result JSON (x1000 -> ms)
_SCALES = (Decimal(1), Decimal(1000))


def _serving_rows() -> tuple[Measurement, ...]:
    return tuple(row for row in load_corpus() if row.engine in ("vllm", "sglang"))


def _printed(value: float, lines: tuple[str, ...]) -> bool:
    """True when a number in `lines`, at its printed precision and in ms or seconds, is `value`."""
    for text in (n for line in lines for n in _NUMBER.findall(line)):
        printed = Decimal(text)
        exponent = printed.as_tuple().exponent
        assert isinstance(exponent, int)
        half_step = Decimal(5) * Decimal(10) ** (exponent - 1)
        for scale in _SCALES:
            if abs(Decimal(repr(value)) - printed * scale) <= half_step * scale + Decimal("1e-6"):
                return True
    return False


def test_the_serving_files_load_with_rows_for_both_engines() -> None:
    rows = _serving_rows()
    assert {row.engine for row in rows} == {"vllm", "sglang"}
    prefixes = {row.source.id.split("-")[0] for row in rows}
    assert prefixes <= {"vllm", "sglang", "inferencemax", "mlperf"}


def test_every_figure_is_printed_in_its_rows_verbatim_lines() -> None:
    missing = [
        f"{row.label}: {name} {value}"
        for row in _serving_rows()
        for name, value in row.figures.items()
        if not _printed(value, row.verbatim)
    ]
    assert not missing, f"figures not in their verbatim lines: {missing[:20]}"


def test_the_serving_part_spans_gpus_kinds_concurrency_and_parallelism() -> None:
    rows = _serving_rows()
    classes = {gpu.name: gpu_class(gpu) for gpu in load_gpus() if not gpu.is_cpu}
    used = [row for row in rows if not row.excluded]
    per_engine = {
        engine: sum(len(row.figures) for row in used if row.engine == engine) for engine in ("vllm", "sglang")
    }
    assert sum(len(row.figures) for row in used) >= 1350
    assert per_engine["vllm"] >= 1150 and per_engine["sglang"] >= 190
    gpus = {row.gpu for row in used if row.gpu}
    assert len(gpus) >= 9
    assert {classes[g] for g in gpus} == {"hbm", "gddr", "amd"}
    assert {row.model_kind for row in used} == {"dense", "moe", "hybrid"}
    concurrencies = [row.workload.concurrency for row in used if row.workload.concurrency]
    assert min(concurrencies) == 1 and max(concurrencies) >= 4096
    assert {1, 4, 8} <= {row.tp for row in used}
    assert any(row.ep > 1 for row in used)
