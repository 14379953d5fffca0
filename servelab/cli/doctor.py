"""`servelab doctor [--burn] [--p2p-test] [--json]`: GPUs, pairs, virtualisation, environment → ranked findings."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from servelab.cli.output import print_json, stderr_console, stdout_console
from servelab.diagnose.burn import BURN_SECONDS, run_burn
from servelab.diagnose.doctor import DoctorReport, run_doctor
from servelab.diagnose.p2ptest import run_p2p_test
from servelab.diagnose.probe import RealProbe, RecordedProbe, RecordingProbe
from servelab.errors import ConfigError
from servelab.ranges import number as in_range

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}

MAX_BURN_SECONDS = 600.0


def _na(value: object, unit: str = "") -> str:
    return "—" if value is None else f"{value}{unit}"


def _watts(limit_w: float | None, default_w: float | None) -> str:
    if limit_w is None:
        return "—"
    return f"{limit_w:.0f} W" + (f" (default {default_w:.0f} W)" if default_w is not None else "")


def _gpu_table(report: DoctorReport) -> Table:
    table = Table(title="GPUs")
    for column in (
        "#",
        "name",
        "memory",
        "bandwidth",
        "driver / CUDA",
        "power limit",
        "SM / mem clock",
        "PCIe now / max",
        "virt.",
    ):
        table.add_column(column)
    for g in report.gpus:
        table.add_row(
            str(g.index),
            g.name,
            _na(g.memory_total_mib, " MiB"),
            _na(g.bandwidth_gb_s, " GB/s"),
            f"{_na(g.driver_version)} / {_na(g.cuda_version)}",
            _watts(g.power_limit_w, g.power_default_limit_w),
            f"{_na(g.sm_clock_mhz)} / {_na(g.mem_clock_mhz)} MHz",
            f"gen{_na(g.pcie_gen_current)} x{_na(g.pcie_width_current)} / gen{_na(g.pcie_gen_max)} x{_na(g.pcie_width_max)}",
            _na(g.virtualization_mode),
        )
    return table


def _pair_table(report: DoctorReport) -> Table:
    table = Table(title="GPU pairs")
    for column in (
        "pair",
        "interconnect",
        "P2P read / write / NVLink",
        "common ancestor",
        "topo -m",
        "topo -p2p r",
    ):
        table.add_column(column)
    for p in report.pairs:
        table.add_row(
            p.label,
            _na(p.interconnect),
            f"{_na(p.p2p_read)} / {_na(p.p2p_write)} / {_na(p.p2p_nvlink)}",
            _na(p.common_ancestor),
            _na(p.topo_link),
            _na(p.topo_p2p_read),
        )
    return table


def render(report: DoctorReport) -> None:
    """Tables for GPUs and pairs, then the findings, most severe first."""
    console = stdout_console()
    if report.gpus:
        console.print(_gpu_table(report))
    if report.pairs:
        console.print(_pair_table(report))
    console.print(f"[bold]Findings[/bold] ({len(report.findings)})", markup=True)
    for number, f in enumerate(report.findings, 1):
        console.print(
            f"{number}. [{SEVERITY_STYLE[f.severity]}]{f.severity.upper()}[/] {escape(f.title)}", markup=True
        )
        for label, text in (("evidence", f.evidence), ("why it matters", f.consequence), ("fix", f.fix)):
            console.print(f"   {label}: {text}", markup=False)


def register(app: typer.Typer) -> None:
    """Add `servelab doctor` to the app."""

    @app.command("doctor")
    def doctor(
        burn: bool = typer.Option(
            False, "--burn", help="Run a short FP16 matmul burn (torch or cupy) and sample power."
        ),
        burn_seconds: float = typer.Option(
            BURN_SECONDS, "--burn-seconds", help="Length of the burn in seconds."
        ),
        p2p_test: bool = typer.Option(
            False, "--p2p-test", help="Test real CUDA IPC peer copies (needs torch with CUDA)."
        ),
        replay: Path | None = typer.Option(
            None, "--from", help="Diagnose a recorded machine (fixture directory) instead of this one."
        ),
        record: Path | None = typer.Option(
            None, "--record", help="Also save what this machine answered, as a fixture directory."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Why is it slow? GPUs, NVLink/P2P per pair, virtualisation, degrading environment, ranked findings."""
        in_range(burn_seconds, "--burn-seconds", 0, MAX_BURN_SECONDS, "seconds", above=True)
        if replay is not None and (burn or p2p_test or record):
            raise ConfigError(
                "--from reads a recorded machine: it cannot be combined with --burn, --p2p-test or --record"
            )
        report = (
            run_doctor(RecordedProbe(replay))
            if replay is not None
            else _diagnose_here(burn, burn_seconds, p2p_test, record)
        )
        if as_json:
            print_json(report.to_json())
        else:
            render(report)


def _diagnose_here(burn: bool, burn_seconds: float, p2p_test: bool, record: Path | None) -> DoctorReport:
    with RealProbe() as real:
        recording = RecordingProbe(real) if record is not None else None
        probe = real if recording is None else recording
        burn_result = None
        if burn:
            if probe.nvml_error() is None and probe.gpu_count():
                stderr_console().print(f"burning GPU0 for {burn_seconds:.0f} s …")
            burn_result = run_burn(probe, seconds=burn_seconds)
        p2p = run_p2p_test(probe.gpu_count() if probe.nvml_error() is None else 0) if p2p_test else None
        report = run_doctor(probe, burn=burn_result, p2p_test=p2p)
        if recording is not None and record is not None:
            stderr_console().print(f"recorded this machine in {recording.save(record)}")
    return report
