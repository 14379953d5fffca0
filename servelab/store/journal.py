"""The write-ahead journal: each finished request as one JSON line, appended before it reaches SQLite.

``<store>.journal/<run_id>.jsonl`` beside the store file. A line is one ``write()`` on an unbuffered file, so
it is in the OS as soon as the request is recorded and survives the writing process being killed (not a
power cut: no fsync, like the store's ``synchronous=NORMAL``). The writer holds an exclusive ``flock`` on the
file while it runs; the lock goes with the process, which is how a replayer tells a live run from a dead one.
SQLite gets the lines in journal order, so the requests stored for a run are always a prefix of its journal.

A journal is read back as hostile input (a crash or a disk error can leave any bytes in it): each line is
checked (JSON, a list of the row's values, valid base64, each column's type: `codec.checked_row`); a line that
fails is set aside, as it was, in ``<run_id>.rejected`` beside the journal, and every other line keeps its
place, so the lines past the stored prefix are still exactly the requests missing. Only regular files are read
(a FIFO or a device named like a journal is left alone, with a warning), a line at most MAX_LINE_BYTES.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from servelab.errors import StoreError
from servelab.store import codec

MAX_LINE_BYTES = 64 << 20  # one request's row: a 1M-token answer's stamps are about 16 MB of base64
_log = logging.getLogger(__name__)


def journal_dir(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".journal")


def journal_path(db_path: Path, run_id: str) -> Path:
    return journal_dir(db_path) / f"{run_id}.jsonl"


def rejected_path(db_path: Path, run_id: str) -> Path:
    """Where the lines of a run's journal that could not be read are kept aside."""
    return journal_dir(db_path) / f"{run_id}.rejected"


def encode_row(row: tuple) -> bytes:
    """A `requests` row as one line (BLOBs as ``{"b": base64}``)."""
    values = [{"b": base64.b64encode(v).decode()} if isinstance(v, bytes) else v for v in row]
    return json.dumps(values, separators=(",", ":")).encode() + b"\n"


def decode_line(line: bytes) -> tuple | None:
    """The row of one journal line; None for a line that is not one (cut short by a kill, damaged)."""
    try:
        return read_line(line)
    except ValueError:
        return None


def read_line(line: bytes) -> tuple:
    """The row of one journal line; ValueError saying why it is not one."""
    try:
        values = json.loads(line)
    except RecursionError:
        raise ValueError("nested too deep") from None
    if not isinstance(values, list):
        raise ValueError(f"a JSON {type(values).__name__}, not a list of values")
    return codec.checked_row([_value(v) for v in values])


def _value(value: object) -> object:
    if isinstance(value, dict):
        if list(value) != ["b"] or not isinstance(value["b"], str):
            raise ValueError("an object that is not a BLOB")
        return base64.b64decode(value["b"], validate=True)  # binascii.Error is a ValueError
    if isinstance(value, list):
        raise ValueError("a list among the values")
    return value


@dataclass
class Orphan:
    """A journal whose writer is gone: its readable rows by line number, and the lines that were not."""

    run_id: str
    path: Path
    rows: list[tuple[int, tuple]] = field(default_factory=list)
    rejected: list[bytes] = field(default_factory=list)

    def set_aside(self, db_path: Path) -> Path | None:
        """Append the rejected lines to ``<run_id>.rejected``; its path, or None when there were none."""
        if not self.rejected:
            return None
        target = rejected_path(db_path, self.run_id)
        try:
            with open(target, "ab") as file:
                file.writelines(line if line.endswith(b"\n") else line + b"\n" for line in self.rejected)
        except OSError as exc:
            raise StoreError(
                f"cannot keep the unreadable lines of {self.path} aside in {target}: {exc}"
            ) from exc
        return target


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


def orphaned(db_path: Path) -> Iterator[Orphan]:
    """Each journal whose writer is gone (its lock is free), read line by line, held locked while used.

    A last line without its newline is a write cut short by a kill: kept when it reads, else dropped."""
    folder = journal_dir(db_path)
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.jsonl")):
        file = _open_regular(path)
        if file is None:
            continue
        with file:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its bench is still running
            yield _read_orphan(path, file)


def _open_regular(path: Path) -> BinaryIO | None:
    """The journal open for reading, or None: gone, unreadable, or not a regular file (never a FIFO's wait)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        _log.warning(f"{path} is not a regular file, so not a journal servelab wrote; left alone")
        return None
    return os.fdopen(fd, "rb")


def _lines(file: BinaryIO) -> Iterator[bytes]:
    """The file's lines, each at most MAX_LINE_BYTES: a longer one comes as its start and a note (unreadable)."""
    while line := file.readline(MAX_LINE_BYTES + 1):
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (more := file.readline(1 << 20)) and not more.endswith(b"\n"):
                pass
            yield line[:1024] + f" ... (cut: a line over {MAX_LINE_BYTES} bytes)\n".encode()
            continue
        yield line


def _read_orphan(path: Path, file: BinaryIO) -> Orphan:
    orphan = Orphan(path.stem, path)
    for number, line in enumerate(_lines(file)):
        try:
            row = read_line(line)
            if row[0] != orphan.run_id:
                raise ValueError("another run's row")
            orphan.rows.append((number, row))
        except ValueError:
            if line.endswith(b"\n"):  # a whole line that is not a row; a cut last one is a kill's
                orphan.rejected.append(line)
    return orphan


def remove_folder_if_empty(db_path: Path) -> None:
    _remove_if_empty(journal_dir(db_path))


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not empty (another run's journal), or already gone
        os.rmdir(folder)
