"""servelab.redact: the one marker and name test that probe, verify, store, process and the client share."""

from __future__ import annotations

import pytest

from servelab.redact import REDACTED, is_secret_name, redact, redact_argv, redact_text


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "apikey",
        "API-KEY",
        "X-Api-Key",
        "server_api_key",
        "Authorization",
        "password",
        "client_secret",
        "hf_token",
        "HF_TOKEN",
        "access_token",
        "bearer_token",
        "--api-key",
        "--hf-token",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["max_tokens", "bos_token", "tokenizer", "model", "key", "kv_dtype", "api_base"]
)
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


def test_redact_replaces_secret_values_in_nested_trees_and_leaves_empty_ones() -> None:
    tree = {
        "server_info": {"api_key": "sk-1", "admin_api_key": None, "tp_size": 2},
        "list": [{"password": "pw"}],
    }
    assert redact(tree) == {
        "server_info": {"api_key": REDACTED, "admin_api_key": None, "tp_size": 2},
        "list": [{"password": REDACTED}],
    }
    assert tree["server_info"]["api_key"] == "sk-1"  # a copy: the input is untouched


def test_redact_text_hides_each_known_secret_and_ignores_missing_ones() -> None:
    assert redact_text("bad key sk-1 (sk-1)", ["sk-1", None, ""]) == f"bad key {REDACTED} ({REDACTED})"
    assert redact_text("nothing", []) == "nothing"


def test_redact_argv_hides_both_spellings_of_the_named_flags_only() -> None:
    argv = ["serve", "--api-key", "k1", "--token=t", "--port", "8000", "--api-key"]
    assert redact_argv(argv, ("--api-key", "--token")) == [
        "serve",
        "--api-key",
        REDACTED,
        f"--token={REDACTED}",
        "--port",
        "8000",
        "--api-key",
    ]
