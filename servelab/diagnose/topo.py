"""Parse `nvidia-smi topo -m` and `nvidia-smi topo -p2p r` matrices into {(gpu_a, gpu_b): cell}.

Both print a header row of device names (``GPU0 GPU1 … NIC0 … CPU Affinity …``) and one row per device;
cells are whitespace-free codes (``X``, ``NV4``, ``PHB``, ``OK``, ``CNS``). Newer drivers underline the
header with ANSI escapes and add columns; both are tolerated. Only GPU↔GPU cells are kept.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"^GPU(\d+)$")

P2P_CODES = {
    "OK": "ok",
    "CNS": "chipset_not_supported",
    "GNS": "gpu_not_supported",
    "TNS": "topology_not_supported",
    "DR": "disabled_by_regkey",
    "NS": "not_supported",
    "U": "unknown",
}


def _header(lines: list[str]) -> tuple[int, list[str]] | None:
    """The header row: starts with GPU0 but, unlike GPU0's own row, is not followed by the self cell X."""
    for number, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0] == "GPU0" and (len(tokens) == 1 or tokens[1] != "X"):
            return number, [t for t in tokens if re.match(r"^(GPU|NIC)\d+$", t)]
    return None


def parse_matrix(text: str) -> dict[tuple[int, int], str]:
    """GPU↔GPU cells of a topology matrix, keyed (row, column) by GPU index; {} when there is none."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    found = _header(lines)
    if found is None:
        return {}
    start, columns = found
    cells: dict[tuple[int, int], str] = {}
    for line in lines[start + 1 :]:
        tokens = line.split()
        if not tokens or tokens[0] == "Legend:":
            break
        row = _GPU.match(tokens[0])
        if row is None:
            continue
        for column, cell in zip(columns, tokens[1:], strict=False):
            col = _GPU.match(column)
            if col is not None and col.group(1) != row.group(1):
                cells[(int(row.group(1)), int(col.group(1)))] = cell
    return cells


def nvlink_count(cell: str | None) -> int | None:
    """Links in an ``NV#`` cell (``NV4`` → 4); None for any other cell."""
    match = re.fullmatch(r"NV(\d+)", cell or "")
    return int(match.group(1)) if match else None


def p2p_status(cell: str | None) -> str | None:
    """A `topo -p2p` cell as an NVML-style status name (``CNS`` → ``chipset_not_supported``)."""
    return P2P_CODES.get(cell or "")


def read_topology(probe) -> tuple[dict[tuple[int, int], str], dict[tuple[int, int], str]]:
    """(`topo -m` link cells, `topo -p2p r` status cells) from nvidia-smi; empty where it is absent or fails."""
    cells = []
    for argv in (["nvidia-smi", "topo", "-m"], ["nvidia-smi", "topo", "-p2p", "r"]):
        output = probe.run(argv)
        ok = output is not None and output.returncode == 0
        cells.append(parse_matrix(output.stdout) if ok else {})
    return cells[0], cells[1]
