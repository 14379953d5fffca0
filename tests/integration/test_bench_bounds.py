"""A compressed stream cannot get past --max-body-bytes, and keep-alive comments never hold a request past its
deadline (issue 26).

The client asks for ``Accept-Encoding: identity`` and never inflates an answer, so a gzip bomb (a small body
that inflates a thousandfold) is a ``malformed`` record after its first bytes, not gigabytes in memory; a
server that drips ``: keep-alive`` comments forever ends each request at ``--deadline``. Every request the
server received is a stored record. (Peak RSS against a 2 GiB bomb: benchmarks/bench_bombs.py.)
"""

from __future__ import annotations

import sqlite3
import zlib

from servelab.cli.app import main
from tests.answer_server import answer_server, sse_head

SENT = 4
EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'


def gzip_bomb(inflated_bytes: int) -> bytes:
    """A gzip body of SSE events that inflates to ``inflated_bytes`` (about 1,000 times its size)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = EVENT * ((1 << 20) // len(EVENT))
    parts = [compressor.compress(block) for _ in range(inflated_bytes // len(block))]
    return b"".join(parts) + compressor.flush()


def _bench(url: str, db, *extra: str) -> int:
    return main(
        [
            "bench",
            url,
            "--concurrency",
            "2",
            "--requests",
            str(SENT),
            "--warmup",
            "0",
            "--db",
            str(db),
            "--no-power",
            *extra,
        ]
    )


def _stored(db) -> tuple[list[tuple[str, str, str]], list[str]]:
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT status, error_kind, error FROM requests").fetchall()
        runs = [r for (r,) in c.execute("SELECT status FROM runs")]
    return rows, runs


def test_a_gzip_bomb_is_refused_not_inflated(capsys, tmp_path):
    bomb = gzip_bomb(256 << 20)  # 256 MiB inflated; the body limit is 1 MiB
    db = tmp_path / "runs.db"
    with answer_server(lambda serial, path: [sse_head(b"Content-Encoding: gzip\r\n"), bomb]) as server:
        code = _bench(server.url, db, "--max-body-bytes", str(1 << 20))
        posts, heads = server.posts, server.heads
    err = capsys.readouterr().err
    rows, runs = _stored(db)
    assert code == 1 and "Traceback" not in err and runs == ["finished"]
    assert posts == SENT and len(rows) == SENT
    assert all(b"\r\nAccept-Encoding: identity\r\n" in head for head in heads)
    assert {(s, k) for s, k, _ in rows} == {("error", "malformed")}
    assert all("gzip-encoded" in m and "not inflated" in m for _, _, m in rows)


def test_keep_alive_comments_forever_end_at_the_deadline(capsys, tmp_path):
    def drip(serial: int, path: str):
        yield sse_head()
        yield b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
        for _ in range(10**6):  # hours at the server's pace
            yield b": keep-alive\n\n"

    db = tmp_path / "runs.db"
    with answer_server(drip, pause_s=0.02) as server:
        code = _bench(server.url, db, "--deadline", "1")
        posts = server.posts
    rows, runs = _stored(db)
    assert code == 1 and "Traceback" not in capsys.readouterr().err
    assert posts == SENT and len(rows) == SENT and runs == ["finished"]
    assert {(s, k) for s, k, _ in rows} == {("error", "deadline")}
