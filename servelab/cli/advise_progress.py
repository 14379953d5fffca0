"""`servelab advise`'s progress bar on stderr (rich): candidates done of the total, the rate, the time left, the
last candidate's name (as text, never markup)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from servelab.cli.output import stderr_console
from servelab.inert import inert_text


@contextmanager
def progress_bar(what: str) -> Iterator[Callable[[int, int, str], None]]:
    """A callback `(done, total, name)` that moves the bar; the bar is shown while the block runs."""
    bar = Progress(
        TextColumn(what, markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[name]}", markup=False),
        console=stderr_console(),
        transient=False,
        redirect_stdout=False,
        redirect_stderr=False,
    )
    task = bar.add_task(what, total=None, name="")
    with bar:

        def advance(done: int, total: int, name: str) -> None:
            bar.update(task, completed=done, total=total, name=inert_text(name)[:60])

        yield advance
