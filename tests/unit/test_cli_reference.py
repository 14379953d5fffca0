"""docs/cli.md is generated from the commands' help; this fails when a command changed and the doc did not."""

from pathlib import Path

from servelab.cli.reference import render_reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_cli_reference_is_current() -> None:
    assert DOC.read_text() == render_reference(), "regenerate: python -m servelab.cli.reference > docs/cli.md"


def test_reference_covers_every_command() -> None:
    text = render_reference()
    for command in (
        "plan",
        "serve",
        "verify",
        "bench",
        "predict",
        "sim",
        "runs",
        "compare",
        "export",
        "doctor",
        "logs",
        "spec",
        "report",
        "demo",
        "engine install",
        "model make",
    ):
        assert f"## servelab {command}\n" in text
