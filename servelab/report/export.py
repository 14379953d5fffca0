"""`servelab export`: a stored run as JSON close to vLLM's ``--save-result`` (per target and level), or CSV.

The JSON schema is documented in docs/results-schema.md; every level object carries vLLM's field names
(duration, completed, ttfts, p99_ttft_ms, …) so tools that read vLLM results can read each level.
Figures are the bench's stored level statistics (`LevelStats`); the per-request lists are the stored
records. CSV has one row per request.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import time

from servelab.errors import ConfigError
from servelab.report.levels import LevelFigures, all_level_figures, request_figures
from servelab.results.level_key import Level
from servelab.results.records import RequestRecord
from servelab.results.stats import Distribution
from servelab.store import StoredRun

SCHEMA = "servelab.export/1"
PERCENTILES = (50, 90, 95, 99)  # the percentiles vLLM's results carry


def _distribution_fields(name: str, dist: Distribution) -> dict:
    fields = {f"mean_{name}_ms": dist.mean, f"median_{name}_ms": dist.median, f"std_{name}_ms": dist.std}
    fields.update({f"p{q}_{name}_ms": dist.percentile(q) for q in PERCENTILES})
    return fields


def level_validity(run: StoredRun, target_index: int, level: Level) -> tuple[bool, str]:
    """Whether the bench marked every repeat of a level valid, and why not."""
    reasons = [
        lv.summary.invalid_reason or "marked invalid"
        for lv in run.levels
        if lv.target_index == target_index and lv.level == level and not lv.summary.valid
    ]
    return not reasons, "; ".join(reasons)


def level_json(run: StoredRun, lv: LevelFigures) -> dict:
    valid, why = level_validity(run, lv.target_index, lv.level)
    errors = [
        r.error
        for r in run.requests
        if r.target_index == lv.target_index and r.level == lv.label and r.phase == "measure" and r.error
    ]
    s = lv.stats
    out = {
        "level": lv.label,
        "max_concurrency": lv.concurrency,
        "request_rate": lv.rate_rps,
        "valid": valid,
        "invalid_reason": why or None,
        "duration": s.duration_s,
        "completed": s.completed,
        "failed": s.errors,
        "errors_by_kind": s.errors_by_kind,
        "evictions": s.evictions,
        "total_input_tokens": s.tokens.prompt,
        "total_output_tokens": s.tokens.output,
        "request_throughput": s.duration_request_s,
        "output_throughput": s.duration_output_tok_s,
        "total_token_throughput": s.duration_total_tok_s,
        "steady_output_throughput": s.output_tok_s,
        "input_lens": [r.input_tokens for r in lv.requests],
        "output_lens": [r.output_tokens for r in lv.requests],
        "ttfts": [r.ttft_s for r in lv.requests],
        "itls": [list(r.itls_s) for r in lv.requests],
        "latencies": [r.latency_s for r in lv.requests],
        "errors": errors,
    }
    for name, dist in (("ttft", s.ttft_ms), ("tpot", s.tpot_ms), ("itl", s.itl_ms), ("e2el", s.e2e_ms)):
        out.update(_distribution_fields(name, dist))
    return out


def run_json(run: StoredRun) -> dict:
    """The whole run: metadata, then each target with its levels in vLLM's result shape."""
    levels = all_level_figures(run)
    return {
        "schema": SCHEMA,
        "run_id": run.id,
        "name": run.info.name,
        "created": run.info.created_iso,
        "status": run.info.status,
        "partial": run.info.partial,
        "servelab_version": run.meta.servelab_version,
        "client_host": run.meta.client_host,
        "workload": None if run.meta.workload is None else run.meta.workload.to_json(),
        "settings": run.meta.settings,
        "targets": [
            {
                "index": t.index,
                "url": t.url,
                "engine": t.engine,
                "model": t.info.model,
                "info": t.info.to_json(),
                "levels": [level_json(run, lv) for lv in levels if lv.target_index == t.index],
            }
            for t in run.targets
        ],
    }


def vllm_level_json(run: StoredRun, target_index: int, level: Level) -> dict:
    """One level of one target as a flat vLLM ``--save-result`` document (its top-level fields first)."""
    target = next((t for t in run.targets if t.index == target_index), None)
    if target is None:
        raise ConfigError(
            f"run {run.id} has no target {target_index}; targets: "
            f"{', '.join(str(t.index) for t in run.targets) or 'none'}"
        )
    levels = [lv for lv in all_level_figures(run) if lv.target_index == target_index]
    found = next((lv for lv in levels if lv.level == level), None)
    if found is None:
        raise ConfigError(
            f"target {target_index} of run {run.id} has no level {level.label!r}; levels: "
            f"{', '.join(lv.label for lv in levels) or 'none'}"
        )
    head = {
        "date": time.strftime("%Y%m%d-%H%M%S", time.gmtime(run.info.created_ns // 1_000_000_000)),
        "backend": target.engine,
        "model_id": target.info.model,
        "tokenizer_id": target.info.model,
        "num_prompts": found.completed + found.failed,
        "request_rate": found.rate_rps if found.rate_rps is not None else "inf",
        "burstiness": run.meta.burstiness,
        "servelab_run_id": run.id,
        "servelab_target_url": target.url,
    }
    return {**head, **level_json(run, found), "request_rate": head["request_rate"]}  # vLLM writes "inf"


CSV_SCALARS = [
    f.name
    for f in dataclasses.fields(RequestRecord)
    if f.name not in ("chunk_ns", "chunk_tokens", "server_timings")
]
CSV_COLUMNS = [
    "run_id",
    "url",
    "engine",
    *CSV_SCALARS,
    "chunks",
    "ttft_ms",
    "tpot_ms",
    "e2el_ms",
    "decode_tok_s",
]


def _csv_row(run: StoredRun, urls: dict[int, tuple[str, str]], record: RequestRecord) -> list:
    url, engine = urls.get(record.target_index, ("", ""))
    figures = request_figures(record)
    derived: list[str | float] = ["", "", "", ""]
    if figures is not None:
        tpot = "" if figures.tpot_s is None else figures.tpot_s * 1e3
        decode = "" if figures.decode_tok_s is None else figures.decode_tok_s
        derived = [figures.ttft_s * 1e3, tpot, figures.latency_s * 1e3, decode]
    scalars = ["" if getattr(record, name) is None else getattr(record, name) for name in CSV_SCALARS]
    return [run.id, url, engine, *scalars, len(record.chunk_ns), *derived]


def run_csv(run: StoredRun) -> str:
    """One row per stored request (warm-up included, marked by `phase`)."""
    urls = {t.index: (t.url, t.engine) for t in run.targets}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(_csv_row(run, urls, r) for r in run.requests)
    return buffer.getvalue()
