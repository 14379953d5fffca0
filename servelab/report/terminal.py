"""The bill in the terminal (rich): the same sections, tables as rich tables, small bar charts for the ladder."""

from __future__ import annotations

from collections.abc import Callable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from servelab.inert import inert_line, inert_text
from servelab.report.data import Bill
from servelab.report.levels import LevelFigures
from servelab.report.page import Items, Para, Section
from servelab.report.plots import Plot
from servelab.report.tables import TableData, is_numeric

BAR_WIDTH = 40
STYLES = {"note": "dim", "warning": "bold yellow", "text": ""}


def _table(table: TableData) -> Table:
    node = Table(
        title=Text(inert_line(table.title)), title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True
    )
    for i, header in enumerate(table.headers):
        numeric = i > 0 and bool(table.rows) and all(is_numeric(row[i]) for row in table.rows)
        # a narrow terminal wraps a cell; it never cuts a figure short
        node.add_column(header, overflow="fold", justify="right" if numeric else "left")
    for row in table.rows:
        # server strings are shown as text, never as markup, their control characters as escapes
        node.add_row(*(Text(inert_line(cell)) for cell in row))
    return node


def ladder_bars(bill: Bill, title: str, value: Callable[[LevelFigures], float | None]) -> list[Text]:
    """One bar per closed-loop level and engine, on one shared scale."""
    points = [(e, lv, value(lv)) for e in bill.engines for lv in e.closed_loop]
    peak = max((v for _, _, v in points if v is not None), default=0.0)
    if peak <= 0:
        return []
    lines = [Text(inert_line(title), style="bold")]
    for engine in bill.engines:
        lines.append(Text(inert_line(engine.label)))
        for e, lv, v in points:
            if e is engine and v is not None:
                bar = "█" * round(v / peak * BAR_WIDTH)
                lines.append(Text(f"  c={lv.concurrency:<4g} {bar:<{BAR_WIDTH}} {v:,.1f}"))
    return lines


SECTION_BARS: dict[str, tuple[tuple[str, Callable[[LevelFigures], float | None]], ...]] = {
    "throughput": (
        ("aggregate output tok/s vs concurrency", lambda lv: lv.aggregate_tok_s),
        ("per-stream decode tok/s (median) vs concurrency", lambda lv: lv.stats.per_stream_tok_s.median),
    ),
    "latency": (
        ("TTFT p99 ms vs concurrency", lambda lv: lv.stats.ttft_ms.p99),
        ("ITL p99 ms vs concurrency", lambda lv: lv.stats.itl_ms.p99),
    ),
}


def render_terminal(console: Console, bill: Bill, sections: tuple[Section, ...]) -> None:
    for section in sections:
        console.rule(Text(inert_line(section.title)))
        for block in section.blocks:
            if isinstance(block, Para):
                console.print(Text(inert_text(block.text), style=STYLES[block.kind]))
            elif isinstance(block, Items):
                for item in block.items:
                    console.print(Text(inert_text(f"• {item}")))
            elif isinstance(block, TableData):
                console.print(_table(block))
            elif isinstance(block, Plot):
                continue
        for title, value in SECTION_BARS.get(section.key, ()):
            for line in ladder_bars(bill, title, value):
                console.print(line)
