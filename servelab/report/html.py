"""The bill as one self-contained HTML page, built as an ElementTree and serialised (never concatenated).

Every string — model names, URLs, error texts a server returned — is a text node or attribute value of the
tree, so the serialiser escapes it; control characters, which no escape makes valid in HTML or XML, are
replaced by visible escapes (servelab/inert.py) in every text node and attribute just before serialising. The stylesheet ships in the package (``assets/report.css``, read with
importlib.resources); plots are inline SVG; nothing is fetched from the network.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from importlib import resources

from servelab import __version__
from servelab.inert import inert_line, inert_text
from servelab.report.page import Items, Para, Section, code_spans
from servelab.report.plots import Plot
from servelab.report.tables import TableData, is_numeric


def stylesheet() -> str:
    return resources.files("servelab.report").joinpath("assets/report.css").read_text(encoding="utf-8")


def _el(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    node = ET.SubElement(parent, tag, {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()})
    node.text = text
    return node


def _table(parent: ET.Element, table: TableData) -> None:
    wrap = _el(parent, "div", class_="table-wrap")
    node = _el(wrap, "table", id=f"table-{table.key}")
    _el(node, "caption", table.title)
    text_columns = [
        i == 0 or not all(is_numeric(row[i]) for row in table.rows) for i in range(len(table.headers))
    ]
    head = _el(_el(node, "thead"), "tr")
    for header, is_text in zip(table.headers, text_columns, strict=True):
        _el(head, "th", header, scope="col", **({"class_": "text"} if is_text else {}))
    body = _el(node, "tbody")
    for row in table.rows:
        tr = _el(body, "tr")
        for cell, is_text in zip(row, text_columns, strict=True):
            css = {"critical": "severity-critical", "NO": "invalid"}.get(cell) or ("text" if is_text else "")
            _el(tr, "td", cell, **({"class_": css} if css else {}))


def _plot(parent: ET.Element, plot: Plot) -> None:
    if plot.svg is None:  # not reached: page.py places only drawn plots, a missing one as a note
        return
    figure = _el(parent, "figure", data_plot=plot.key)
    figure.append(plot.svg)
    _el(figure, "figcaption", plot.title)


def _sentence(node: ET.Element, text: str) -> ET.Element:
    """``text`` into ``node``, its backtick spans as <code> (ElementTree escapes every piece)."""
    last: ET.Element | None = None
    for is_code, piece in code_spans(text):
        if is_code:
            last = _el(node, "code", piece)
        elif last is None:
            node.text = (node.text or "") + piece
        else:
            last.tail = (last.tail or "") + piece
    return node


def _block(parent: ET.Element, block: object) -> None:
    if isinstance(block, Para):
        _sentence(_el(parent, "p", class_=block.kind), block.text)
    elif isinstance(block, Items):
        ul = _el(parent, "ul", class_="verdicts")
        for item in block.items:
            _sentence(_el(ul, "li"), item)
    elif isinstance(block, TableData):
        _table(parent, block)
    elif isinstance(block, Plot):
        _plot(parent, block)


def _head(html: ET.Element, title: str) -> None:
    head = _el(html, "head")
    _el(head, "meta", charset="utf-8")
    _el(head, "meta", name="viewport", content="width=device-width, initial-scale=1")
    _el(head, "meta", name="color-scheme", content="light dark")
    _el(head, "meta", name="generator", content=f"servelab {__version__}")
    _el(head, "title", title)
    _el(head, "style", stylesheet())


def render_html(sections: tuple[Section, ...], *, title: str, generated: str) -> str:
    """The page as a complete HTML document."""
    html = ET.Element("html", lang="en")
    _head(html, title)
    body = _el(html, "body")
    header = _el(body, "header")
    swap = _el(header, "label", None, class_="theme", title="swap the light and dark theme")
    _el(swap, "input", type="checkbox", id="theme-swap")
    _el(swap, "span", " other theme")
    _el(header, "h1", title)
    _el(header, "p", f"Generated {generated} by servelab {__version__}.", class_="meta")
    main = _el(body, "main")
    for section in sections:
        node = _el(main, "section", id=section.key)
        _el(node, "h2", section.title)
        for block in section.blocks:
            _block(node, block)
    _make_inert(html)
    return "<!DOCTYPE html>\n" + ET.tostring(html, encoding="unicode", method="html") + "\n"


def _make_inert(root: ET.Element) -> None:
    for node in root.iter():
        node.text = None if node.text is None else inert_text(node.text)
        node.tail = None if node.tail is None else inert_text(node.tail)
        for key, value in node.attrib.items():
            node.attrib[key] = inert_line(value)
