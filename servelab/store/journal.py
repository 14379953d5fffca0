"""The write-ahead journal: each finished request as one JSON line, appended before it reaches SQLite.

``<store>.journal/<run_id>.jsonl`` beside the store file. A line is one ``write()`` on an unbuffered file, so
it is in the OS as soon as the request is recorded and survives the writing process being killed (not a
power cut: no fsync, like the store's ``synchronous=NORMAL``). The writer holds an exclusive ``flock`` on the
file while it runs; the lock goes with the process, which is how a replayer tells a live run from a dead one.
SQLite gets the lines in journal order, so the requests stored for a run are always a prefix of its journal.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from servelab.errors import StoreError


def journal_dir(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".journal")


def journal_path(db_path: Path, run_id: str) -> Path:
    return journal_dir(db_path) / f"{run_id}.jsonl"


def encode_row(row: tuple) -> bytes:
    """A `requests` row as one line (BLOBs as ``{"b": base64}``)."""
    values = [{"b": base64.b64encode(v).decode()} if isinstance(v, bytes) else v for v in row]
    return json.dumps(values, separators=(",", ":")).encode() + b"\n"


def decode_line(line: bytes) -> tuple | None:
    """The row of one journal line; None for a line cut short by a kill."""
    try:
        values = json.loads(line)
    except ValueError:
        return None
    if not isinstance(values, list):
        return None
    return tuple(base64.b64decode(v["b"]) if isinstance(v, dict) else v for v in values)


class Journal:
    """One run's journal, open for appending and locked by this process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - held for the whole run
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise StoreError(f"cannot open the store's journal {path}: {exc}") from exc

    def append(self, row: tuple) -> None:
        try:
            self._file.write(encode_row(row))
        except OSError as exc:
            raise StoreError(f"cannot append to the store's journal {self.path}: {exc}") from exc

    def close(self, *, remove: bool) -> None:
        """Release the file; `remove` once every line is in SQLite."""
        if remove:
            self.path.unlink(missing_ok=True)
            _remove_if_empty(self.path.parent)
        self._file.close()


def orphaned(db_path: Path) -> Iterator[tuple[str, Path, list[tuple]]]:
    """(run id, path, rows) of each journal whose writer is gone (its lock is free), held locked while used."""
    folder = journal_dir(db_path)
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.jsonl")):
        try:
            file = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError:
            continue
        with file:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its bench is still running
            rows = [row for line in file if (row := decode_line(line)) is not None]
            yield path.stem, path, rows


def remove_folder_if_empty(db_path: Path) -> None:
    _remove_if_empty(journal_dir(db_path))


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not empty (another run's journal), or already gone
        os.rmdir(folder)
