"""The whole corpus covers what issue 22 asks of it: >= 300 figures over >= 15 catalog GPU types in every GPU
class (GDDR, HBM, Apple, AMD), dense, MoE and hybrid models, c=1 to c>=256, TP 1 to 8, all three engines."""

from __future__ import annotations

from pathlib import Path

from servelab.predict.corpus import load_corpus
from servelab.predict.corpus.counts import coverage, render_markdown


def test_the_corpus_covers_engines_gpu_classes_kinds_concurrency_and_tp() -> None:
    seen = coverage(load_corpus())
    catalog_gpus = [name for name in seen.by_gpu if not name.startswith("(")]
    assert seen.figures >= 300
    assert len(catalog_gpus) >= 15
    assert {"gddr", "hbm", "apple", "amd"} <= set(seen.by_gpu_class)
    assert {"llama.cpp", "vllm", "sglang"} <= set(seen.by_engine)
    assert {"dense", "moe", "hybrid"} <= set(seen.by_model_kind)
    assert seen.concurrency is not None and seen.concurrency[0] == 1 and seen.concurrency[1] >= 256
    assert seen.tp == (1, 8)


def test_excluded_rows_say_why_and_are_counted_apart() -> None:
    rows = load_corpus()
    excluded = [row for row in rows if row.excluded]
    assert all(len(row.excluded) > 10 for row in excluded)
    assert coverage(rows).excluded_figures == sum(len(row.figures) for row in excluded)


def test_docs_hold_the_generated_coverage_tables() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "corpus.md").read_text(encoding="utf-8")
    generated = docs.split("<!-- generated: corpus counts -->\n", 1)[1].split("<!-- end generated -->", 1)[0]
    assert generated == render_markdown(load_corpus()), (
        "regenerate: python -m servelab.predict.corpus.counts, paste between docs/corpus.md's markers"
    )
