"""Why a llama-server did not get what was asked, and what to change.

Sources: llama.cpp tools/server/server-context.cpp (the slot context is -c / -np unless the KV cache is
unified, then capped at n_ctx_train: "the slot context (%d) exceeds the training context of the model (%d) -
capping"); issues ggml-org/llama.cpp#11681, #9016 (the per-slot division), #23652 (automatic -np).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servelab.engines.llamacpp.cmdline import LlamaCppLaunch
from servelab.engines.verify_keys import LABELS as BASE_LABELS
from servelab.engines.verify_keys import reported_value

if TYPE_CHECKING:
    from servelab.results.configs import Asked, EffectiveConfig

LABELS = {**BASE_LABELS, "context": "context per slot"}
UNREPORTED = {
    "kv_dtype": "llama-server reports no KV cache type on its endpoints; its log line "
    "'llama_kv_cache: … K (TYPE)' shows it (servelab logs)",
    "max_total_tokens": "llama-server reports no KV pool size; it is -c (the pool all slots share)",
    "tp_size": "llama.cpp has no tensor-parallel size to report",
}
reported = reported_value


def explain(
    key: str, asked_value: Any, got_value: Any, asked: Asked, got: EffectiveConfig
) -> tuple[str, str] | None:
    """(cause, fix) for one mismatch, or None when this engine has nothing specific to say."""
    launch = asked.launch if isinstance(asked.launch, LlamaCppLaunch) else LlamaCppLaunch()
    if key == "context":
        return _context(asked_value, got_value, launch, got)
    if key == "slots":
        return (_slots_cause(got_value, asked.launch), f"pass -np {asked_value}")
    if key == "speculative" and asked_value:
        return _speculative(launch)
    if key == "model":
        return (
            "the server loaded or names another model",
            f"check -m, or name it with --alias {asked_value}",
        )
    return None


def _slots_cause(got_value: Any, launch: Any) -> str:
    """Without a command line, whether -np was given is unknown: say both possibilities."""
    if not isinstance(launch, LlamaCppLaunch):
        return (
            f"the server was started with -np {got_value}, or without -np (this build then chooses "
            "the slot count itself)"
        )
    if launch.parallel is None:
        return "-np was not given, so this build chose the slot count itself"
    return f"the server runs {got_value} slots"


def _speculative(launch: LlamaCppLaunch) -> tuple[str, str]:
    if launch.draft_model and launch.spec_type in (None, "none"):
        return (
            "the draft model loads but no slot speculates: this build drafts only with --spec-type "
            "(seen on b1-0c1e570: '-md' alone leaves /slots speculative=false)",
            "add --spec-type draft-simple (or draft-eagle3 / draft-mtp for such heads) beside -md",
        )
    return (
        "no slot reports speculative decoding: the draft did not load or this model's context cannot "
        "roll back (look for 'speculative decoding not supported' in the log)",
        "pass -md DRAFT.gguf with --spec-type draft-simple and read the server log",
    )


def _context(
    asked_value: int, per_slot: int, launch: LlamaCppLaunch, got: EffectiveConfig
) -> tuple[str, str] | None:
    slots = got.slots or launch.parallel or 1
    divided = slots > 1 and launch.kv_unified is not True and per_slot * slots >= asked_value > per_slot
    train = got.context_train
    if divided and (launch.ctx_size is None or per_slot * slots <= launch.ctx_size):
        flag = (
            f"-c is divided by -np {slots}"
            if launch.ctx_size
            else f"the context is divided among {slots} slots"
        )
        fix = f"add --kv-unified or use -np 1 (or -c {asked_value * slots} for {slots} full slots)"
        if train and asked_value > train:
            fix += f"; the model's training context {train} still caps each slot"
        return flag, fix
    if train and per_slot == train and asked_value > train:
        return (
            f"the slot context was capped at the model's training context {train} (n_ctx_train)",
            f"ask for at most {train}, or use a model trained for a longer context",
        )
    if launch.kv_unified_per_slot and per_slot == launch.kv_unified_per_slot:
        return (f"--kv-unified-per-slot caps each slot at {per_slot}", "raise or drop --kv-unified-per-slot")
    if per_slot < asked_value:
        return (
            "the running server was started with other flags (a smaller -c, --kv-unified-per-slot, or --fit "
            "shrinking the context to fit memory)",
            "compare its command line or log ('n_ctx_slot') with this one and restart with -c "
            f"{asked_value}" + (f" -np {slots} --kv-unified" if slots > 1 else ""),
        )
    return None


def notes(got: EffectiveConfig) -> tuple[str, ...]:
    """Things worth knowing about this server even when nothing was asked."""
    return ()
