"""Old shapes of the run document, made the shape of migration m003 once (`migrations.m003_typed_run_document`).

Every function takes one stored JSON value as older code (or a hand-made store) wrote it and returns it with
the keys `results.run.RunMeta`, `results.run.TargetInfo` and `results.stats.LevelSummary` read, spelt one way:
missing keys get their empty value, old spellings their new name, keys no reader has are dropped. The shapes
are written out here, not taken from the types, so this migration keeps meaning what it meant when it ran.

What older rows hold that the current code never writes:
- run meta: a workload as a string or under `name` instead of `kind`; no `client_edge` (before bench recorded
  its aiohttp path), no `predicted` (a measured run) or no `client_host` (a prediction);
- target info: the context per slot under `effective` (`context_per_slot` or `context`), no `version` for a
  prediction, other keys (a server's whole effective config);
- a level's summary (one repeat): the reason a level is not valid under `why`; a summary from before the
  bench kept typed statistics (no `level`, `repeats`, `error_examples`, `duration_s`, `first_send_ns`), whose
  missing figures read as none (0 seconds, no examples). The pooled statistics of such a run are absent from
  `level_stats`, as they always were, and readers take them from its records.
"""

from __future__ import annotations

from typing import Any

DISTRIBUTIONS = (
    "ttft_ms",
    "itl_ms",
    "chunk_gap_ms",
    "tpot_ms",
    "e2e_ms",
    "per_stream_tok_s",
    "prefill_tok_s",
)
_DISTRIBUTION_KEYS = ("p50", "p90", "p95", "p99", "p99_9", "mean", "std", "min", "max", "n")
_TOKEN_KEYS = {"output": 0, "prompt": 0, "source": {}, "chunk_source": {}, "mismatches": 0, "early_eos": 0}
_PREDICT_TARGET = {
    "engine": None,
    "model": None,
    "gpu": None,
    "quant": None,
    "tensor_parallel": 1,
    "interconnect": None,
    "plan_file": None,
    "engine_version": None,
}
_EDGE_KEYS = ("aiohttp_version", "body", "stall_timer", "missing")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def run_meta(meta: Any) -> dict[str, Any]:
    meta = _dict(meta)
    predicted, edge = meta.get("predicted"), meta.get("client_edge")
    return {
        "name": meta.get("name"),
        "servelab_version": meta.get("servelab_version"),
        "client_host": meta.get("client_host"),
        "workload": _workload(meta.get("workload")),
        "settings": _dict(meta.get("settings")),
        "targets": list(meta.get("targets") or []),
        "client_edge": _edge(edge) if isinstance(edge, dict) else None,
        "wall_anchor_ns": _int(meta.get("wall_anchor_ns")),
        "mono_anchor_ns": _int(meta.get("mono_anchor_ns")),
        "predicted": _predicted(predicted) if isinstance(predicted, dict) and predicted else None,
    }


def _workload(workload: Any) -> dict[str, Any] | None:
    if workload is None or workload == {}:
        return None
    if not isinstance(workload, dict):
        return {
            "kind": str(workload),
            "input_tokens": None,
            "output_tokens": None,
            "seed": None,
            "chat": None,
        }
    kind = workload.get("kind") or workload.get("name")
    if kind is None:
        return None  # no workload named: none known
    return {
        "kind": str(kind),
        "input_tokens": _int(workload.get("input_tokens")),
        "output_tokens": _int(workload.get("output_tokens")),
        "seed": _int(workload.get("seed")),
        "chat": workload.get("chat") if isinstance(workload.get("chat"), bool) else None,
    }


def _edge(edge: dict[str, Any]) -> dict[str, Any] | None:
    if any(key not in edge for key in _EDGE_KEYS[:3]):
        return None
    return {**{key: edge[key] for key in _EDGE_KEYS[:3]}, "missing": list(edge.get("missing") or [])}


def _predicted(predicted: dict[str, Any]) -> dict[str, Any]:
    target = {key: predicted.get(key, default) for key, default in _PREDICT_TARGET.items()}
    return {
        **target,
        "effective": _dict(predicted.get("effective")),
        "speculation": predicted.get("speculation"),
    }


def target_info(info: Any, predicted_run: bool) -> dict[str, Any]:
    info = _dict(info)
    effective = _dict(info.get("effective"))
    context = next(
        (
            v
            for v in (
                info.get("context_per_slot"),
                effective.get("context_per_slot"),
                effective.get("context"),
            )
            if type(v) is int and v > 0
        ),
        None,
    )
    version, model = info.get("version"), info.get("model")
    out: dict[str, Any] = {
        "version": None if version is None else str(version),
        "model": None if model is None else str(model),
        "context_per_slot": context,
    }
    if info.get("predicted") or predicted_run:
        out["predicted"] = True
    return out


def level_summary(summary: Any, label: str) -> dict[str, Any]:
    """One `levels` row's summary; `label` is its `level` column ("c=4")."""
    summary = _dict(summary)
    concurrency, rate = _level(label)
    reason = summary.get("invalid_reason") or summary.get("why")
    out: dict[str, Any] = {
        "level": label,
        "concurrency": concurrency,
        "rate": rate,
        "repeats": _int(summary.get("repeats")) or 1,
        "requests": _int(summary.get("requests")) or 0,
        "completed": _int(summary.get("completed")) or 0,
        "errors": _int(summary.get("errors")) or 0,
        "errors_by_kind": _dict(summary.get("errors_by_kind")),
        "error_examples": _dict(summary.get("error_examples")),
        "evictions": _int(summary.get("evictions")) or 0,
        "valid": summary.get("valid") is not False,
        "invalid_reason": None if reason is None else str(reason),
        "partial": summary.get("partial") is True,
    }
    out.update({name: _distribution(summary.get(name)) for name in DISTRIBUTIONS})
    for name in ("output_tok_s", "total_tok_s", "request_s", "duration_s"):
        value = summary.get(name)
        out[name] = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
    for name in ("goodput_req_s", "slo_attainment"):
        if name in summary:
            out[name] = summary[name]
    for name in ("lateness_ms", "ttft_sched_ms"):
        if isinstance(summary.get(name), dict):
            out[name] = _distribution(summary[name])
    tokens = _dict(summary.get("tokens"))
    out["tokens"] = {key: tokens.get(key, default) for key, default in _TOKEN_KEYS.items()}
    window = summary.get("window")
    out["window"] = (
        window if isinstance(window, dict) and {"t0_ns", "t1_ns", "steady"} <= set(window) else None
    )
    for name in ("ramp", "ci95"):
        if isinstance(summary.get(name), dict):
            out[name] = summary[name]
    out["first_send_ns"] = _int(summary.get("first_send_ns"))
    out["client"] = _dict(summary.get("client"))
    if _dict(summary.get("server")):
        out["server"] = summary["server"]
    return out


def _level(label: str) -> tuple[int | None, float | None]:
    kind, _, value = label.partition("=")
    try:
        return (int(value), None) if kind == "c" else (None, float(value))
    except ValueError:
        return None, None


def _distribution(value: Any) -> dict[str, Any]:
    value = _dict(value)
    out = {key: value.get(key) for key in _DISTRIBUTION_KEYS}
    out["n"] = _int(out["n"]) or 0
    return out
