"""EffectiveConfig keeps an engine's unknown keys aside in production and refuses them under strict (tests)."""

from __future__ import annotations

import pytest

from servelab.verify.effective import EffectiveConfig


def test_an_unknown_effective_key_is_refused_under_strict_and_kept_aside_otherwise() -> None:
    fields = {"context_per_slot": 4096, "n_ctx_slot_typo": 1}
    with pytest.raises(ValueError, match="n_ctx_slot_typo"):
        EffectiveConfig.from_fields("llamacpp", fields, strict=True)
    tolerant = EffectiveConfig.from_fields("llamacpp", fields)
    assert tolerant.context_per_slot == 4096 and tolerant.raw["extra"] == {"n_ctx_slot_typo": 1}
