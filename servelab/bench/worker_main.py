"""A local worker process of `servelab bench --workers N`: ``python -m servelab.bench.worker_main FD [CPU]``.

FD is its end of a socketpair with the coordinator; CPU, when given, the one CPU it is pinned to. It ignores
SIGINT (Ctrl-C reaches the whole process group: the coordinator decides, and says "stop"), and ends when the
coordinator says "quit" or its end of the socket closes (the coordinator died): no orphan keeps sending.
Every HEARTBEAT_S it says "alive", so the coordinator can tell a worker that stopped answering (SIGSTOP, a hung
loop) from one that is busy (fleet.SILENT_S).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys

from servelab.bench import frames
from servelab.bench.worker_core import WorkerCore

HEARTBEAT_S = 1.0


async def serve(sock: socket.socket, cpu: int | None) -> None:
    reader, writer = await asyncio.open_connection(sock=sock)
    core = WorkerCore(lambda message: writer.write(frames.encode(message)))
    writer.write(frames.encode(("hello", os.getpid(), cpu, os.nice(0))))
    heartbeat = asyncio.ensure_future(_heartbeat(writer))
    try:
        while True:
            message = await frames.read(reader)
            if message[0] == "quit":
                break
            core.handle(message)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # the coordinator is gone
    heartbeat.cancel()
    core.stop()
    if core.level_task is not None:
        await asyncio.gather(core.level_task, return_exceptions=True)
    writer.close()


async def _heartbeat(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, RuntimeError):
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            writer.write(frames.encode(("alive",)))


def normal_priority() -> None:
    """Back to niceness 0 where we may: Ray starts its workers at nice 15 (its ``worker_niceness``), which on a
    busy node leaves a load generator's stamps waiting behind every other process. Without the right to
    (CAP_SYS_NICE) the niceness stays, is reported in the level (``client.workers[].nice``), and a starved
    worker shows as late wake-ups, which mark the level."""
    if os.nice(0) > 0:
        with contextlib.suppress(PermissionError):
            os.setpriority(os.PRIO_PROCESS, 0, 0)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    normal_priority()
    fd = int(argv[0])
    cpu = int(argv[1]) if len(argv) > 1 else None
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    sock = socket.socket(fileno=fd)
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        asyncio.run(serve(sock, cpu))
    else:
        uvloop.run(serve(sock, cpu))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
