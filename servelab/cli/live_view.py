"""The console while `bench` runs: on a terminal a live view on stderr (the level in flight, a bar over the
whole run with its ETA, a table of the levels done that stays as the final table); elsewhere plain lines, one
as each level starts and one with its figures as it ends. stdout is left to the result.

The runner hands over a `LiveLevel` at each level's start and end only; the live figures are read by rich's
own refresh thread at `REFRESH_HZ` (`bench/live.py`), never per request, so the view adds no work to the
event loop that stamps the requests (benchmarks/live_view_ab.py measures that).

`servelab predict` goes through the same view (`predicted=True`): its ladder runs in virtual time, each level
is handed over once, when it is computed, and the view shows that level's predicted figures (its stored
statistics) and redraws at once, as a prediction can finish between two refreshes.
"""

from __future__ import annotations

import time

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from servelab.bench.live import LiveFigures, LiveLevel, LiveTally

REFRESH_HZ = 2.0


def _ms(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _eta(elapsed_s: float, done: float) -> str:
    if done <= 0:
        return "ETA —"
    left = elapsed_s / done * (1 - done)
    return f"ETA {int(left // 60)}:{int(left % 60):02d}"


def _validity(f: LiveFigures, lag_limit_ms: float) -> str:
    late, lag = f.wake_late_p99_ms, f.lag_p99_ms
    if lag is None:
        return "client: starting"
    ok = lag <= lag_limit_ms and (late is None or late <= lag_limit_ms + 1.0)
    return f"client lag p99 {lag:.2f} ms, wake-up late p99 {_ms(late, 2)} ms: {'ok' if ok else 'NOT VALID'}"


def level_line(live: LiveLevel, predicted: bool = False) -> str:
    """A finished level in one plain line, its figures as the bench (or the prediction) stored them."""
    s = live.result.stats
    valid = "valid" if live.result.valid else f"NOT valid: {live.result.invalid_reason}"
    if predicted:
        valid = "predicted (virtual time)"
    return (
        f"[{live.position + 1}/{live.total}] {live.url} {live.level}: {s.completed} ok, {s.errors} errors, "
        f"{s.output_tok_s:,.1f} tok/s, TTFT p50 {_ms(s.ttft_ms.p50)} ms, ITL p50 {_ms(s.itl_ms.p50, 2)} ms, {valid}"
    )


class LadderView:
    """`update` is the runner's progress callback; `close` ends the view (the final table stays)."""

    def __init__(self, console: Console, lag_limit_ms: float, *, predicted: bool = False) -> None:
        self.console, self.lag_limit_ms, self.predicted = console, lag_limit_ms, predicted
        self.closing = False
        self.live_display: Live | None = None
        self.tally: LiveTally | None = None
        self.started = time.monotonic()
        self.done_rows: list[LiveLevel] = []
        self.terminal = console.is_terminal and not console.is_dumb_terminal

    def update(self, live: LiveLevel) -> None:
        if live.result is not None:
            self.done_rows.append(live)
            if not self.terminal:
                self.console.print(level_line(live, self.predicted), markup=False, highlight=False)
            elif self.predicted:
                self._start().refresh()  # each virtual level is drawn, however fast the next one comes
            return
        self.tally = LiveTally(live)
        if not self.terminal:
            self.console.print(
                f"[{live.position + 1}/{live.total}] {live.url} {live.level} repeat {live.repeat}…",
                markup=False,
                highlight=False,
            )
        else:
            self._start()

    def _start(self) -> Live:
        if self.live_display is None:
            self.live_display = Live(
                console=self.console,
                get_renderable=self.render,
                refresh_per_second=REFRESH_HZ,
                transient=False,
            )
            self.live_display.start()
        return self.live_display

    def render(self) -> RenderableType:
        """The whole view, built on rich's refresh thread."""
        tally = self.tally
        parts: list[RenderableType] = [self._done_table()]
        if self.predicted and self.done_rows and not self.closing:
            parts.insert(0, self._predicted(self.done_rows[-1]))
        elif tally is not None and tally.live.result is None:
            parts.insert(0, self._in_flight(tally.live, tally.read()))
        return Group(*parts)

    def _bar(self, live: LiveLevel, done: float, label: str) -> Table:
        elapsed = time.monotonic() - self.started
        bar = Table.grid(padding=(0, 1))
        bar.add_row(
            Text(f"{label} {live.position + 1}/{live.total}"),
            ProgressBar(total=1.0, completed=done, width=40),
            Text(
                f"{done:.0%} · {int(elapsed // 60)}:{int(elapsed % 60):02d} elapsed · {_eta(elapsed, done)}"
            ),
        )
        return bar

    def _predicted(self, live: LiveLevel) -> RenderableType:
        """The level just predicted: its figures as the prediction stored them (virtual time)."""
        s = live.result.stats
        errors = ", ".join(f"{k} {n}" for k, n in sorted(s.errors_by_kind.items())) or "none"
        lines = Text.assemble(
            f"{live.url} {live.level} repeat {live.repeat} predicted: {s.completed}/{s.requests} requests, "
            f"{s.output_tok_s:,.1f} tok/s, TTFT p50 {_ms(s.ttft_ms.p50)} ms, ITL p50 {_ms(s.itl_ms.p50, 2)} ms\n",
            f"errors: {errors} · virtual time: no client to fall behind",
        )
        return Group(self._bar(live, (live.position + 1) / max(live.total, 1), "predicted level"), lines)

    def _in_flight(self, live: LiveLevel, f: LiveFigures) -> RenderableType:
        done = (live.position + f.fraction) / max(live.total, 1)
        bar = self._bar(live, done, "level")
        errors = ", ".join(f"{k} {n}" for k, n in sorted(f.errors.items())) or "none"
        planned = f.planned if f.planned is not None else "?"
        lines = Text.assemble(
            f"{live.url} {live.level} repeat {live.repeat}: {f.done}/{planned} requests, {f.tok_s:,.1f} tok/s, "
            f"TTFT p50 {_ms(f.ttft_p50_ms)} ms, ITL p50 {_ms(f.itl_p50_ms, 2)} ms so far\n",
            f"errors: {errors} · {_validity(f, self.lag_limit_ms)}",
        )
        return Group(bar, lines)

    def _done_table(self) -> Table:
        title = "levels done (predicted, virtual time)" if self.predicted else "levels done"
        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for column in ("#", "target", "level", "ok", "errors", "tok/s", "TTFT p50 ms", "ITL p50 ms", "valid"):
            table.add_column(column, justify="left" if column in ("target", "level") else "right")
        for live in self.done_rows:
            s = live.result.stats
            table.add_row(
                str(live.position + 1),
                live.url,
                live.level,
                str(s.completed),
                str(s.errors),
                f"{s.output_tok_s:,.1f}",
                _ms(s.ttft_ms.p50),
                _ms(s.itl_ms.p50, 2),
                "predicted" if self.predicted else "yes" if live.result.valid else "NO",
            )
        return table

    def close(self) -> None:
        self.closing = True  # the last frame is the final table alone
        if self.live_display is not None:
            self.live_display.stop()
