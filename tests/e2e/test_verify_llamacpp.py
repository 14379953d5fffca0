"""`servelab verify` against a REAL llama-server: the per-slot division, the n_ctx_train cap, compose, --strict.

Servers come from the shared ``llama_server`` fixture (tests/engine_fixtures.py): one thread, 127.0.0.1,
models the project makes itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.modelmake import make_model, shape_for
from servelab.verify import from_command, parse_expect, verify

# The field report's compose service (a llama.cpp fork built from a Dockerfile; entrypoint llama-server),
# with the context scaled down from 262144 to 8192 so it runs on this machine's tiny model.
FIELD_REPORT_COMPOSE = """\
services:
  llama:
    build: .
    ports: ["8080:8080"]
    volumes: ["./models:/models"]
    command: ["-m", "/models/dense.gguf", "--host", "0.0.0.0", "--port", "8080",
              "-ngl", "99", "-c", "8192", "-fa", "on", "-np", "4",
              "--temp", "0.7", "--top-p", "0.95", "--top-k", "20"]
    healthcheck:
      test: ["CMD", "curl", "-f", "http://localhost:8080/health"]
      interval: 30s
"""


# The servers below are read by several tests (verify only reads a server), so each is started once a module.
@pytest.fixture(scope="module")
def divided_url(module_llama_server, model_files) -> str:
    """-c 8192 -np 4 without --kv-unified: each slot gets 2048."""
    return module_llama_server(model_files["dense"], "-c", "8192", "-np", "4").url


@pytest.fixture(scope="module")
def capped_url(module_llama_server, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A model trained for 2048 tokens, started with -c 8192 -np 1: llama-server caps the slot at 2048."""
    folder = tmp_path_factory.mktemp("short")
    model = make_model("dense", folder / "dense.gguf", shape_for("dense", ctx_train=2048)).path
    return module_llama_server(model, "-c", "8192", "-np", "1").url


@pytest.mark.parametrize("kind", ["dense", "hybrid"])
def test_per_slot_division_is_caught_with_its_cause_and_fix(llama_server, model_files, kind: str) -> None:
    url = llama_server(model_files[kind], "-c", "8192", "-np", "4").url
    result = verify(url, from_command(f"llama-server -m /models/{kind}.gguf -c 8192 -np 4"))
    assert result.engine == "llamacpp"
    assert (result.effective.context_per_slot, result.effective.slots) == (2048, 4)
    assert result.effective.context_train == 8192
    (m,) = result.mismatches
    assert (m.key, m.asked, m.got) == ("context", 8192, 2048)
    assert m.line == (
        "context per slot is 2048, not 8192: -c is divided by -np 4; "
        "add --kv-unified or use -np 1 (or -c 32768 for 4 full slots)"
    )
    assert set(result.matched) == {"slots", "model"}


def test_verify_json_shape_and_strict_exit(divided_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", divided_url, "--expect", "context=8192", "--json", "--strict"])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err == ""
    out = json.loads(captured.out)
    assert out["engine"] == "llamacpp"
    assert {
        k: out["effective"][k] for k in ("context_per_slot", "slots", "context_train", "kv_cache_dtype")
    } == {"context_per_slot": 2048, "slots": 4, "context_train": 8192, "kv_cache_dtype": None}
    assert out["effective"]["model"].endswith(".gguf")
    (m,) = out["mismatches"]
    assert (m["key"], m["asked"], m["got"]) == ("context", 8192, 2048)
    assert m["why"] == "context per slot is 2048, not 8192: the context is divided among 4 slots"
    assert m["fix"].startswith("add --kv-unified")


def test_without_strict_a_mismatch_still_exits_zero(
    divided_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", divided_url, "--expect", "context=8192"]) == 0
    out = capsys.readouterr().out
    assert "MISMATCH context per slot is 2048, not 8192" in out


def test_field_report_compose_service_is_read_and_diffed(
    divided_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(FIELD_REPORT_COMPOSE)
    code = main(["verify", divided_url, "--compose", str(compose), "--json", "--strict"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["asked"] == {"context": 8192, "slots": 4, "model": "dense.gguf"}
    assert [(m["key"], m["source"]) for m in out["mismatches"]] == [("context", "compose llama")]
    assert "-c is divided by -np 4" in out["mismatches"][0]["why"]


def test_the_right_launch_verifies_clean(
    llama_server, model_files, capsys: pytest.CaptureFixture[str]
) -> None:
    """-c 8192 -np 4 --kv-unified lets every slot use the whole 8192."""
    url = llama_server(model_files["dense"], "-c", "8192", "-np", "4", "--kv-unified").url
    cmd = "llama-server -m /models/dense.gguf -c 8192 -np 4 --kv-unified"
    assert main(["verify", url, "--cmd", cmd, "--strict"]) == 0
    out = capsys.readouterr().out
    assert "OK the server has what was asked" in out and "MISMATCH" not in out


def test_training_context_cap_is_caught(capped_url: str) -> None:
    result = verify(capped_url, parse_expect(["context=8192", "slots=1"]))
    assert (result.effective.context_per_slot, result.effective.context_train) == (2048, 2048)
    (m,) = result.mismatches
    assert m.line == (
        "context per slot is 2048, not 8192: the slot context was capped at the model's training context 2048 "
        "(n_ctx_train); ask for at most 2048, or use a model trained for a longer context"
    )


def test_kv_dtype_is_reported_unverifiable_not_guessed(capped_url: str) -> None:
    result = verify(capped_url, parse_expect(["kv_dtype=q8_0"]))
    assert result.mismatches == ()
    (u,) = result.unverified
    assert u.key == "kv_dtype" and "llama_kv_cache" in u.reason


def test_draft_model_without_spec_type_is_caught(llama_server, model_files) -> None:
    """On this build -md loads the draft but nothing speculates until --spec-type is given."""
    draft = str(model_files["draft"])
    url = llama_server(model_files["dense"], "-md", draft, "-c", "2048", "-np", "1").url
    result = verify(url, from_command(f"llama-server -m dense.gguf -md {draft} -c 2048 -np 1"))
    assert result.effective.speculative == {"enabled": False}
    (m,) = result.mismatches
    assert m.key == "speculative" and m.why.startswith(
        "speculative decoding is off, not on: the draft model loads"
    )
    assert m.fix.startswith("add --spec-type draft-simple")


def test_draft_model_with_spec_type_verifies(llama_server, model_files) -> None:
    draft = str(model_files["draft"])
    args = ("-md", draft, "--spec-type", "draft-simple", "-c", "2048", "-np", "1")
    url = llama_server(model_files["dense"], *args).url
    result = verify(url, from_command(["llama-server", "-m", "dense.gguf", *args]))
    assert result.effective.speculative == {"enabled": True}
    assert result.mismatches == () and "speculative" in result.matched


def test_without_np_this_build_runs_four_unified_slots(llama_server, model_files) -> None:
    """No -np: the build picks 4 slots and unifies the KV cache, so each slot keeps the whole -c."""
    url = llama_server(model_files["dense"], "-c", "8192").url
    asked = from_command("llama-server -m dense.gguf -c 8192").merged(parse_expect(["slots=1"]))
    result = verify(url, asked)
    assert (result.effective.context_per_slot, result.effective.slots) == (8192, 4)
    (m,) = result.mismatches
    assert (
        m.line
        == "slots is 4, not 1: -np was not given, so this build chose the slot count itself; pass -np 1"
    )
    assert "context" in result.matched
