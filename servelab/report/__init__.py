"""`servelab report`: the bill — stored runs, plan, doctor and spec rendered as HTML, Markdown or terminal.

Layers: `levels` (figures from records) → `data` (Bill) → `tables`/`plots`/`verdict` → `page` (sections)
→ `html` / `markdown` / `terminal`. `compare` and `export` read the same figures for the runs commands.
"""

from __future__ import annotations

import time

from servelab.report.advice import AdviceDoc
from servelab.report.data import Bill, assemble
from servelab.report.html import render_html
from servelab.report.markdown import render_markdown, standalone_svgs
from servelab.report.page import build_page

FORMATS = ("html", "md")
TITLE = "servelab — the bill"


def render_report(
    bill: Bill,
    fmt: str,
    *,
    generated: str | None = None,
    plot_dir: str | None = None,
    advised: AdviceDoc | None = None,
) -> tuple[str, dict[str, str]]:
    """The bill as an HTML page (`fmt="html"`) or Markdown (`fmt="md"`), plus files to write beside it.

    HTML is one self-contained file (no extra files). Markdown links its plots as SVG files under
    `plot_dir` (relative to the Markdown file); without `plot_dir` it names them instead.
    """
    generated = generated or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if fmt == "md":
        sections = build_page(bill, with_plots=plot_dir is not None, advised=advised)
        text = render_markdown(sections, title=TITLE, generated=generated, plot_dir=plot_dir)
        files = (
            {f"{plot_dir}/{name}": body for name, body in standalone_svgs(sections).items()}
            if plot_dir
            else {}
        )
        return text, files
    return render_html(build_page(bill, advised=advised), title=TITLE, generated=generated), {}


__all__ = ["FORMATS", "TITLE", "Bill", "assemble", "render_report"]
