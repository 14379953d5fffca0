"""Matplotlib figures as inline SVG elements that follow the page's colours (light and dark mode).

Text, axes and ticks are drawn in a placeholder colour that becomes ``currentColor``, the background is
transparent, and text stays text (``svg.fonttype: none``), so the CSS ``color`` of the page decides how
the plot looks. The SVG is parsed into an ElementTree element, never pasted into HTML as a string.
"""

from __future__ import annotations

import io
import itertools
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from servelab.inert import inert_line

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

# matplotlib is imported where a plot is drawn, not here: every servelab command would pay ~0.35 s at start-up.

INK = "#0b0c0d"  # placeholder replaced by currentColor
SERIES = ("#3b82f6", "#f97316", "#10b981", "#e11d48", "#a855f7", "#eab308", "#06b6d4", "#64748b")
STYLE: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "servelab",  # stable ids: the same data gives the same SVG
    "text.color": INK,
    "axes.edgecolor": INK,
    "axes.labelcolor": INK,
    "xtick.color": INK,
    "ytick.color": INK,
    "axes.facecolor": "none",
    "figure.facecolor": "none",
    "savefig.transparent": True,
    "grid.color": "#8a8f98",
    "grid.alpha": 0.35,
    "legend.frameon": False,
    "font.size": 9,
    "text.usetex": False,
}
SVG_NS = "{http://www.w3.org/2000/svg}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"


def styled() -> AbstractContextManager:
    """The plot style; draw inside it (``with styled(): …``) so axes pick up the transparent colours."""
    import matplotlib
    from matplotlib.rcsetup import cycler

    return matplotlib.rc_context({**STYLE, "axes.prop_cycle": cycler(color=SERIES)})


def new_figure(width_in: float = 6.4, height_in: float = 3.4) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), layout="constrained")


def plain(text: str) -> str:
    """A label shown literally: no mathtext from a stray ``$`` in a model name, no control character that
    would make the SVG invalid XML (servelab/inert.py)."""
    return inert_line(text).replace("\\", "\\\\").replace("$", r"\$")


def _strip_namespaces(element: ET.Element) -> None:
    for node in element.iter():
        node.tag = node.tag.removeprefix(SVG_NS)
        if XLINK_HREF in node.attrib:
            node.attrib["href"] = node.attrib.pop(XLINK_HREF)


def _prefix_ids(root: ET.Element, prefix: str) -> None:
    """Make every id unique to this plot (several SVGs share one HTML document) and fix the references."""
    ids = [node.attrib["id"] for node in root.iter() if "id" in node.attrib]
    rename = {old: f"{prefix}-{old}" for old in ids}
    pattern = re.compile(r"url\(#([^)]+)\)")
    for node in root.iter():
        for key, value in list(node.attrib.items()):
            if key == "id":
                node.attrib[key] = rename[value]
            elif key == "href" and value.startswith("#") and value[1:] in rename:
                node.attrib[key] = "#" + rename[value[1:]]
            elif "url(#" in value:
                node.attrib[key] = pattern.sub(lambda m: f"url(#{rename.get(m.group(1), m.group(1))})", value)


@dataclass
class Marks:
    """What the page needs to know about a figure's artists, applied to its SVG by `figure_svg`: each tagged
    artist's role (``data-role``: "point", "legend", "axis-label", "series") and its tooltips — a native
    ``<title>`` per marker of a line or scatter (one text per point, in data order), or one for a whole
    series or bar. Tick labels are marked as axis labels without tagging."""

    roles: dict[str, str] = field(default_factory=dict)  # gid -> role
    tips: dict[str, tuple[str, ...]] = field(default_factory=dict)  # gid -> tooltip texts
    _ids: itertools.count = field(default_factory=itertools.count)

    def tag(self, artist: Any, role: str, tips: Sequence[str] = ()) -> Any:
        gid = f"slmark{next(self._ids)}"
        artist.set_gid(gid)
        self.roles[gid] = role
        if tips:
            self.tips[gid] = tuple("\n".join(inert_line(line) for line in t.split("\n")) for t in tips)
        return artist

    def points(self, artist: Any, tips: Sequence[str]) -> Any:
        """Markers of a line or scatter, one tooltip per point."""
        return self.tag(artist, "points", tips)


TICK_ID = re.compile(r"^[xy]tick_\d+$")


def _titled(node: ET.Element, text: str) -> None:
    title = ET.Element("title")
    title.text = text
    node.insert(0, title)


def _apply_marks(root: ET.Element, marks: Marks) -> None:
    parents = {child: parent for parent in root.iter() for child in parent}
    for node in list(root.iter()):
        gid = node.get("id", "")
        if TICK_ID.match(gid):
            node.set("data-role", "axis-label")
        role = marks.roles.get(gid)
        if role is None:
            continue
        tips = marks.tips.get(gid, ())
        if role != "points":
            node.set("data-role", role)
            if tips:
                _titled(node, "\n".join(tips))
            continue
        for use, tip in zip([u for u in node.iter("use")], tips, strict=False):
            holder = parents[use]
            wrap = ET.Element("g", {"data-role": "point"})
            holder.insert(list(holder).index(use), wrap)
            holder.remove(use)
            wrap.append(use)
            _titled(wrap, tip)


def figure_svg(figure: Figure, key: str, label: str, marks: Marks | None = None) -> ET.Element:
    """The figure as an <svg> that scales to its container; `key` prefixes its ids, `label` names it,
    `marks` gives its artists roles and tooltips."""
    marks = marks or Marks()
    for ax in figure.axes:
        marks.tag(ax.patch, "axes")
    buffer = io.StringIO()
    with styled():
        from matplotlib.backends.backend_svg import FigureCanvasSVG

        FigureCanvasSVG(figure).print_svg(buffer)
    text = buffer.getvalue().replace(INK, "currentColor")
    root = ET.fromstring(text.encode())
    _strip_namespaces(root)
    _apply_marks(root, marks)
    _prefix_ids(root, key)
    for attribute in ("width", "height"):
        root.attrib.pop(attribute, None)
    root.set("role", "img")
    root.set("aria-label", label)
    for node in list(root):
        if node.tag == "metadata":
            root.remove(node)
    return root
