"""Strings from outside made inert: control characters shown as visible escapes, never obeyed.

Model names, GGUF ``general.name``, run names and anything a server says may hold terminal escapes (ESC,
OSC 8 hyperlinks, BEL), NUL or bidi overrides. Every terminal writer and every report format passes such
text through here: each character that would act instead of print (C0 and C1 controls, DEL, bidi
marks/embeddings/overrides/isolates, zero-width characters and the BOM, the line/paragraph separators, lone
surrogates, the XML non-characters U+FFFE/U+FFFF) becomes its escape
``\\x1b``/``\\u202e``, so the text is still readable and nothing is lost silently. ``inert_text`` keeps
newlines and tabs (multi-line messages); ``inert_line`` escapes them too (a name stays on one line).
"""

from __future__ import annotations

import re

# bidi marks, embeddings, overrides and isolates; zero-width characters, the word joiner and the BOM (invisible);
# the line and paragraph separators (a line break to some renderers)
_INVISIBLE = "\u061c\u200b-\u200f\u2028-\u2029\u202a-\u202e\u2060\u2066-\u2069\ufeff"
_ACTIVE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}\ud800-\udfff\ufffe\uffff]")
_ACTIVE_IN_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}\ud800-\udfff\ufffe\uffff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert_text(text: str) -> str:
    """``text`` with every active character escaped; newlines and tabs kept."""
    return _ACTIVE.sub(_escape, text)


def inert_line(text: str) -> str:
    """``text`` on one line with every active character escaped, newlines and tabs included."""
    return _ACTIVE_IN_LINE.sub(_escape, text)


def is_inert(text: str) -> bool:
    """True when ``text`` holds nothing ``inert_text`` would escape."""
    return _ACTIVE.search(text) is None
