"""Is servelab installed from this tree with every requirement of the given extras? (`scripts/test`'s check)

    python3 -I scripts/installed.py STAMP EXTRA...    # exit 0: yes, nothing to install; 1: run pip
    python3 -I scripts/installed.py --write STAMP     # after pip succeeded: remember this pyproject.toml

`pip install -e '.[test,ray]'` resolves and rebuilds the editable wheel every time (~22 s of a ~9 min suite on
the 2-core machine) even when nothing changed. This says "nothing changed" only when all hold: the stamp holds the
hash of this pyproject.toml (written after the last successful install), `servelab` imports from this tree, and
every requirement of its installed metadata (with the extras asked) is installed at a version it accepts. A clean
clone (no stamp), an edited pyproject.toml or a missing or out-of-range package means pip runs.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _digest() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest() + " " + str(ROOT)


def _satisfied(extras: set[str]) -> bool:
    try:
        from packaging.requirements import Requirement

        import servelab
    except ImportError:
        return False
    if Path(servelab.__file__).resolve().parent != ROOT / "servelab":
        return False
    for line in md.requires("servelab") or ():
        req = Requirement(line)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            continue
        try:
            version = md.version(req.name)
        except md.PackageNotFoundError:
            return False
        if version not in req.specifier:
            return False
    return True


def main(argv: list[str]) -> int:
    if argv[:1] == ["--write"] and len(argv) == 2:
        Path(argv[1]).parent.mkdir(parents=True, exist_ok=True)
        Path(argv[1]).write_text(_digest() + "\n")
        return 0
    if not argv:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    stamp = Path(argv[0])
    fresh = stamp.is_file() and stamp.read_text().strip() == _digest()
    return 0 if fresh and _satisfied(set(argv[1:])) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
