"""`servelab engine` (not yet written: the owning issue fills this in)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this command to the app."""
