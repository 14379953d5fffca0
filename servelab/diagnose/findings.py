"""`Finding`: one ranked diagnosis (what is wrong, the evidence, what it costs, what to do)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SEVERITIES = ("critical", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """One thing doctor found. `id` is stable (for scripts); `title` is the one-line summary."""

    id: str
    severity: str
    title: str
    evidence: str
    consequence: str
    fix: str

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}, got {self.severity!r}")


def rank(findings: Iterable[Finding]) -> list[Finding]:
    """Critical first, then warnings, then info; ties keep the order the checks produced; duplicates dropped."""
    seen: set[tuple[str, str]] = set()
    unique = []
    for finding in findings:
        key = (finding.id, finding.title)
        if key not in seen:
            seen.add(key)
            unique.append(finding)
    return sorted(unique, key=lambda f: SEVERITIES.index(f.severity))
