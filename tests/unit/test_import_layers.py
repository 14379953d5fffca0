"""The layers of ARCHITECTURE.md, checked on the code: every import of a servelab module (at the top, inside a
function, or under TYPE_CHECKING) points to the same package or one lower in `LAYERS`; no package-level cycle.

A new package must be given a layer here (the test names it); an import that runs back up fails with the module
and what it imports, so the fix is to move the value type it needs below both (sizing/, scheduling/, results/).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import servelab

# top to bottom; packages on one line are peers and may import each other only through lower layers
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("demo", "demo_summary", "demo_pair", "demo_advise"),
    ("advise",),
    ("report",),
    ("speculative",),
    ("sim",),
    ("predict",),
    ("bench", "verify", "diagnose"),
    ("store",),
    ("plan",),
    ("engines",),
    ("sizing", "scheduling", "results"),
    ("model", "hardware", "modelmake"),
    ("errors", "paths", "net", "redact", "sync_http", "inert", "ranges", "userfiles"),
)
RANK = {name: depth for depth, names in enumerate(LAYERS) for name in names}
ROOT = Path(servelab.__file__).parent


@functools.cache
def _imports() -> tuple[tuple[str, str, str, str], ...]:
    """(importing module, its package, imported module, its package) for every servelab import in the code, read
    once per process (parsing every module takes seconds)."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if len(parts) < 2 or module == "servelab":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.startswith("servelab."):
                    found.append((module, parts[1].removesuffix(".py"), name, name.split(".")[1]))
    return tuple(found)


def test_every_package_has_a_layer() -> None:
    packages = {
        p.name.removesuffix(".py")
        for p in ROOT.iterdir()
        if p.suffix == ".py" or (p / "__init__.py").is_file()
    }
    assert packages - {"__init__"} <= set(RANK), (
        f"give these a layer in LAYERS: {packages - set(RANK) - {'__init__'}}"
    )


def test_no_import_runs_back_up_the_layers() -> None:
    imports = _imports()
    assert len(imports) > 500  # the walk sees the code
    upward = sorted(f"{a} -> {b}" for a, pa, b, pb in imports if pa != pb and RANK[pb] < RANK[pa])
    assert upward == [], "imports that run back up the layers:\n" + "\n".join(upward)


def test_no_package_level_cycle() -> None:
    edges: dict[str, set[str]] = {}
    for _, source, _, target in _imports():
        if source != target:
            edges.setdefault(source, set()).add(target)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in edges.get(start, ()):
            if nxt == goal or (nxt not in seen and (seen.add(nxt) or reaches(nxt, goal, seen))):
                return True
        return False

    cycles = sorted(p for p in edges if reaches(p, p, set()))
    assert cycles == [], f"packages in an import cycle: {cycles}"
