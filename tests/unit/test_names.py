"""One word, one meaning (ARCHITECTURE.md, Glossary): no two classes or type aliases in servelab share a name, so
a reader who meets `Target` or `Verdict` knows which one without looking at the import."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import servelab

ROOT = Path(servelab.__file__).parent


def _type_names(tree: ast.Module) -> list[tuple[str, int]]:
    """Every class (nested ones too) and every module-level CamelCase alias (`Progress = Callable[...]`)."""
    found = [(n.name, n.lineno) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        target = node.target if isinstance(node, ast.AnnAssign) else target
        if isinstance(target, ast.Name) and target.id[0].isupper() and not target.id.isupper():
            found.append((target.id, node.lineno))
    return found


def test_no_two_types_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        for name, line in _type_names(ast.parse(path.read_text(encoding="utf-8"))):
            where[name].append(f"{path.relative_to(ROOT.parent)}:{line}")
    assert {name: places for name, places in where.items() if len(places) > 1} == {}


def test_a_second_meaning_is_found() -> None:
    twice = ast.parse("class Verdict:\n    pass\n\nVerdict = int\n")
    assert [name for name, _ in _type_names(twice)] == ["Verdict", "Verdict"]
