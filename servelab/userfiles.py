"""Files a user names (compose, config, plans, logs, traces, workloads, model configs): the one safe reader.

A path is opened only when it is a regular file: the open is non-blocking (a FIFO's open would otherwise wait
for a writer) and the check is ``fstat`` on that descriptor, so what is checked is what is read; a device such
as ``/dev/zero`` never streams into memory. Whole-file reads stop at a size bound. JSON and YAML are parsed
within a nesting depth and a number length, and YAML aliases are counted as what they expand to, so a
"billion laughs" document is refused before anything walks it. Every refusal is one line naming the file
(``label``) and what to do, raised as the caller's ServelabError subclass (ConfigError unless told).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from servelab.errors import ConfigError, ServelabError
from servelab.inert import inert_line

MAX_DEPTH = 100  # nesting of JSON arrays/objects and YAML collections (a plan nests about 6 deep)
MAX_NUMBER_CHARS = 100  # digits of one number: beyond any count, size or ratio a servelab file holds
MAX_YAML_NODES = 100_000  # YAML values once aliases are expanded (a compose file holds a few hundred)


@dataclass(frozen=True)
class UserFile:
    """A file the user named: ``label`` says where it came from in every message (``--plan plan.json``),
    ``hint`` what to give instead, ``error`` the ServelabError raised (ConfigError: exit 2)."""

    path: Path
    label: str
    hint: str = ""
    error: type[ServelabError] = ConfigError

    @classmethod
    def named(
        cls, path: str | Path, flag: str, hint: str = "", error: type[ServelabError] = ConfigError
    ) -> UserFile:
        """The file given to ``flag`` (``--compose``), labelled ``"--compose PATH"``."""
        return cls(Path(path), f"{flag} {path}".strip(), hint, error)

    def fail(self, what: str) -> ServelabError:
        """The one-line error for this file: ``LABEL: what; hint``."""
        return self.error(inert_line(f"{self.label}: {what}" + (f"; {self.hint}" if self.hint else "")))

    def open(self) -> BinaryIO:
        """The file opened for binary reading, or the error when it is missing or not a regular file."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise self.error(inert_line(f"{self.label}: no such file")) from None
        except OSError as exc:
            raise self.fail(f"cannot read it ({exc.strerror or exc})") from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            if stat.S_ISDIR(mode):
                raise self.fail("is a directory, not a file")
            raise self.fail("not a regular file (a FIFO, device or socket)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def read_bytes(self, max_bytes: int) -> bytes:
        """The whole file, refused past ``max_bytes`` (its size checked before reading, the read bounded)."""
        with self.open() as handle:
            size = os.fstat(handle.fileno()).st_size
            try:
                data = handle.read(max_bytes + 1) if size <= max_bytes else b""
            except OSError as exc:
                raise self.fail(f"cannot read it ({exc.strerror or exc})") from None
        if size > max_bytes or len(data) > max_bytes:
            raise self.fail(f"{max(size, len(data)):,} bytes; such a file is at most {max_bytes:,}")
        return data

    def read_text(self, max_bytes: int, kind: str = "") -> str:
        """The file as UTF-8 text (a leading BOM dropped); ``kind`` names it in the error (``JSON``)."""
        try:
            return self.read_bytes(max_bytes).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise self.fail(f"not a {kind + ' ' if kind else ''}text file (not UTF-8)") from None

    def load_json(self, max_bytes: int) -> Any:
        """The file's JSON value, within the size, depth and number limits."""
        return self.parse_json(self.read_text(max_bytes, "JSON"))

    def load_yaml(self, max_bytes: int) -> Any:
        """The file's YAML document, within the size, depth, alias-expansion and number limits."""
        return self.parse_yaml(self.read_text(max_bytes, "YAML"))

    def parse_json(self, text: str | bytes, where: str = "") -> Any:
        """JSON text from this file (``where``: "line 3 " for one line of it) within ``MAX_DEPTH`` nesting and
        ``MAX_NUMBER_CHARS`` characters a number."""
        try:
            value = json.loads(text, parse_int=_number(int), parse_float=_number(float))
        except _NumberTooLong as exc:
            raise self.fail(f"{where}not a servelab JSON file: {exc}") from None
        except json.JSONDecodeError as exc:
            raise self.fail(f"{where}not JSON ({exc.msg} at line {exc.lineno})") from None
        except RecursionError:
            raise self.fail(f"{where}not a servelab JSON file: nested over {MAX_DEPTH} deep") from None
        except ValueError as exc:  # bytes that are not UTF-8
            raise self.fail(f"{where}not JSON ({str(exc).splitlines()[0]})") from None
        if _depth(value) > MAX_DEPTH:
            raise self.fail(f"{where}not a servelab JSON file: nested over {MAX_DEPTH} deep")
        return value

    def parse_yaml(self, text: str) -> Any:
        """One YAML document through ``BoundedLoader``."""
        try:
            return yaml.load(text, Loader=BoundedLoader)  # BoundedLoader is a SafeLoader
        except (YamlLimitError, _NumberTooLong) as exc:
            raise self.fail(f"not a servelab YAML file: {exc}") from None
        except yaml.YAMLError as exc:
            raise self.fail(f"not valid YAML ({_yaml_problem(exc)})") from None
        except (ValueError, RecursionError) as exc:  # a value PyYAML's constructors cannot make (a bad date)
            raise self.fail(f"not valid YAML ({str(exc).splitlines()[0] or type(exc).__name__})") from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: the problem and where, without PyYAML's multi-line snippet."""
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return " ".join(str(exc).split())


def _number(kind: type[int] | type[float]):
    def parse(text: str) -> int | float:
        if len(text) > MAX_NUMBER_CHARS:
            raise _NumberTooLong(len(text))
        return kind(text)

    return parse


class _NumberTooLong(ValueError):
    def __init__(self, chars: int) -> None:
        super().__init__(f"a number {chars:,} characters long (at most {MAX_NUMBER_CHARS})")


def _depth(value: Any) -> int:
    """How deep lists and dicts nest in ``value`` (iterative: the value may already be deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


class YamlLimitError(yaml.YAMLError):
    """A YAML document past a servelab limit (depth, expanded size, a number's length)."""


class BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with servelab's limits: nesting while composing, then the size the document
    has with every alias expanded (cycles refused), and number length while constructing."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlLimitError(f"nested over {MAX_DEPTH} deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        _expanded(node, 1, {}, set())
        return node

    def construct_yaml_int(self, node: Any) -> Any:
        if len(str(node.value)) > MAX_NUMBER_CHARS:
            raise _NumberTooLong(len(str(node.value)))
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: Any) -> Any:
        if len(str(node.value)) > MAX_NUMBER_CHARS:
            raise _NumberTooLong(len(str(node.value)))
        return super().construct_yaml_float(node)


BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
BoundedLoader.add_constructor("tag:yaml.org,2002:float", BoundedLoader.construct_yaml_float)


def _expanded(
    node: Any, depth: int, sizes: dict[int, tuple[int, int]], open_nodes: set[int]
) -> tuple[int, int]:
    """(values, height) of ``node`` with aliases expanded, memoised per node; refused past the limits."""
    key = id(node)
    if key in sizes:
        count, height = sizes[key]
    elif key in open_nodes:
        raise YamlLimitError("an alias refers to a collection that holds it (a cycle)")
    else:
        count, height = 1, 1
        if isinstance(node, yaml.SequenceNode | yaml.MappingNode):
            open_nodes.add(key)
            items = (
                node.value
                if isinstance(node, yaml.SequenceNode)
                else [n for pair in node.value for n in pair]
            )
            for child in items:
                child_count, child_height = _expanded(child, depth + 1, sizes, open_nodes)
                count += child_count
                height = max(height, child_height + 1)
                if count > MAX_YAML_NODES:
                    raise YamlLimitError(f"more than {MAX_YAML_NODES:,} values once its aliases are expanded")
            open_nodes.discard(key)
        sizes[key] = (count, height)
    if depth - 1 + height > MAX_DEPTH:
        raise YamlLimitError(f"nested over {MAX_DEPTH} deep once its aliases are expanded")
    if count > MAX_YAML_NODES:
        raise YamlLimitError(f"more than {MAX_YAML_NODES:,} values once its aliases are expanded")
    return count, height
