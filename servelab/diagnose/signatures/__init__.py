"""The log-signature database: one YAML file per engine, in that engine's package, plus NCCL's here.

    servelab/engines/<engine>/signatures.yaml     every engine whose contract names it (engines/registry.py)
    servelab/diagnose/signatures/nccl.yaml        NCCL is a library every multi-GPU engine loads

Each file: ``engine: <name>`` and ``signatures: [...]``; each entry has id, versions_seen, source,
severity (critical|warning|info), match (a template or a list of them, see ``template``), optional
``unless`` (plain substrings that veto a match), optional ``when`` (one numeric comparison of captures,
e.g. ``n_slots > 1``), meaning and fix (``{capture}`` fills in a capture).

Key a match on the distinctive phrase of the message, not on the class or logger that says it: classes are
renamed across versions ("Custom allreduce" became "CustomAllReduceV2") while the reason stays word for word.
"""

from __future__ import annotations

import operator
import string
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from servelab.diagnose.signatures.template import Template, TemplateError, compile_template
from servelab.engines import registry
from servelab.errors import ConfigError
from servelab.userfiles import UserFile

SEVERITIES = ("critical", "warning", "info")
MAX_SIGNATURE_FILE_BYTES = 4 << 20  # a signature database: a few hundred entries
NCCL_FILE = ("servelab.diagnose.signatures", "nccl.yaml")  # a library every multi-GPU engine loads
_COMPARISONS = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_REQUIRED = ("id", "versions_seen", "source", "severity", "match", "meaning", "fix")


@dataclass(frozen=True, kw_only=True)
class Signature:
    """One known log line: how to recognise it, what it means, what to do."""

    id: str
    engines: tuple[str, ...]
    versions_seen: tuple[str, ...]
    source: str
    severity: str
    templates: tuple[Template, ...]
    unless: tuple[str, ...]
    meaning: str
    fix: str
    when: tuple[str, str, str] | None = None  # (left, operator, right): capture names or numbers

    @property
    def engine(self) -> str:
        return "/".join(self.engines)

    def match(self, line: str) -> dict[str, str] | None:
        """Captures when ``line`` shows this signature, else None."""
        for template in self.templates:
            captures = template.match(line)
            if captures is not None and self._holds(captures):
                return None if any(veto in line for veto in self.unless) else captures
        return None

    def _holds(self, captures: dict[str, str]) -> bool:
        if self.when is None:
            return True
        left, op, right = self.when
        a, b = (_number(captures.get(side, side)) for side in (left, right))
        return a is not None and b is not None and bool(_COMPARISONS[op](a, b))

    def render_fix(self, captures: dict[str, str]) -> str:
        return self.fix.format_map(_Captures(captures))

    def render_meaning(self, captures: dict[str, str]) -> str:
        return self.meaning.format_map(_Captures(captures))


class _Captures(dict):
    def __missing__(self, key: str) -> str:
        return "?"


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def signature_files() -> dict[str, tuple[str, str]]:
    """Every signature set by name: each registered engine's ``signatures.yaml``, then NCCL's."""
    files = {e.name: (e.signatures, "signatures.yaml") for e in registry.engines() if e.signatures}
    return {**files, "nccl": NCCL_FILE}


def load_signatures(engines: Iterable[str] | None = None) -> tuple[Signature, ...]:
    """The shipped signatures, for ``engines`` (all when None). Unknown names raise ConfigError."""
    files = signature_files()
    names = tuple(files) if engines is None else tuple(engines)
    unknown = [n for n in names if n not in files]
    if unknown:
        raise ConfigError(f"unknown engine {unknown[0]!r} for log signatures; valid: {', '.join(files)}")
    loaded: list[Signature] = []
    for package, filename in files.values():
        resource = resources.files(package).joinpath(filename)
        loaded += parse_signature_file(resource.read_text(encoding="utf-8"), f"{package}/{filename}")
    wanted = [s for s in loaded if set(s.engines) & set(names)]
    _check_unique_ids(loaded)
    return tuple(wanted)


