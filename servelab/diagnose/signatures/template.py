"""Log-line templates: a small pattern language that matches in linear time, with no regex backtracking.

A template is literal text with typed captures, e.g. ``n_ctx_slot = {n_ctx_slot:int}, kv_unified``:

    {name:int}    digits (after optional spaces: printf's %5d pads)
    {name:num}    a decimal number: digits, '.', '+', '-' (after optional spaces)
    {name:count}  digits and thousands commas, e.g. 10,240
    {name:name}   an identifier: letters, digits, '_', '.', ':', '/', '-'
    {name:word}   non-space characters
    {name:list}   anything but ']' (the inside of a [...] list)
    {name:rest}   the rest of the line (only as the last part)
    {{ and }}     literal braces

The template must start with a literal of at least 4 characters (the prefilter). Captures are
greedy and never give back characters (possessive), so the literal after a capture must start with
a character the capture cannot take; two captures may not touch. Matching finds each occurrence of
the first literal with ``str.find`` and memoises (part, position), so each position is examined a
bounded number of times: the work is linear in the line length, whatever the line holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CLASS_PATTERNS = {
    "int": r" *[0-9]+",
    "num": r" *[-+0-9.]+",
    "count": r"[0-9,]+",
    "name": r"[A-Za-z0-9_.:/-]+",
    "word": r"[^\s]+",
    "list": r"[^\]]+",
}
_CLASS_CHARS = {
    "int": lambda ch: ch.isascii() and ch.isdigit(),
    "num": lambda ch: ch in "+-." or (ch.isascii() and ch.isdigit()),
    "count": lambda ch: ch == "," or (ch.isascii() and ch.isdigit()),
    "name": lambda ch: ch in "_.:/-" or (ch.isascii() and ch.isalnum()),
    "word": lambda ch: not ch.isspace(),
    "list": lambda ch: ch != "]",
}
KINDS = (*_CLASS_PATTERNS, "rest")
MIN_PREFIX_CHARS = 4
_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*):([a-z]+)\}|[{}]")


class TemplateError(ValueError):
    """A template outside the safe subset; the message says what to change."""


@dataclass(frozen=True)
class Capture:
    name: str
    kind: str


@dataclass(frozen=True)
class Template:
    """A compiled template: alternating literals and captures, starting with a literal."""

    source: str
    parts: tuple[str | Capture, ...]
    literals: tuple[str, ...] = ()  # every literal, longest first: the substring prefilter

    @property
    def capture_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parts if isinstance(p, Capture))

    def match(self, line: str) -> dict[str, str] | None:
        """The captures of the first match in ``line``, or None. Linear in ``len(line)``."""
        for literal in self.literals:
            if literal not in line:
                return None
        head = self.parts[0]
        if not isinstance(head, str):  # not reached: _tokenize starts every template with a literal
            return None
        state = _MatchState(line)
        start = line.find(head)
        while start >= 0:
            found = state.match_from(self.parts, 1, start + len(head))
            if found is not None:
                return found
            start = line.find(head, start + 1)
        return None


def compile_template(source: str) -> Template:
    """Parse and validate ``source``; TemplateError names the problem."""
    parts = _tokenize(source)
    _validate(parts)
    literals = tuple(sorted((p for p in parts if isinstance(p, str) and p), key=len, reverse=True))
    return Template(source=source, parts=tuple(parts), literals=literals)


def _tokenize(source: str) -> list[str | Capture]:
    parts: list[str | Capture] = [""]
    pos = 0
    for token in _TOKEN.finditer(source):
        _append_literal(parts, source[pos : token.start()])
        pos = token.end()
        text = token.group(0)
        if text in ("{{", "}}"):
            _append_literal(parts, text[0])
        elif token.group(1) is None:
            raise TemplateError(
                f"lone {text!r} at offset {token.start()}: write {text * 2!r} for a literal brace"
            )
        elif token.group(2) not in KINDS:
            raise TemplateError(f"unknown capture kind {token.group(2)!r}; valid kinds: {', '.join(KINDS)}")
        else:
            parts.append(Capture(token.group(1), token.group(2)))
    _append_literal(parts, source[pos:])
    return parts


def _append_literal(parts: list[str | Capture], text: str) -> None:
    if not text:
        return
    if isinstance(parts[-1], str):
        parts[-1] += text
    else:
        parts.append(text)


def _validate(parts: list[str | Capture]) -> None:
    if not isinstance(parts[0], str) or len(parts[0]) < MIN_PREFIX_CHARS:
        raise TemplateError(f"a template must start with a literal of at least {MIN_PREFIX_CHARS} characters")
    names = [p.name for p in parts if isinstance(p, Capture)]
    if len(names) != len(set(names)):
        raise TemplateError("a capture name is used twice")
    for index, part in enumerate(parts):
        if not isinstance(part, Capture):
            continue
        following = parts[index + 1] if index + 1 < len(parts) else None
        if part.kind == "rest":
            if following is not None:
                raise TemplateError(f"{{{part.name}:rest}} must be the last part of the template")
        elif isinstance(following, Capture):
            raise TemplateError(
                f"captures {{{part.name}}} and {{{following.name}}} touch: put literal text between them"
            )
        elif following is not None and _CLASS_CHARS[part.kind](following[0]):
            raise TemplateError(
                f"{{{part.name}:{part.kind}}} would swallow the {following[0]!r} that follows it: "
                "end it with a character it cannot take"
            )


_COMPILED_CLASSES = {kind: re.compile(pattern) for kind, pattern in _CLASS_PATTERNS.items()}


class _MatchState:
    """Per-line memo: tail results by (part index, position) and the last maximal run of each class.

    Greedy class runs that start inside one run all end where it ends, so a run is scanned once and
    each (part, position) pair is matched once: the total work stays linear in the line length.
    """

    def __init__(self, line: str) -> None:
        self.line = line
        self.memo: dict[tuple[int, int], dict[str, str] | None] = {}
        self.runs: dict[str, tuple[int, int]] = {}

    def run_end(self, kind: str, pos: int) -> int:
        """End of the run of ``kind`` characters starting at ``pos`` (``pos`` itself when none)."""
        start, end = self.runs.get(kind, (-1, -1))
        if start <= pos < end:
            return end
        run = _COMPILED_CLASSES[kind].match(self.line, pos)
        end = run.end() if run is not None else pos
        self.runs[kind] = (pos, end)
        return end

    def match_from(self, parts: tuple[str | Capture, ...], index: int, pos: int) -> dict[str, str] | None:
        if index == len(parts):
            return {}
        key = (index, pos)
        if key not in self.memo:
            self.memo[key] = self._match_part(parts, index, pos)
        return self.memo[key]

    def _match_part(self, parts: tuple[str | Capture, ...], index: int, pos: int) -> dict[str, str] | None:
        part = parts[index]
        if isinstance(part, str):
            return (
                self.match_from(parts, index + 1, pos + len(part))
                if self.line.startswith(part, pos)
                else None
            )
        if part.kind == "rest":
            return {part.name: self.line[pos:].strip()}
        end = self.run_end(part.kind, pos)
        tail = self.match_from(parts, index + 1, end) if end > pos else None
        return None if tail is None else {part.name: self.line[pos:end].strip(), **tail}
