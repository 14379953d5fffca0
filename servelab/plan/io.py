"""Read a saved plan (`servelab plan --json > plan.json`) back as plain data for verify and report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from servelab.errors import ConfigError

REQUIRED_PLAN_KEYS = ("engine", "quant", "context", "kv_dtype", "fits", "memory_bytes")


def load_plan(path: str | Path) -> dict[str, Any]:
    """The plan document at `path`: {"model", "gpu", "plans": [...]}; ConfigError when unreadable or not a plan."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read plan {path}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"plan {path} is not JSON: {exc}; save one with `servelab plan ... --json > FILE`") from exc
    if not isinstance(data, dict) or not isinstance(data.get("plans"), list) or not data["plans"]:
        raise ConfigError(f"plan {path} has no 'plans' list; save one with `servelab plan ... --json > FILE`")
    for index, entry in enumerate(data["plans"]):
        missing = [k for k in REQUIRED_PLAN_KEYS if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise ConfigError(f"plan {path}: plans[{index}] lacks {', '.join(missing)}")
    return data


def first_fitting(plan_doc: dict[str, Any]) -> dict[str, Any]:
    """The first plan entry that fits (plans are sorted best first), else the first one."""
    plans = plan_doc["plans"]
    return next((p for p in plans if p.get("fits")), plans[0])
