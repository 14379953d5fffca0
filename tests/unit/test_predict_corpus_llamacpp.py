"""The shipped llama.cpp corpus files: they load, every figure is in its verbatim lines, and they cover enough.

Each figure must appear in the lines it was read from exactly as the table prints it (a llama-bench
``t/s`` mean keeps its two decimals), so a figure typed by hand or rounded differently fails here.
"""

from __future__ import annotations

import re
from collections import Counter

from servelab.hardware.gpus import load_gpus
from servelab.predict.corpus import Measurement, gpu_class, load_corpus


def _llamacpp() -> tuple[Measurement, ...]:
    return tuple(row for row in load_corpus() if row.source.id.startswith("llamacpp-"))


ROWS = _llamacpp()
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def _printed(text: str) -> set[float]:
    return {float(n.replace(",", "")) for n in NUMBER.findall(text)}


def test_every_llamacpp_file_is_llamacpp_and_loads() -> None:
    assert ROWS
    assert {row.engine for row in ROWS} == {"llama.cpp"}
    assert all(row.source.client in ("llama-bench", "llama-batched-bench") for row in ROWS)


def test_each_figure_is_printed_in_its_verbatim_lines() -> None:
    missing = [
        f"{row.label}: {name} {value}"
        for row in ROWS
        for name, value in row.figures.items()
        if value not in _printed("\n".join(row.verbatim))
    ]
    assert not missing, f"figures not in their verbatim lines: {missing[:20]}"


def test_each_row_says_what_it_ran() -> None:
    """One test over every row (a test per row made the corpus ~2,800 tests); the first row that fails is named."""
    for row in ROWS:
        try:
            _says_what_it_ran(row)
        except AssertionError as exc:
            raise AssertionError(f"{row.label} does not say what it ran") from exc


def _says_what_it_ran(row: Measurement) -> None:
    w = row.workload
    assert row.tp == 1 and row.gpu_count >= 1
    assert row.active_params_b <= row.params_b
    if row.source.client == "llama-bench":
        # one test per row: a ppN row has no output, a tgN row no prompt, and its figure matches
        assert (w.prompt_tokens == 0) != (w.output_tokens == 0)
        assert set(row.figures) == {"pp_tok_s" if w.prompt_tokens else "tg_tok_s"}
        test = f"pp{w.prompt_tokens}" if w.prompt_tokens else f"tg{w.output_tokens}"
        # a llama-bench table names the test (ppN / tgN, "@ dN" for a depth); a table of its fields prints the numbers
        lines = re.sub(r"\s+", "", "".join(row.verbatim))
        printed = _printed(" ".join(row.verbatim))
        assert test in lines or (w.prompt_tokens or w.output_tokens) in printed
        assert w.depth == 0 or f"@d{w.depth}" in lines or w.depth in printed
    else:
        assert w.batch and w.concurrency == w.batch


def test_llamacpp_counts() -> None:
    """Lower bounds at what the shipped files hold, so a file dropped or emptied fails here."""
    catalog = {gpu.name: gpu for gpu in load_gpus()}
    figures = sum(len(row.figures) for row in ROWS)
    gpus = {row.gpu for row in ROWS if row.gpu is not None}
    classes = Counter(gpu_class(catalog[row.gpu]) for row in ROWS if row.gpu is not None and not row.excluded)
    kinds = Counter(row.model_kind for row in ROWS)
    backends = Counter(row.backend for row in ROWS)
    assert figures >= 1529
    assert len(gpus) >= 15
    assert set(classes) == {"gddr", "hbm", "apple", "amd"}
    assert kinds["dense"] and kinds["moe"] and kinds["hybrid"]
    assert {"cuda", "metal", "rocm", "vulkan"} <= set(backends)
    assert max(row.workload.depth for row in ROWS) >= 32768
    assert max(row.gpu_count for row in ROWS) == 8
    assert max(row.workload.batch or 1 for row in ROWS) >= 32
