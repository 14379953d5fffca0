"""The bench client's bounds, each a `servelab bench` flag (docs/metrics.md, "Limits"): a hostile or broken
server can make a request fail, never make the client wait or grow without end."""

from __future__ import annotations

from servelab.sync_http import DEFAULT_MAX_BYTES

DEFAULT_DEADLINE_S = 1800.0  # --deadline: a whole request; 32k tokens at 20 tok/s still fit (kind `deadline`)
DEFAULT_MAX_LINE_BYTES = 8 << 20  # --max-line-bytes: one SSE line or event; a token's is ~200 B (`too_large`)
DEFAULT_MAX_BODY_BYTES = 256 << 20  # --max-body-bytes: one answer, ~1M tokens of SSE chunks (`too_large`)
DEFAULT_MAX_ENDPOINT_BYTES = (
    DEFAULT_MAX_BYTES  # --max-endpoint-bytes: /v1/models, /props ... (one-line TargetError)
)
