"""Opening model files for reading: regular files only, so a FIFO or a device never blocks or streams forever
(servelab/userfiles.py, the one reader of files a user names, with ModelFormatError)."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from servelab.errors import ModelFormatError
from servelab.userfiles import UserFile


def _model_file(path: Path) -> UserFile:
    return UserFile(Path(path), str(path), "give a model file", ModelFormatError)


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for binary reading, or ModelFormatError when it is missing or not a regular file."""
    return _model_file(path).open()


def read_regular(path: Path, max_bytes: int, what: str) -> bytes:
    """The whole of a small regular file (a config or index JSON), refused past `max_bytes`."""
    return UserFile(Path(path), f"{path} ({what})", error=ModelFormatError).read_bytes(max_bytes)


def read_json(path: Path, max_bytes: int, what: str) -> object:
    """The JSON value of a small model file (config.json, an index), within userfiles' depth and number limits."""
    source = UserFile(Path(path), f"{path} ({what})", error=ModelFormatError)
    return source.parse_json(source.read_text(max_bytes, "JSON"))
