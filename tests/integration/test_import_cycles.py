"""Every servelab module imports on its own: in a fresh interpreter, each module is imported first with no
servelab module loaded before it, so an import cycle that depends on which module comes first fails here
(engines/vllm/memory -> plan -> plan/make -> engines -> engines/vllm/memory was one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import servelab

# each part is its own interpreter and test, so pytest-xdist spreads the ~350 imports over the cores
PARTS = 4
SCRIPT = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "servelab" or m.startswith("servelab.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc().strip().splitlines()[-1])
print("\\n".join(failed))
"""


def _modules() -> list[str]:
    root = Path(servelab.__file__).parent
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_module_is_found() -> None:
    modules = _modules()
    assert "servelab.engines.vllm.memory" in modules and "servelab.plan.make" in modules


@pytest.mark.parametrize("part", range(PARTS))
def test_every_module_imports_first_in_a_fresh_interpreter(part: int) -> None:
    modules = _modules()[part::PARTS]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *modules], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"modules that fail when imported first:\n{done.stdout}"


def test_every_benchmark_script_imports() -> None:
    """The benchmarks are not run by the suite; importing each (their work sits under ``__main__``) still
    catches one left behind by a rename (plan_vs_llamacpp.py imported llamacpp.server after it became
    launch.py)."""
    bench = Path(servelab.__file__).parent.parent / "benchmarks"
    scripts = sorted(bench.glob("*.py"))
    assert any(p.name == "plan_vs_llamacpp.py" for p in scripts)
    code = (
        "import importlib.util, sys\n"
        "sys.path.insert(0, sys.argv[1].rsplit('/', 1)[0])\n"
        "for path in sys.argv[1:]:\n"
        "    spec = importlib.util.spec_from_file_location('bench_' + path.rsplit('/', 1)[-1][:-3], path)\n"
        "    module = importlib.util.module_from_spec(spec)\n"
        "    sys.modules[spec.name] = module  # as an import does: a dataclass looks its module up there\n"
        "    spec.loader.exec_module(module)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, scripts)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
