"""Opening model files for reading: regular files only, so a FIFO or a device never blocks or streams forever."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from servelab.errors import ModelFormatError


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for binary reading, or ModelFormatError when it is missing or not a regular file.

    The file is opened non-blocking (a FIFO's open would otherwise wait for a writer) and checked with fstat on
    that descriptor, so what is checked is what is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ModelFormatError(f"cannot read {path}: {exc.strerror or exc}") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ModelFormatError(f"{path} is not a regular file (a FIFO, device or socket); give a model file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path: Path, max_bytes: int, what: str) -> bytes:
    """The whole of a small regular file (a config or index JSON), refused past `max_bytes`."""
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise ModelFormatError(f"{path} is {size} bytes; a {what} is at most {max_bytes}")
        try:
            return handle.read(max_bytes + 1)
        except OSError as exc:
            raise ModelFormatError(f"cannot read {path}: {exc.strerror or exc}") from exc
