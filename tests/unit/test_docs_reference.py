"""docs/reference/ keeps the engine facts the code relies on inside the repository.

Nothing under servelab/, tests/ or docs/ may point outside it (a clone has no sibling `shared` folder), and every
`docs/reference/<file>.md §N` citation must name an existing file and one of its numbered sections (`## N. ...`).
A validation-point label after the section (`§9 V4`) must appear in that section too.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
SCANNED = ("servelab", "tests", "docs")
# Built from pieces so that this file does not match itself.
FORBIDDEN = ("../" + "shared", "shared" + "/reference", "shared" + "/brief")

MENTION = re.compile(r"docs/reference/([\w.-]+\.md)")
SECTION = re.compile(r"§(\d+)(?:\s*-\s*§?(\d+))?(?:\s+(V\d+))?")
HEADING = re.compile(r"^##\s+(\d+)\.\s", re.MULTILINE)


def _text_files(top: str) -> list[Path]:
    out = []
    for path in sorted((ROOT / top).rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        try:
            out.append((path, path.read_text(encoding="utf-8")))
        except (UnicodeDecodeError, OSError):
            continue  # binary fixtures
    return out


def _sections(name: str) -> dict[str, str]:
    """Section number -> its text (up to the next numbered `##` heading)."""
    text = (REFERENCE / name).read_text(encoding="utf-8")
    marks = list(HEADING.finditer(text))
    return {
        m.group(1): text[m.start() : marks[i + 1].start() if i + 1 < len(marks) else len(text)]
        for i, m in enumerate(marks)
    }


def _citations(text: str):
    """(file, section, label) for every citation; § refs after a mention on its line belong to that file."""
    text = text.replace("\\u00a7", "§")  # JSON files escape the section sign
    for line in text.splitlines():
        mentions = list(MENTION.finditer(line))
        for i, m in enumerate(mentions):
            tail = line[m.end() : mentions[i + 1].start() if i + 1 < len(mentions) else len(line)]
            refs = list(SECTION.finditer(tail))
            if not refs:
                yield m.group(1), None, None
            for ref in refs:
                first, last, label = ref.group(1), ref.group(2) or ref.group(1), ref.group(3)
                for number in range(int(first), int(last) + 1):
                    yield m.group(1), str(number), label


def test_nothing_points_outside_the_repository() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {needle}"
        for top in SCANNED
        for path, text in _text_files(top)
        for needle in FORBIDDEN
        if needle in text
    ]
    assert not offenders, "cite docs/reference/<file>.md §N instead:\n" + "\n".join(offenders)


def test_every_reference_file_is_indexed_and_numbered() -> None:
    index = (REFERENCE / "README.md").read_text(encoding="utf-8")
    for path in sorted(REFERENCE.glob("*.md")):
        if path.name == "README.md":
            continue
        assert f"({path.name})" in index, f"{path.name} missing from docs/reference/README.md"
        assert _sections(path.name), f"{path.name} has no numbered '## N. ...' sections"


def test_citations_name_existing_files_and_sections() -> None:
    checked, broken = 0, []
    for top in SCANNED:
        for path, text in _text_files(top):
            for name, section, label in _citations(text):
                where = f"{path.relative_to(ROOT)}: docs/reference/{name}"
                if not (REFERENCE / name).is_file():
                    broken.append(f"{where} (no such file)")
                    continue
                checked += 1
                if section is None:
                    continue
                sections = _sections(name)
                if section not in sections:
                    broken.append(f"{where} §{section} (no such section)")
                elif label and not re.search(rf"\b{label}\b", sections[section]):
                    broken.append(f"{where} §{section} {label} (label not in that section)")
    assert not broken, "\n".join(broken)
    assert checked > 40  # the scan found the citations at all


def test_citation_parser() -> None:
    got = list(_citations("x docs/reference/memory.md §2-4, §9 V4; docs/reference/diagnostics.md \\u00a75"))
    assert got == [
        ("memory.md", "2", None),
        ("memory.md", "3", None),
        ("memory.md", "4", None),
        ("memory.md", "9", "V4"),
        ("diagnostics.md", "5", None),
    ]
