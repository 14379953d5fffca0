"""What the corpus covers: figures per engine, GPU class, GPU type, model kind, source; the concurrency and TP range.

A figure is one number a row carries (a row with TTFT, TPOT and output tok/s counts three). Rows kept out
of fitting (`excluded`) are counted apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from servelab.predict.corpus.load import gpu_classes
from servelab.predict.corpus.schema import Measurement


@dataclass(frozen=True, kw_only=True)
class Coverage:
    figures: int
    excluded_figures: int
    by_engine: dict[str, int]
    by_gpu_class: dict[str, int]
    by_gpu: dict[str, int]
    by_model_kind: dict[str, int]
    by_source: dict[str, int]
    concurrency: tuple[int, int] | None  # lowest and highest concurrency (llama-bench rows are 1)
    tp: tuple[int, int]


def coverage(rows: Iterable[Measurement]) -> Coverage:
    classes = gpu_classes()
    rows = tuple(rows)
    used = [row for row in rows if not row.excluded]
    excluded = sum(len(row.figures) for row in rows if row.excluded)

    def tally(key: Callable[[Measurement], str]) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for row in used:
            counts[key(row)] += len(row.figures)
        return dict(counts.most_common())

    levels = [row.workload.concurrency for row in used if row.workload.concurrency is not None]
    tps = [row.tp for row in used] or [1]
    return Coverage(
        figures=sum(len(row.figures) for row in used),
        excluded_figures=excluded,
        by_engine=tally(lambda row: row.engine),
        by_gpu_class=tally(lambda row: classes.get(row.gpu or "", "not in catalog")),
        by_gpu=tally(lambda row: row.gpu or f"({row.gpu_label})"),
        by_model_kind=tally(lambda row: row.model_kind),
        by_source=tally(lambda row: row.source.id),
        concurrency=(min(levels), max(levels)) if levels else None,
        tp=(min(tps), max(tps)),
    )


def _table(title: str, counts: dict[str, int]) -> list[str]:
    return [f"| {title} | figures |", "|---|---|", *(f"| {k} | {v:,} |" for k, v in counts.items()), ""]


def render_markdown(rows: Iterable[Measurement]) -> str:
    """docs/corpus.md's generated part: the coverage tables and one line per source with its address."""
    rows = tuple(rows)
    seen = coverage(rows)
    low, high = seen.concurrency or (0, 0)
    lines = [
        f"{seen.figures:,} figures used ({seen.excluded_figures:,} more kept out of fitting, each row saying why)"
        f" from {len(seen.by_source)} sources; concurrency {low}-{high}, TP {seen.tp[0]}-{seen.tp[1]}.",
        "",
        *_table("engine", seen.by_engine),
        *_table("GPU class", seen.by_gpu_class),
        *_table("GPU", seen.by_gpu),
        *_table("model kind", seen.by_model_kind),
        "| source | client | published | figures | address |",
        "|---|---|---|---|---|",
    ]
    sources = {row.source.id: row.source for row in rows}
    for source_id, figures in sorted(seen.by_source.items()):
        source = sources[source_id]
        lines.append(f"| {source_id} | {source.client} | {source.published} | {figures:,} | {source.url} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from servelab.predict.corpus.load import load_corpus

    print(render_markdown(load_corpus()), end="")
