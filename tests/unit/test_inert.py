"""servelab/inert.py: outside strings keep their text and lose their power over terminals and pages."""

from __future__ import annotations

import io

from rich.text import Text

from servelab.cli.output import InertConsole
from servelab.inert import inert_line, inert_text, is_inert

OSC8 = "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07"


def test_controls_become_visible_escapes_and_printable_text_stays():
    assert inert_line("m\x1b[31mred\x00\x07\x7f\x9b") == "m\\x1b[31mred\\x00\\x07\\x7f\\x9b"
    assert inert_line(OSC8) == "\\x1b]8;;https://evil.example\\x07click\\x1b]8;;\\x07"
    assert inert_line("Qwen3.5-27B — [red]é 模型 $x$") == "Qwen3.5-27B — [red]é 模型 $x$"


def test_bidi_overrides_surrogates_and_xml_nonchars_are_escaped():
    assert inert_line("a\u202eb\u2066c\ud800d\ufffe") == "a\\u202eb\\u2066c\\ud800d\\ufffe"


def test_text_keeps_newlines_and_tabs_a_line_does_not():
    assert inert_text("one\n\ttwo\r") == "one\n\ttwo\\x0d"
    assert inert_line("one\n\ttwo") == "one\\x0a\\x09two"
    assert is_inert(inert_text(OSC8 + "\x00\n")) and not is_inert(OSC8)


def _printed(*objects) -> str:
    buffer = io.StringIO()
    InertConsole(file=buffer, width=200, force_terminal=True, color_system="truecolor").print(*objects)
    return buffer.getvalue()


def test_the_console_prints_strings_and_text_inert_and_ignores_markup_unless_asked():
    out = _printed(f"model {OSC8} [red]x[/red] :smile:", Text("t\x1b[2J\x00"))
    assert "\x1b]" not in out and "\x07" not in out and "\x00" not in out and "\x1b[2J" not in out
    assert "\\x1b]8;;https://evil.example\\x07click" in out and "t\\x1b[2J\\x00" in out
    assert "[red]x[/red] :smile:" in out  # literal: no markup, no emoji


def test_asked_for_markup_still_styles_and_the_console_keeps_its_own_escapes():
    buffer = io.StringIO()
    console = InertConsole(file=buffer, force_terminal=True, color_system="truecolor")
    console.print("[red]ok[/red]", markup=True)
    out = buffer.getvalue()
    assert out.startswith("\x1b[") and "ok" in out and "[red]" not in out


INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u061c\u200e\u200f\u202a\u202e\u2066\u2069\u2028\u2029"


def test_invisible_and_bidi_marks_and_line_separators_are_escaped():
    shown = (
        "\\u200b\\u200c\\u200d\\u2060\\ufeff\\u061c\\u200e\\u200f\\u202a\\u202e\\u2066\\u2069\\u2028\\u2029"
    )
    assert inert_line(f"Qwen{INVISIBLE}3") == f"Qwen{shown}3"
    assert inert_text(f"a\n{INVISIBLE}") == f"a\n{shown}"
    assert not is_inert("Llama\u200b") and not is_inert("\ufeffLlama") and is_inert("Llama 模型 é")
    printed = _printed("model Qwen\u200b3 \u2028x")
    assert "\u200b" not in printed and "\u2028" not in printed and "Qwen\\u200b3 \\u2028x" in printed
