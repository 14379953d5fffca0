"""The bill's tables as rows of plain strings, shared by the HTML, Markdown and terminal renderers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from servelab.predict.bands import band_number
from servelab.report import overlay
from servelab.report.data import Bill
from servelab.report.levels import LevelFigures
from servelab.results.run import RunWorkload

GIB = 1024**3
NUMERIC = re.compile(
    r"^([\d,.\s/%—×+()–-]|GiB|MiB)*$"
)  # numbers, "55 / 60", "83%", "—", "7.4 (1.9–30)": right


def is_numeric(cell: str) -> bool:
    return bool(NUMERIC.match(cell))


@dataclass(frozen=True)
class TableData:
    key: str
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def fmt(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def share(fraction: float) -> str:
    """A share as a percentage; under 1% with two significant digits, so a tiny share never reads as 0%."""
    return f"{fraction:.0%}" if fraction >= 0.01 or fraction == 0 else f"{fraction * 100:.2g}%"


def fmt_bytes(value: int | float | None) -> str:
    """Bytes in GiB when at least one GiB, else MiB."""
    if value is None:
        return "—"
    return f"{value / GIB:,.2f} GiB" if value >= GIB else f"{value / 1024**2:,.1f} MiB"


def _level_row(lv: LevelFigures, valid: bool) -> tuple[str, ...]:
    s = lv.stats
    return (
        lv.label,
        fmt(lv.completed),
        fmt(lv.failed),
        fmt(lv.evictions),
        "yes" if valid else "NO",
        fmt(s.per_stream_tok_s.median),
        fmt(lv.aggregate_tok_s),
        fmt(s.ttft_ms.p50, 0),
        fmt(s.ttft_ms.p99, 0),
        fmt(s.itl_ms.p50, 2),
        fmt(s.itl_ms.p99, 2),
    )


LADDER_HEADERS = (
    "level",
    "completed",
    "errors",
    "evictions",
    "valid",
    "per-stream tok/s p50",
    "aggregate tok/s",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "ITL p50 ms",
    "ITL p99 ms",
)


def ladder_tables(bill: Bill) -> list[TableData]:
    """One table per engine, a row per level; a level the bench marked invalid says so."""
    tables = []
    for i, e in enumerate(bill.engines):
        rows = tuple(
            _level_row(lv, (e.run_id, e.target_index, lv.label) not in bill.invalid_levels) for lv in e.levels
        )
        tables.append(TableData(f"ladder-{i}", f"Ladder: {e.label}", LADDER_HEADERS, rows))
    return tables


SERVER_COLUMNS = (
    ("counters", "prompt_tokens", "prompt tokens"),
    ("counters", "generation_tokens", "generated tokens"),
    ("counters", "request_success", "requests ok"),
    ("counters", "preemptions", "preemptions"),
    ("counters", "prefix_cache_hits", "prefix hits (tokens)"),
    ("counters", "prefix_cache_queries", "prefix queries (tokens)"),
    ("gauges", "requests_running", "running max"),
    ("gauges", "requests_waiting", "waiting max"),
    ("gauges", "kv_cache_usage", "KV usage max"),
)


def _server_cell(server: dict, part: str, key: str) -> str:
    value = server.get(part, {}).get(key)
    if isinstance(value, dict):
        value = value.get("max")
    if key == "kv_cache_usage" and isinstance(value, int | float):
        return share(float(value))
    return fmt(value if isinstance(value, int | float) else None, 2 if isinstance(value, float) else 1)


def server_tables(bill: Bill) -> list[TableData]:
    """Per engine whose bench stored server figures: a row per level from the server's own /metrics."""
    tables = []
    for i, e in enumerate(bill.engines):
        levels = [lv for lv in e.levels if lv.server]
        if not levels:
            continue
        rows = tuple(
            (lv.label, *(_server_cell(lv.server, part, key) for part, key, _ in SERVER_COLUMNS))
            for lv in levels
        )
        headers = ("level", *(title for _, _, title in SERVER_COLUMNS))
        tables.append(
            TableData(f"server-{i}", f"As the server counted it (/metrics): {e.label}", headers, rows)
        )
    return tables


def doctor_table(doctor: dict) -> TableData:
    findings = [f for f in doctor.get("findings", []) if isinstance(f, dict)]
    rows = tuple(
        (
            str(f.get("severity", "")),
            str(f.get("title") or f.get("text") or f.get("id", "")),
            str(f.get("consequence") or f.get("meaning") or ""),
            str(f.get("fix", "")),
        )
        for f in findings
    )
    return TableData("doctor", "Doctor findings", ("severity", "finding", "consequence", "fix"), rows)


