"""Messages between the coordinator and its local worker processes: a 4-byte length, then a pickle.

Only over a socketpair the coordinator made for a process it started (pickle is never read from the
network: Ray workers talk through Ray's own calls, bench/ray_workers.py).
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct

_HEADER = struct.Struct(">I")


def encode(message: tuple) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


async def read(reader: asyncio.StreamReader) -> tuple:
    """The next message; `asyncio.IncompleteReadError` when the other end is gone (even mid-message)."""
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return pickle.loads(await reader.readexactly(size))


def read_body_sync(sock: socket.socket) -> bytes | None:
    """The next message's pickled body from a blocking socket; None when the other end is gone."""
    header = _recv_exactly(sock, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    return _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        try:
            chunk = sock.recv(min(left, 1 << 20))
        except OSError:
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
