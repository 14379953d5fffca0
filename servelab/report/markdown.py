"""The bill as Markdown: the same sections as the HTML, tables as pipe tables, plots referenced by title.

Every string is escaped for Markdown and for the HTML that Markdown renderers pass through, so a model
name such as ``<script>`` stays text, and control characters become visible escapes (servelab/inert.py).
"""

from __future__ import annotations

import copy
import html
import xml.etree.ElementTree as ET

from servelab import __version__
from servelab.inert import inert_line
from servelab.report.page import Items, Para, Section, code_spans
from servelab.report.plots import Plot
from servelab.report.tables import TableData, is_numeric

MARKDOWN_SPECIALS = "\\`*_[]|#<>!"


def md_text(text: str) -> str:
    """`text` as literal Markdown: HTML-escaped, Markdown punctuation backslash-escaped, on one line."""
    return _escape(inert_line(" ".join(str(text).split())))


def _escape(text: str) -> str:
    return "".join("\\" + c if c in MARKDOWN_SPECIALS else c for c in html.escape(text, quote=False))


def md_sentence(text: str) -> str:
    """A sentence: backtick spans as code spans (their content shown literally by any renderer), the rest
    escaped by ``md_text``."""
    one_line = inert_line(" ".join(str(text).split()))
    return "".join(f"`{piece}`" if is_code else _escape(piece) for is_code, piece in code_spans(one_line))


def _table(table: TableData) -> list[str]:
    lines = [f"**{md_text(table.title)}**", ""]
    lines.append("| " + " | ".join(md_text(h) for h in table.headers) + " |")
    numeric = [all(is_numeric(row[i]) for row in table.rows) for i in range(len(table.headers))]
    lines.append("|" + "|".join("--:" if n and i else ":--" for i, n in enumerate(numeric)) + "|")
    lines += ["| " + " | ".join(md_text(c) for c in row) + " |" for row in table.rows]
    return [*lines, ""]


def _block(block: object, plot_dir: str | None) -> list[str]:
    if isinstance(block, Para):
        prefix = {"note": "> ℹ️ ", "warning": "> ⚠️ **Warning:** "}.get(block.kind, "")
        return [prefix + md_sentence(block.text), ""]
    if isinstance(block, Items):
        return [*(f"- {md_sentence(item)}" for item in block.items), ""]
    if isinstance(block, TableData):
        return _table(block)
    if isinstance(block, Plot) and plot_dir is not None:
        return [f"![{md_text(block.title)}]({plot_dir}/{block.key}.svg)", ""]
    if isinstance(block, Plot):
        return [f"_Plot: {md_text(block.title)} (in the HTML report)._", ""]
    return []


def render_markdown(
    sections: tuple[Section, ...], *, title: str, generated: str, plot_dir: str | None = None
) -> str:
    """The Markdown document; plots become image links ``plot_dir/<key>.svg`` (see `standalone_svgs`)."""
    lines = [f"# {md_text(title)}", "", f"_Generated {md_text(generated)} by servelab {__version__}._", ""]
    for section in sections:
        lines += [f"## {md_text(section.title)}", ""]
        for block in section.blocks:
            lines += _block(block, plot_dir)
    return "\n".join(lines).rstrip() + "\n"


def standalone_svgs(sections: tuple[Section, ...]) -> dict[str, str]:
    """Each plot as a standalone SVG file body, keyed by file name; mid-grey ink reads on light and dark."""
    files = {}
    for block in (b for s in sections for b in s.blocks if isinstance(b, Plot)):
        if block.svg is None:
            continue
        root = copy.deepcopy(block.svg)
        root.set("xmlns", "http://www.w3.org/2000/svg")
        root.set("color", "#6b7280")
        files[f"{block.key}.svg"] = ET.tostring(root, encoding="unicode")
    return files
