"""The planner's llama.cpp prediction against what a real llama-server logs (-lv 4), buffer by buffer.

Weights, KV and recurrent state must agree within 1% (or the log's print precision, 0.005 MiB), the compute
buffer within 25%, for the dense and hybrid models over several -c / -np / unified / cache-type settings.
A third model, a hybrid with a wide Gated DeltaNet state (head dim 64, 8 value heads), makes the state
buffer large enough (0.8 to 3.2 MiB) to check it at a true 1%, and makes the GDN scratch, not the FFN,
the largest intermediate of the compute graph. `python benchmarks/plan_vs_llamacpp.py` prints every figure.
"""

from __future__ import annotations

import pytest

from servelab.engines.llamacpp.logparse import compare_buffers, parse_server_log
from servelab.engines.llamacpp.memory import llamacpp_memory
from servelab.model import load_model
from servelab.modelmake import make_model, shape_for

SETTINGS = [  # (-c, -np, --kv-unified, cache type)
    (2048, 1, False, "f16"),
    (8192, 4, False, "f16"),
    (8192, 4, True, "f16"),
    (4096, 2, False, "q8_0"),
    (1000, 3, False, "f16"),  # not a multiple of 256 nor of -np: llama.cpp pads and rounds
]


def _launch_args(ctx: int, slots: int, unified: bool, cache: str) -> list[str]:
    args = ["-c", str(ctx), "-np", str(slots), "-ctk", cache, "-ctv", cache, "-lv", "4"]
    return args + (["--kv-unified"] if unified else [])


def _checks(llama_server, path, setting):
    ctx, slots, unified, cache = setting
    server = llama_server(path, *_launch_args(*setting))
    server.stop()
    logged = parse_server_log(server.log_path.read_text()).main
    predicted = llamacpp_memory(
        load_model(str(path)),
        n_ctx=ctx,
        n_parallel=slots,
        kv_unified=unified,
        cache_type_k=cache,
        cache_type_v=cache,
        n_gpu_layers=0,
    )
    assert predicted.n_ctx == logged.context_int("n_ctx") and predicted.n_ctx_seq == logged.context_int(
        "n_ctx_seq"
    )
    return {check.buffer: check for check in compare_buffers(predicted, logged)}


@pytest.fixture(scope="module")
def wide_hybrid(tmp_path_factory):
    path = tmp_path_factory.mktemp("wide") / "wide-hybrid.gguf"
    return make_model("hybrid", path, shape_for("hybrid", ssm_state=64, ssm_value_heads=8)).path


@pytest.mark.parametrize("kind", ["dense", "hybrid"])
@pytest.mark.parametrize(
    "setting", SETTINGS, ids=lambda s: f"c{s[0]}-np{s[1]}{'-kvu' if s[2] else ''}-{s[3]}"
)
def test_planner_matches_the_log(llama_server, model_files, kind, setting):
    checks = _checks(llama_server, model_files[kind], setting)
    for name in ("model_bytes", "kv_bytes", "recurrent_bytes"):
        assert checks[name].within(0.01), checks[name]
    assert checks["compute_bytes"].within(0.25), checks["compute_bytes"]
    if kind == "hybrid":
        assert checks["recurrent_bytes"].logged_bytes > 0


@pytest.mark.parametrize(
    "setting", SETTINGS, ids=lambda s: f"c{s[0]}-np{s[1]}{'-kvu' if s[2] else ''}-{s[3]}"
)
def test_planner_on_a_wide_state_hybrid(llama_server, wide_hybrid, setting):
    checks = _checks(llama_server, wide_hybrid, setting)
    assert checks["recurrent_bytes"].logged_bytes >= 800 * 1024  # big enough that 0.005 MiB is under 1%
    for name in ("model_bytes", "kv_bytes", "recurrent_bytes"):
        rel = checks[name].relative_error
        assert rel is not None and abs(rel) <= 0.01, checks[name]
    assert checks["compute_bytes"].within(0.25), checks["compute_bytes"]