def load_signature_file(path: Path) -> tuple[Signature, ...]:
    """Signatures from one YAML file on disk (for users extending the database)."""
    text = UserFile(path, f"signature file {path}").read_text(MAX_SIGNATURE_FILE_BYTES, "YAML")
    return parse_signature_file(text, str(path))


def parse_signature_file(text: str, where: str) -> tuple[Signature, ...]:
    """Parse and validate one signature file; ConfigError names the file and the entry."""
    document = UserFile(Path(where), f"signature file {where}").parse_yaml(text)
    if not isinstance(document, dict) or not isinstance(document.get("signatures"), list):
        raise ConfigError(f"signature file {where}: expected a mapping with 'engine' and a 'signatures' list")
    engine = document.get("engine")
    signatures = tuple(
        _parse_entry(entry, engine, where, i) for i, entry in enumerate(document["signatures"])
    )
    _check_unique_ids(signatures)
    return signatures


def _parse_entry(entry: object, engine: object, where: str, index: int) -> Signature:
    label = f"signature file {where}, entry {index}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{label}: expected a mapping with {', '.join(_REQUIRED)}")
    label = f"signature file {where}, entry {index} ({entry.get('id', 'no id')})"
    missing = [key for key in _REQUIRED if key not in entry]
    if missing:
        raise ConfigError(f"{label}: missing {', '.join(missing)}")
    if entry["severity"] not in SEVERITIES:
        raise ConfigError(f"{label}: severity {entry['severity']!r} is not one of {', '.join(SEVERITIES)}")
    engines = _string_list(entry.get("engine", engine), label, "engine")
    templates = tuple(_compile(source, label) for source in _string_list(entry["match"], label, "match"))
    captures = {name for template in templates for name in template.capture_names}
    for key in ("meaning", "fix"):
        _check_fields(str(entry[key]), captures, label, key)
    return Signature(
        id=str(entry["id"]),
        engines=engines,
        versions_seen=_string_list(entry["versions_seen"], label, "versions_seen"),
        source=str(entry["source"]),
        severity=entry["severity"],
        templates=templates,
        unless=_string_list(entry.get("unless", []), label, "unless", allow_empty=True),
        meaning=str(entry["meaning"]).strip(),
        fix=str(entry["fix"]).strip(),
        when=_parse_when(entry.get("when"), captures, label),
    )


def _parse_when(value: object, captures: set[str], label: str) -> tuple[str, str, str] | None:
    if value is None:
        return None
    parts = str(value).split()
    if len(parts) != 3 or parts[1] not in _COMPARISONS:
        raise ConfigError(
            f"{label}: when {value!r} must read 'LEFT OP RIGHT' with OP one of {' '.join(_COMPARISONS)}"
        )
    for side in (parts[0], parts[2]):
        if side not in captures and _number(side) is None:
            raise ConfigError(f"{label}: when {value!r}: {side!r} is neither a capture nor a number")
    return parts[0], parts[1], parts[2]


def _compile(source: str, label: str) -> Template:
    try:
        return compile_template(source)
    except TemplateError as exc:
        raise ConfigError(f"{label}: match {source!r}: {exc}") from exc


def _string_list(value: object, label: str, key: str, allow_empty: bool = False) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str | int | float) for i in items):
        raise ConfigError(f"{label}: {key} must be a string or a list of strings")
    if not items and not allow_empty:
        raise ConfigError(f"{label}: {key} is empty")
    return tuple(str(i) for i in items)


def _check_fields(text: str, captures: set[str], label: str, key: str) -> None:
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise ConfigError(
            f"{label}: {key} has a stray brace ({exc}); write {{{{ or }}}} for a literal one"
        ) from exc
    unknown = [name for name in fields if name not in captures]
    if unknown:
        raise ConfigError(f"{label}: {key} uses {{{unknown[0]}}}, which the match does not capture")


def _check_unique_ids(signatures: Iterable[Signature]) -> None:
    seen: set[str] = set()
    for signature in signatures:
        if signature.id in seen:
            raise ConfigError(f"signature id {signature.id!r} is defined twice; ids must be unique")
        seen.add(signature.id)
