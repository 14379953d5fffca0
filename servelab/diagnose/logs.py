"""Find known log lines in engine and NCCL logs: one finding per signature per file, ranked by severity.

Pure core: ``LogScanner`` takes lines and keeps the first occurrence and count of each signature. The edges
read files or stdin (``read_lines``, lines capped at ``MAX_LINE_CHARS``) and tail a growing file
(``follow``). Matching is linear in the input (see ``signatures.template``).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from servelab.diagnose.signatures import SEVERITIES, Signature
from servelab.errors import ConfigError
from servelab.userfiles import UserFile

MAX_LINE_CHARS = 64 * 1024  # longer lines are cut here before matching
MAX_TEXT_CHARS = 500  # how much of a matching line a finding quotes
_READ_CHUNK_CHARS = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class LogFinding:
    """A signature seen in one log: where first, how often, what it means and what to do."""

    id: str
    engine: str
    severity: str
    file: str
    line: int  # 1-based number of the first matching line
    count: int
    text: str
    meaning: str
    fix: str
    captures: dict[str, str] = field(default_factory=dict)


class LogScanner:
    """Feeds lines of one log through the signatures; remembers first occurrence and count of each."""

    def __init__(self, signatures: Iterable[Signature], file: str) -> None:
        self.signatures = tuple(signatures)
        self.file = file
        self._first: dict[str, LogFinding] = {}
        self._counts: dict[str, int] = {}

    def feed(self, line_number: int, line: str) -> list[LogFinding]:
        """Match one line; returns the findings this line shows for the first time."""
        line = line[:MAX_LINE_CHARS]
        new: list[LogFinding] = []
        for signature in self.signatures:
            captures = signature.match(line)
            if captures is None:
                continue
            self._counts[signature.id] = self._counts.get(signature.id, 0) + 1
            if signature.id not in self._first:
                self._first[signature.id] = _finding(signature, self.file, line_number, line, captures)
                new.append(self._first[signature.id])
        return new

    def findings(self) -> list[LogFinding]:
        """Every signature seen so far, with its count, most severe first."""
        found = [_with_count(f, self._counts[f.id]) for f in self._first.values()]
        return rank(found)


def rank(findings: Iterable[LogFinding]) -> list[LogFinding]:
    """Critical before warning before info; then by file and line."""
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.file, f.line, f.id))


def scan_lines(lines: Iterable[str], signatures: Iterable[Signature], file: str = "-") -> list[LogFinding]:
    """Findings for one log given as lines."""
    scanner = LogScanner(signatures, file)
    for number, line in enumerate(lines, start=1):
        scanner.feed(number, line)
    return scanner.findings()


def scan_files(
    paths: Iterable[str], signatures: Iterable[Signature], stdin: TextIO | None = None
) -> list[LogFinding]:
    """Findings for each file (``-`` reads ``stdin``), ranked together."""
    signatures = tuple(signatures)
    found: list[LogFinding] = []
    for path in paths:
        with _open(path, stdin) as stream:
            found += scan_lines(read_lines(stream), signatures, path)
    return rank(found)


def read_lines(stream: TextIO, max_chars: int = MAX_LINE_CHARS) -> Iterator[str]:
    """Lines without their newline, each cut to ``max_chars``; the rest of an overlong line is skipped unread."""
    while True:
        line = stream.readline(max_chars)
        if not line:
            return
        if line.endswith("\n"):
            yield line.rstrip("\r\n")
            continue
        yield line
        _skip_to_newline(stream)


def _skip_to_newline(stream: TextIO) -> None:
    while True:
        rest = stream.readline(_READ_CHUNK_CHARS)
        if not rest or rest.endswith("\n"):
            return


def follow(
    path: str,
    signatures: Iterable[Signature],
    on_finding: Callable[[LogFinding], None],
    poll_s: float = 0.5,
    should_stop: Callable[[], bool] = lambda: False,
) -> list[LogFinding]:
    """Tail ``path`` (polling) and report each new signature as it first appears, until ``should_stop``.

    Reads what is already there first. A partial last line waits for its newline. Returns the ranked findings.
    """
    scanner = LogScanner(signatures, path)
    number = 0
    pending = ""
    with _open(path, None) as stream:
        while not should_stop():
            chunk = stream.readline(MAX_LINE_CHARS)
            if not chunk:
                time.sleep(poll_s)
                continue
            pending += chunk
            if not pending.endswith("\n") and len(pending) < MAX_LINE_CHARS:
                continue
            number += 1
            for finding in scanner.feed(number, pending.rstrip("\r\n")):
                on_finding(finding)
            if not pending.endswith("\n"):
                _skip_to_newline(stream)
            pending = ""
    return scanner.findings()


def _open(path: str, stdin: TextIO | None):
    if path == "-":
        if stdin is None:
            raise ConfigError("'-' (standard input) cannot be followed; give a file path")
        return _NoClose(stdin)
    return open_log(path)


def open_log(path: str) -> TextIO:
    """A log file as text (undecodable bytes replaced), opened only when it is a regular file."""
    handle = UserFile(Path(path), f"log file {path}", "give a log file, or '-' for standard input").open()
    return io.TextIOWrapper(handle, encoding="utf-8", errors="replace")


class _NoClose:
    """Context manager that hands out a stream it does not close (stdin)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __enter__(self) -> TextIO:
        return self.stream

    def __exit__(self, *exc: object) -> None:
        return None


def _finding(
    signature: Signature, file: str, line_number: int, line: str, captures: dict[str, str]
) -> LogFinding:
    return LogFinding(
        id=signature.id,
        engine=signature.engine,
        severity=signature.severity,
        file=file,
        line=line_number,
        count=1,
        text=line.strip()[:MAX_TEXT_CHARS],
        meaning=signature.render_meaning(captures),
        fix=signature.render_fix(captures),
        captures=captures,
    )


def _with_count(finding: LogFinding, count: int) -> LogFinding:
    return replace(finding, count=count)
