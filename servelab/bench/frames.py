"""Messages between the coordinator and its local worker processes: a 4-byte length, then a pickle.

Only over a socketpair the coordinator made for a process it started (pickle is never read from the
network: Ray workers talk through Ray's own calls, bench/ray_workers.py).
"""

from __future__ import annotations

import asyncio
import pickle
import struct

_HEADER = struct.Struct(">I")


def encode(message: tuple) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


async def read(reader: asyncio.StreamReader) -> tuple:
    """The next message; `asyncio.IncompleteReadError` when the other end is gone (even mid-message)."""
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return pickle.loads(await reader.readexactly(size))
