"""Parsing `nvidia-smi topo -m` / `topo -p2p r` text as real drivers print it (sources in each comment)."""

from __future__ import annotations

from servelab.diagnose.topo import nvlink_count, p2p_status, parse_matrix

# noonghunna/club-3090 issue #1229 (driver 595, tabs, "GPU NUMA ID" column, empty cells)
PHB_TABS = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tPHB\t0-63\t0\t\tN/A\nGPU1\tPHB\t X \t0-63\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n"
P2P_GNS = (
    " \tGPU0\tGPU1\t\n GPU0\tX\tGNS\t\n GPU1\tGNS\tX\t\n\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n"
)
# a public NVIDIA/nccl-tests issue thread (3 GPUs + 2 NICs, found with the search tool), verbatim
WITH_NICS = """        GPU0    GPU1    GPU2    NIC0    NIC1    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV4     NODE    NODE    NODE    64-71   1               N/A
GPU1    NV4      X      NODE    NODE    NODE    64-71   1               N/A
GPU2    NODE    NODE     X      PHB     PHB     64-71   1               N/A
NIC0    NODE    NODE    PHB      X      PIX
NIC1    NODE    NODE    PHB     PIX      X

Legend:

  X    = Self
"""
# cells from NVIDIA/nccl issue #1617 (H100 NV6, NIC PIX/SYS), cut to two GPUs and laid out with tabs and
# the ANSI underline that newer drivers print on a terminal (docs/reference/diagnostics.md §3)
ANSI = "\x1b[4m\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\nGPU0\t X \tNV6\tPIX\t6,14,22,30\t3\t\tN/A\nGPU1\tNV6\t X \tSYS\t4,12,20,28\t1\t\tN/A\n"


def test_tab_separated_pcie_pair():
    assert parse_matrix(PHB_TABS) == {(0, 1): "PHB", (1, 0): "PHB"}


def test_p2p_matrix_with_leading_spaces():
    cells = parse_matrix(P2P_GNS)
    assert cells == {(0, 1): "GNS", (1, 0): "GNS"}
    assert p2p_status(cells[(0, 1)]) == "gpu_not_supported"


def test_nic_rows_and_columns_are_ignored():
    cells = parse_matrix(WITH_NICS)
    assert cells[(0, 1)] == "NV4" and cells[(0, 2)] == "NODE" and cells[(2, 1)] == "NODE"
    assert len(cells) == 6


def test_ansi_underlined_header():
    assert parse_matrix(ANSI) == {(0, 1): "NV6", (1, 0): "NV6"}


def test_single_gpu_and_garbage_give_no_pairs():
    assert parse_matrix("        GPU0    CPU Affinity\nGPU0     X      0-5\n") == {}
    assert parse_matrix("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.") == {}
    assert parse_matrix("") == {}


def test_cell_helpers():
    assert nvlink_count("NV18") == 18 and nvlink_count("PHB") is None and nvlink_count(None) is None
    assert p2p_status("CNS") == "chipset_not_supported" and p2p_status("DR") == "disabled_by_regkey"
    assert p2p_status("X") is None
