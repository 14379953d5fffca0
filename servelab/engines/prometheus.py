"""Prometheus text exposition (an engine's /metrics), read with prometheus_client's parser.

The text comes from a server, so it is hostile input: when the whole text does not parse, each line is parsed
on its own and the lines that fail are skipped, so one odd line never hides the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


@dataclass(frozen=True)
class ServerMetric:
    """One series an engine's bench extras follow per level: a counter's growth over the level (before/after
    snapshots) or a gauge sampled while it runs; label sets are summed (``average``: averaged, for ratios)."""

    key: str  # servelab's name for it, e.g. "prompt_tokens"
    name: str  # the exposition's sample name, e.g. "vllm:prompt_tokens_total"
    kind: Literal["counter", "gauge"]
    average: bool = False


def server_values(metrics_text: str, metrics: tuple[ServerMetric, ...]) -> dict[str, float]:
    """Each metric's value in one exposition (summed or averaged over its label sets); absent ones left out."""
    parsed = samples(metrics_text)
    values: dict[str, float] = {}
    for metric in metrics:
        found = [s.value for s in parsed if s.name == metric.name]
        if found:
            values[metric.key] = sum(found) / len(found) if metric.average else sum(found)
    return values


def samples(metrics_text: str) -> list[Sample]:
    """Every sample in the exposition, in order (names as written, ``_total`` and ``_bucket`` included)."""
    try:
        return _parse(metrics_text)
    except ValueError:
        return [sample for line in metrics_text.splitlines() for sample in _line_samples(line)]


def metric_sums(metrics_text: str, names: tuple[str, ...]) -> dict[str, float]:
    """Sum of each named series over its label sets; names without a sample are absent."""
    sums: dict[str, float] = {}
    for sample in samples(metrics_text):
        if sample.name in names:
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    return sums


def metric_counts(metrics_text: str, name: str) -> int:
    """How many series of ``name`` the exposition holds (to average gauges)."""
    return sum(1 for sample in samples(metrics_text) if sample.name == name)


def first_labels(metrics_text: str, name: str) -> dict[str, str]:
    """The labels of the first ``name`` series (an info gauge's payload), or {} when there is none."""
    return next((dict(sample.labels) for sample in samples(metrics_text) if sample.name == name), {})


def _parse(text: str) -> list[Sample]:
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def _line_samples(line: str) -> list[Sample]:
    try:
        return _parse(line + "\n")
    except ValueError:
        return []
