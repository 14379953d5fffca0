"""RequestRecord <-> `requests` row. Chunk timing arrays travel as compact BLOBs (``array.tobytes()``).

Fields of RequestRecord that have no column of their own (added later with defaults) go to the `extra` JSON
column, so the store keeps every field without a migration; unknown keys read back are ignored.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from array import array
from typing import Any

from servelab.bench.records import RequestRecord

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
    return (run_id, *values, json.dumps(extra) if extra else None)


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
