"""`--trace FILE`: arrivals and lengths replayed from a trace with timestamps (the file edge; the rest is pure).

Three layouts, told apart by the first line (docs/reference/traces.md has the public sources):

- Mooncake JSONL (kvcache-ai/Mooncake FAST25-release/traces): ``{"timestamp": ms since the first request,
  "input_length", "output_length", "hash_ids": [block ids]}``; a block is 512 tokens, and requests whose
  ``hash_ids`` start alike share that prefix (docs/reference/traces.md §1).
- Azure LLM inference trace CSV (Azure/AzurePublicDataset, 2023 and 2024): header
  ``TIMESTAMP,ContextTokens,GeneratedTokens``, TIMESTAMP a date and time (§2).
- servelab JSONL: ``{"at_ms": ms from the trace's start, "input_tokens", "output_tokens"}``, optionally
  ``"hash_ids"`` as Mooncake's (docs/metrics.md, *Load shapes*).

Every row is checked; a bad one is a ConfigError naming the file and line. Memory is bounded: lines are read
one at a time up to ``MAX_LINE_BYTES``, at most ``--requests`` rows (and ``MAX_REQUESTS``) are kept, and the
prompts they need are capped at ``MAX_TRACE_INPUT_TOKENS`` tokens in all.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from servelab.bench.schedule import MAX_LEVEL_SECONDS, MAX_REQUESTS
from servelab.bench.workloads import MAX_INPUT_TOKENS, MAX_OUTPUT_TOKENS
from servelab.errors import ConfigError, ServelabError
from servelab.inert import inert_line
from servelab.userfiles import UserFile

MAX_LINE_BYTES = 1 << 20
MAX_TRACE_INPUT_TOKENS = 20_000_000  # prompt text is built before the run: about 8 bytes a token, twice
MOONCAKE_BLOCK_TOKENS = 512
MAX_SPEED = 1_000_000.0
MIN_LABEL_RATE = 0.001  # requests/s (bench's lowest --rate)
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


@dataclass(frozen=True)
class TraceRequest:
    at_ns: int  # when to send, from the first row (already divided by --trace-speed)
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()  # Mooncake prefix blocks of MOONCAKE_BLOCK_TOKENS tokens


@dataclass(frozen=True)
class Trace:
    path: str
    layout: str  # mooncake | azure | servelab
    speed: float
    requests: tuple[TraceRequest, ...]

    def offsets_ns(self) -> list[int]:
        return [r.at_ns for r in self.requests]

    @property
    def span_s(self) -> float:
        return self.requests[-1].at_ns / 1e9

    @property
    def mean_rate_rps(self) -> float:
        """Requests per second over the replayed span (the level's label, r=RATE); rows all at one moment
        count as spread over a millisecond."""
        return max(MIN_LABEL_RATE, float(f"{len(self.requests) / max(self.span_s, 1e-3):.3g}"))

    def describe(self) -> dict[str, Any]:
        """What the run's meta keeps about the trace."""
        return {
            "path": self.path,
            "layout": self.layout,
            "speed": self.speed,
            "requests": len(self.requests),
            "span_s": self.span_s,
        }


def load_trace(
    path: Path, *, speed: float = 1.0, max_rows: int | None = None, max_seconds: float | None = None
) -> Trace:
    """The first ``max_rows`` rows (or those within ``max_seconds`` after speed-up) of a trace file."""
    if not (isinstance(speed, int | float) and math.isfinite(speed) and 0 < speed <= MAX_SPEED):
        raise ConfigError(f"--trace-speed must be a number above 0 and at most {MAX_SPEED:,.0f}, got {speed}")
    source = UserFile.named(path, "--trace", "give a trace file (JSONL or CSV)")
    try:
        with source.open() as f:
            reader = _Reader(source, f, speed)
            requests = reader.rows(max_rows if max_rows is not None else MAX_REQUESTS, max_seconds)
    except OSError as exc:
        raise source.fail(f"cannot read it ({exc.strerror or exc})") from exc
    if not requests:
        raise ConfigError(f"trace {inert_line(str(path))} has no requests to replay")
    return Trace(str(path), reader.layout, float(speed), tuple(requests))


class _Reader:
    def __init__(self, source: UserFile, f: IO[bytes], speed: float) -> None:
        self.source, self.f, self.speed = source, f, speed
        self.line_no = 0
        self.layout = ""
        self.columns: dict[str, int] = {}
        self.first_ms: float | None = None
        self.first_dt: datetime | None = None
        self.last_ns = 0
        self.tokens = 0

    def fail(self, what: str) -> ServelabError:
        return self.source.fail(f"line {self.line_no}: {what}")

    def lines(self):
        while chunk := self.f.readline(MAX_LINE_BYTES + 1):
            self.line_no += 1
            if len(chunk) > MAX_LINE_BYTES:
                raise self.fail(f"longer than {MAX_LINE_BYTES // 1024} KiB: not a trace row")
            try:
                text = chunk.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise self.fail("not UTF-8 text") from None
            if text:
                yield text

    def rows(self, max_rows: int, max_seconds: float | None) -> list[TraceRequest]:
        out: list[TraceRequest] = []
        for text in self.lines():
            if not self.layout:
                self.layout = self._layout(text)
                if self.layout == "azure":
                    continue  # the header
            request = self._row(text)
            if max_seconds is not None and request.at_ns > max_seconds * 1e9:
                break
            if len(out) >= max_rows:
                if max_rows >= MAX_REQUESTS:
                    raise self.fail(
                        f"more than {MAX_REQUESTS:,} rows: replay a part with --requests or --duration"
                    )
                break
            self.tokens += request.input_tokens
            if self.tokens > MAX_TRACE_INPUT_TOKENS:
                raise self.fail(
                    f"the rows so far need over {MAX_TRACE_INPUT_TOKENS:,} prompt tokens in all; "
                    "replay a part with --requests N or --duration S"
                )
            out.append(request)
        return out

    def _layout(self, text: str) -> str:
        if text.startswith("{"):
            row = self._json(text)
            if "input_length" in row:
                return "mooncake"
            if "input_tokens" in row:
                return "servelab"
            raise self.fail('a JSON row needs "input_length" (Mooncake) or "input_tokens" (servelab)')
        header = [c.strip() for c in self._cells(text)]
        lower = [c.lower() for c in header]
        missing = [c for c in AZURE_COLUMNS if c.lower() not in lower]
        if missing:
            raise self.fail(
                f"not a trace: JSONL rows or a CSV header with {', '.join(AZURE_COLUMNS)} "
                f"(missing {', '.join(missing)})"
            )
        self.columns = {c: lower.index(c.lower()) for c in AZURE_COLUMNS}
        return "azure"

    def _json(self, text: str) -> dict[str, Any]:
        row = self.source.parse_json(text, f"line {self.line_no}: ")
        if not isinstance(row, dict):
            raise self.fail("a row must be a JSON object")
        return row

    def _row(self, text: str) -> TraceRequest:
        if self.layout == "azure":
            return self._azure(text)
        row = self._json(text)
        if self.layout == "mooncake":
            keys, at = ("input_length", "output_length"), row.get("timestamp")
        else:
            keys, at = ("input_tokens", "output_tokens"), row.get("at_ms")
        if not isinstance(at, int | float) or isinstance(at, bool) or not math.isfinite(at) or at < 0:
            name = "timestamp" if self.layout == "mooncake" else "at_ms"
            raise self.fail(f"{name} must be a number of milliseconds >= 0, got {at!r:.40}")
        ids = self._hash_ids(row.get("hash_ids", []))
        request = self._request(self._offset_ms(float(at)), row.get(keys[0]), row.get(keys[1]), keys, ids)
        return request

    def _azure(self, text: str) -> TraceRequest:
        cells = self._cells(text)
        if len(cells) <= max(self.columns.values()):
            raise self.fail(
                f"expected {len(self.columns)} columns ({', '.join(AZURE_COLUMNS)}), got {len(cells)}"
            )
        stamp = cells[self.columns["TIMESTAMP"]].strip()
        try:
            at = datetime.fromisoformat(stamp)
        except ValueError:
            raise self.fail(
                f"TIMESTAMP {stamp!r:.40} is not a date and time (2023-11-16 18:17:03.97)"
            ) from None
        values = [_int(cells[self.columns[c]]) for c in AZURE_COLUMNS[1:]]
        return self._request(self._offset_dt(at), values[0], values[1], AZURE_COLUMNS[1:], ())

    def _cells(self, text: str) -> list[str]:
        try:
            return next(csv.reader([text]))
        except csv.Error as exc:
            raise self.fail(f"not CSV ({exc})") from None

    def _offset_ms(self, at_ms: float) -> float:
        if self.first_ms is None:
            self.first_ms = at_ms
        return at_ms - self.first_ms

    def _offset_dt(self, at: datetime) -> float:
        if self.first_dt is None:
            self.first_dt = at
        if (at.tzinfo is None) != (self.first_dt.tzinfo is None):
            raise self.fail("TIMESTAMP mixes times with and without a time zone")
        return (at - self.first_dt).total_seconds() * 1000.0

    def _request(
        self, offset_ms: float, n_in: object, n_out: object, keys: tuple[str, ...], ids: tuple[int, ...]
    ) -> TraceRequest:
        at_ns = round(offset_ms / self.speed * 1e6)
        if at_ns < self.last_ns:
            raise self.fail(
                "goes back in time (rows must be in time order): sort the trace by its timestamps"
            )
        if at_ns > MAX_LEVEL_SECONDS * 1e9:
            raise self.fail(f"comes over {MAX_LEVEL_SECONDS:,.0f} s after the first row: raise --trace-speed")
        n_in = self._tokens(keys[0], n_in, MAX_INPUT_TOKENS)
        n_out = self._tokens(keys[1], n_out, MAX_OUTPUT_TOKENS)
        if len(ids) > -(-n_in // MOONCAKE_BLOCK_TOKENS):
            raise self.fail(f"{len(ids)} hash_ids for {n_in} tokens: at most one per {MOONCAKE_BLOCK_TOKENS}")
        self.last_ns = at_ns
        return TraceRequest(at_ns, n_in, n_out, ids)

    def _tokens(self, key: str, value: object, high: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
            raise self.fail(f"{key} must be a whole number of tokens from 1 to {high:,}, got {value!r:.40}")
        return value

    def _hash_ids(self, ids: object) -> tuple[int, ...]:
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids
        ):
            raise self.fail("hash_ids must be a list of whole numbers >= 0")
        return tuple(ids)


def _int(cell: str) -> int | str:
    text = cell.strip()
    return int(text) if text.isdigit() and len(text) <= 12 else text