def spec_table(spec: dict) -> TableData:
    keys = ("alpha", "expected_tokens_per_step", "predicted_speedup", "measured_speedup", "verdict", "why")

    def shown(value: object) -> str:
        return fmt(value, 3) if isinstance(value, float) else "—" if value is None else str(value)

    rows = tuple((key, shown(spec[key])) for key in keys if key in spec)
    return TableData("spec", "Speculative decoding", ("figure", "value"), rows)


def _workload(workload: RunWorkload | None) -> str:
    if workload is None:
        return "?"
    lengths = [
        f"{n} {label}"
        for n, label in ((workload.input_tokens, "in"), (workload.output_tokens, "out"))
        if n is not None
    ]
    return workload.kind + (f" ({', '.join(lengths)} tokens)" if lengths else "")


def runs_table(bill: Bill) -> TableData:
    """One row per run, with every target's engine and model as the server named it (the series labels
    shorten model paths)."""
    rows = []
    for info, workload in zip(bill.run_infos, bill.workloads, strict=True):
        status = info.status + (", partial" if info.partial else "")
        served = "; ".join(f"{e.engine} · {e.model}" for e in bill.engines if e.run_id == info.id)
        rows.append(
            (
                info.id,
                info.name or "",
                info.created_iso,
                status,
                _workload(workload),
                served,
                fmt(info.request_count - info.error_count),
                fmt(info.error_count),
            )
        )
    headers = ("run", "name", "created (UTC)", "status", "workload", "engine · model", "completed", "errors")
    return TableData("runs", "Runs in this report", headers, tuple(rows))


def failures_table(bill: Bill) -> TableData | None:
    """Failed requests by engine, level and kind, with the first message the client recorded; None if none."""
    rows = tuple(
        (e.label, lv.label, kind, fmt(count), lv.error_examples.get(kind, ""))
        for e in bill.engines
        for lv in e.levels
        for kind, count in sorted(lv.errors_by_kind.items())
    )
    if not rows:
        return None
    return TableData(
        "failures",
        "Failed requests",
        ("engine / configuration", "level", "kind", "count", "first message"),
        rows,
    )


def signed_share(fraction: float | None) -> str:
    return "—" if fraction is None else f"{fraction:+.1%}"


def banded(got: overlay.FigureError) -> str:
    """A predicted figure with its band: `21.3 (17–26)`."""
    if got.band is None:
        return fmt(got.predicted)
    return f"{fmt(got.predicted)} ({band_number(got.band[0])}–{band_number(got.band[1])})"


def prediction_tables(bill: Bill) -> list[TableData]:
    """Per measured target held to a prediction: each level's figures predicted (with its band), measured and
    the error, then the median |error| of each figure over the levels and, with bands, how many measured
    figures fell inside them."""
    out = []
    for i, pair in enumerate(overlay.pairs(bill)):
        found = overlay.errors(pair)
        by_level: dict[str, dict[str, overlay.FigureError]] = {}
        for e in found:
            by_level.setdefault(e.level, {})[e.figure] = e
        rows = []
        for level, figures in by_level.items():
            cells: list[str] = [level]
            for name, _ in overlay.FIGURES:
                got = figures.get(name)
                cells += (
                    [fmt(None), fmt(None), "—"]
                    if got is None
                    else [banded(got), fmt(got.measured), signed_share(got.error)]
                )
            rows.append(tuple(cells))
        median = ["median |error|"]
        for name, _ in overlay.FIGURES:
            value = overlay.median_abs_error(found, name)
            median += ["", "", "—" if value is None else f"{value:.1%}"]
        rows.append(tuple(median))
        if overlay.inside_count(found)[1]:
            inside = ["measured inside the band (levels)"]
            for name, _ in overlay.FIGURES:
                n, of = overlay.inside_count(found, name)
                inside += ["", "", f"{n} / {of}" if of else "—"]
            rows.append(tuple(inside))
        headers = (
            "level",
            *(f"{name} {part}" for name, _ in overlay.FIGURES for part in ("predicted", "measured", "error")),
        )
        title = f"Predicted vs measured: {pair.measured.label} against {pair.predicted.label}"
        out.append(TableData(f"prediction-{i}", title, headers, tuple(rows)))
    return out
