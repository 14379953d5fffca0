"""How fast `servelab logs` matches: realistic logs and hostile lines, against a backtracking regex for scale.

Run: python benchmarks/logs_speed.py   (prints a table; nothing is asserted)
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from servelab.diagnose.logs import scan_lines
from servelab.diagnose.signatures import load_signatures
from servelab.diagnose.signatures.template import compile_template

FIXTURES = Path(__file__).parent.parent / "tests" / "fixtures" / "logs"
SIZE = 10**7


def realistic_lines(count: int) -> list[str]:
    lines = [line for path in sorted(FIXTURES.glob("*/*.log")) for line in path.read_text().splitlines()]
    return (lines * (count // len(lines) + 1))[:count]


def hostile_inputs() -> dict[str, list[str]]:
    return {
        "10 MB of 'a'": ["a" * SIZE],
        "10 MB digits after a prefix": ["accept len: " + "1" * SIZE],
        "10 MB repeated prefixes": [
            "Using [" * (SIZE // 7) + "] all-reduce backends (in dispatch order) for group"
        ],
        "10 MB near-miss repetitions": ["slot context shift, n_keep = 1, n_left = " * (SIZE // 41) + "x"],
        "10 MB padded numbers": ["draft acceptance = " + " " * SIZE + "0.5 ("],
        "100k realistic lines": realistic_lines(100_000),
    }


def uncapped_inputs() -> list[tuple[str, str, str]]:
    """Single templates on 10 MB lines that hold every literal, so the matcher itself (no line cap) does the work."""
    shift = "slot context shift, n_keep = {k:int}, n_left = {l:int}, n_discard = {d:int}"
    backends = "Using [{b:list}] all-reduce backends (in dispatch order) for group {g:word} "
    return [
        (
            "template, 10 MB near-misses, no cap",
            shift,
            "slot context shift, n_keep = 1, n_left = " * (SIZE // 41) + shift,
        ),
        (
            "template, 10 MB '[' runs, no cap",
            backends,
            "Using [" * (SIZE // 7) + "] all-reduce backends (in dispatch order) for group x",
        ),
    ]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def naive_regex_rows() -> list[tuple[str, float]]:
    """A nested-quantifier regex of the kind the template language forbids, on short near-misses."""
    pattern = re.compile(r"accept len: ([0-9]+ ?)+, accept rate")
    return [
        (f"naive regex, {n}-char near-miss", timed(lambda n=n: pattern.search("accept len: " + "1" * n)))
        for n in (18, 20, 22, 24)
    ]


def main() -> None:
    signatures = load_signatures()
    print(f"{len(signatures)} signatures loaded")
    print(f"{'input':<36} {'chars':>12} {'seconds':>9} {'MB/s':>8}")
    for name, lines in hostile_inputs().items():
        chars = sum(len(line) for line in lines)
        seconds = timed(lambda lines=lines: scan_lines(lines, signatures))
        print(f"{name:<36} {chars:>12,} {seconds:>9.3f} {chars / seconds / 1e6:>8.1f}")
    for name, source, line in uncapped_inputs():
        template = compile_template(source)
        seconds = timed(lambda template=template, line=line: template.match(line))
        print(f"{name:<36} {len(line):>12,} {seconds:>9.3f} {len(line) / seconds / 1e6:>8.1f}")
    for name, seconds in naive_regex_rows():
        print(f"{name:<36} {'':>12} {seconds:>9.3f}")


if __name__ == "__main__":
    main()
