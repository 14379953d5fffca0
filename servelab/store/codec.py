"""RequestRecord <-> `requests` row. Chunk timing arrays travel as compact BLOBs (``array.tobytes()``).

Fields of RequestRecord that have no column of their own (added later with defaults) go to the `extra` JSON
column, so the store keeps every field without a migration; unknown keys read back are ignored.

A row is storable whatever a server sent: text that UTF-8 cannot hold (a lone surrogate) is written escaped,
an integer outside SQLite's 64 bits is stored as NULL (``storable_row``). ``checked_row`` is the reverse
guard, for rows read back from a journal (hostile input): the right number of values, each of its column's
type, BLOBs of whole elements, JSON columns holding objects.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from array import array
from typing import Any

from servelab.results.records import RequestRecord, storable_text

BLOB_FIELDS = {"chunk_ns": "q", "chunk_tokens": "i"}
JSON_FIELDS = ("server_timings",)
BOOL_FIELDS = ("early_eos", "evicted")
COLUMNS = (
    "target_index",
    "level",
    "repeat",
    "request_index",
    "phase",
    "status",
    "sent_ns",
    "end_ns",
    "intended_ns",
    "first_token_ns",
    "error_kind",
    "error",
    "http_status",
    "prompt_tokens",
    "output_tokens",
    "tokens_source",
    "max_tokens",
    "finish_reason",
    "early_eos",
    "evicted",
    "cached_prompt_tokens",
    "chunk_ns",
    "chunk_tokens",
    "server_timings",
)
INSERT_SQL = f"INSERT INTO requests (run_id, {', '.join(COLUMNS)}, extra) VALUES ({', '.join('?' * (len(COLUMNS) + 2))})"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_NULLABLE_INT = (
    "intended_ns",
    "first_token_ns",
    "http_status",
    "prompt_tokens",
    "output_tokens",
    "max_tokens",
    "cached_prompt_tokens",
)
_NULLABLE_TEXT = ("error_kind", "error", "finish_reason")
SELECT_SQL = f"SELECT {', '.join(COLUMNS)}, extra FROM requests WHERE run_id = ? ORDER BY id"


def _blob(values: Any, typecode: str) -> bytes:
    packed = values if isinstance(values, array) and values.typecode == typecode else array(typecode, values)
    if sys.byteorder != "little":  # stored little-endian whatever the host
        packed = array(typecode, packed)
        packed.byteswap()
    return packed.tobytes()


def _unblob(data: bytes, typecode: str) -> array:
    values = array(typecode)
    values.frombytes(data)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def storable(value: Any) -> Any:
    """A value as SQLite and the journal can hold it (see the module's docstring)."""
    if type(value) is str:
        return storable_text(value)
    if type(value) is bool:  # SQLite keeps it as 0/1 anyway; the journal then reads back as an integer
        return int(value)
    if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
        return None
    return value


def storable_row(row: tuple) -> tuple:
    return tuple(storable(v) for v in row)


def checked_row(values: list) -> tuple:
    """A `requests` row read back from outside (a journal line's values); ValueError saying what is wrong."""
    if len(values) != len(COLUMNS) + 2:
        raise ValueError(f"{len(values)} values, not {len(COLUMNS) + 2}")
    for name, value in zip(("run_id", *COLUMNS, "extra"), values, strict=True):
        if not _fits(name, value):
            raise ValueError(f"{name} holds a {type(value).__name__}")
    return storable_row(tuple(values))


def _fits(name: str, value: Any) -> bool:
    if name in BLOB_FIELDS:
        return type(value) is bytes and len(value) % array(BLOB_FIELDS[name]).itemsize == 0
    if name in (*JSON_FIELDS, "extra"):
        return value is None or (type(value) is str and _json_object(value))
    if value is None:
        return name in _NULLABLE_INT or name in _NULLABLE_TEXT
    if (
        name in _NULLABLE_INT
        or name in BOOL_FIELDS
        or name in ("target_index", "repeat", "request_index", "sent_ns", "end_ns")
    ):
        return type(value) is int
    return type(value) is str


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


def record_to_row(run_id: str, record: RequestRecord) -> tuple:
    values = []
    for name in COLUMNS:
        value = getattr(record, name)
        if name in BLOB_FIELDS:
            value = _blob(value, BLOB_FIELDS[name])
        elif name in JSON_FIELDS:
            value = None if value is None else json.dumps(value)
        elif name in BOOL_FIELDS:
            value = int(bool(value))
        values.append(value)
    extra = {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name not in COLUMNS}
    return storable_row((run_id, *values, json.dumps(extra) if extra else None))


def row_to_record(row: tuple) -> RequestRecord:
    known = {f.name for f in dataclasses.fields(RequestRecord)}
    kwargs: dict[str, Any] = {}
    for name, value in zip(COLUMNS, row, strict=False):
        if name in BLOB_FIELDS:
            value = _unblob(value, BLOB_FIELDS[name])
        elif name in JSON_FIELDS:
            value = None if value is None else json.loads(value)
        elif name in BOOL_FIELDS:
            value = bool(value)
        kwargs[name] = value
    extra = json.loads(row[len(COLUMNS)]) if row[len(COLUMNS)] else {}
    kwargs.update({k: v for k, v in extra.items() if k in known})
    return RequestRecord(**kwargs)
