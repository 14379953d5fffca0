"""Wide value types are built by keyword: a dataclass in servelab with more than WIDE fields takes them all by
name (`@dataclass(kw_only=True)`), so a constructor call reads as the fields it sets and a field added, removed
or reordered cannot shift the others (issue 21.4)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from pathlib import Path

import pytest

import servelab

WIDE = 8


def _modules() -> list[str]:
    """Every module of the package, namespace packages (no __init__.py) included."""
    root = Path(servelab.__file__).parent
    return sorted(
        ".".join(("servelab", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        for p in root.rglob("*.py")
    )


def _dataclasses() -> list[type]:
    found: dict[str, type] = {}
    for name in _modules():
        for obj in vars(importlib.import_module(name)).values():
            if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and obj.__module__ == name:
                found[f"{name}.{obj.__qualname__}"] = obj
    return list(found.values())


def positional_fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init and not f.kw_only]


def test_the_scan_sees_the_wide_types_it_guards():
    """The scan finds the package's dataclasses, namespace packages' too (advise/ has no __init__.py)."""
    names = {c.__qualname__ for c in _dataclasses()}
    assert {"Plan", "RequestRecord", "LevelStats", "BenchConfig", "Judged"} <= names


def test_every_wide_dataclass_is_keyword_only():
    wide = [c for c in _dataclasses() if len(dataclasses.fields(c)) > WIDE]
    assert len(wide) > 40  # the guard guards something
    offenders = [
        f"{c.__module__}.{c.__qualname__}: {positional_fields(c)}" for c in wide if positional_fields(c)
    ]
    assert not offenders, "add kw_only=True to @dataclass:\n" + "\n".join(offenders)


def test_a_distribution_puts_each_percentile_in_its_field():
    """`Distribution.of` builds by name: each percentile lands in the field named for it."""
    from servelab.results.stats import Distribution

    d = Distribution.of([float(v) for v in range(1, 1002)])  # 1..1001: the q-th percentile is 1 + 10 q
    assert (d.n, d.min, d.max, d.mean) == (1001, 1.0, 1001.0, 501.0)
    assert (d.p50, d.p90, d.p95, d.p99, d.p99_9) == pytest.approx((501.0, 901.0, 951.0, 991.0, 1000.0))
