"""Verify: what a running server really got, read from its own endpoints and diffed against what was asked.

from servelab.verify import verify, parse_expect
result = verify("http://127.0.0.1:8080", parse_expect(["context=8192"]))
for m in result.mismatches: print(m.line)
"""

from servelab.verify.asked import (
    EXPECT_KEYS,
    Asked,
    from_command,
    from_engine_command,
    from_plan,
    parse_expect,
)
from servelab.verify.command import EngineCommand, read_command
from servelab.verify.compose import from_compose
from servelab.verify.core import VerifyResult, compare, verify
from servelab.verify.diff import Mismatch, Unverified
from servelab.verify.effective import EffectiveConfig, read_effective

__all__ = [
    "EXPECT_KEYS",
    "Asked",
    "EffectiveConfig",
    "EngineCommand",
    "Mismatch",
    "Unverified",
    "VerifyResult",
    "compare",
    "from_command",
    "from_compose",
    "from_engine_command",
    "from_plan",
    "parse_expect",
    "read_command",
    "read_effective",
    "verify",
]
