"""Secret flags in engine command lines: hidden for display, still usable to talk to the engine."""

from __future__ import annotations

from servelab.engines.flags import api_key_of, redact_argv


def test_redact_hides_both_spellings_and_nothing_else() -> None:
    argv = ["llama-server", "-m", "m.gguf", "--api-key", "sk-1", "--port", "8080", "--hf-token=hf_x"]
    assert redact_argv(argv) == [
        "llama-server",
        "-m",
        "m.gguf",
        "--api-key",
        "<redacted>",
        "--port",
        "8080",
        "--hf-token=<redacted>",
    ]
    assert argv[4] == "sk-1"  # the caller's list is not changed


def test_api_key_of_takes_the_last_one() -> None:
    assert api_key_of(["vllm", "serve", "m", "--api-key", "a", "--api-key=b"]) == "b"
    assert api_key_of(["llama-server", "-m", "m.gguf"]) is None


def test_an_engine_that_echoes_its_rejected_key_at_start_never_shows_it(tmp_path) -> None:
    import sys

    import pytest

    from servelab.engines.process import ManagedProcess
    from servelab.errors import EngineStartError

    script = "import sys; print('error: invalid argument: ' + sys.argv[1]); sys.exit(1)"
    process = ManagedProcess(
        [sys.executable, "-c", script, "--api-key=sk-echoed-789"], tmp_path / "engine.log"
    )
    process.start()
    with pytest.raises(EngineStartError) as caught:
        process.wait_healthy(lambda: False, timeout_s=10)
    assert "sk-echoed-789" not in str(caught.value) and "sk-echoed-789" not in caught.value.log_tail
    assert "<redacted>" in caught.value.log_tail


def test_take_api_keys_moves_every_key_out_of_argv() -> None:
    from servelab.engines.flags import take_api_keys

    argv = ["-c", "4096", "--api-key", "k1", "--api-key=k2", "--port", "1", "--api-key"]
    assert take_api_keys(argv) == (["-c", "4096", "--port", "1", "--api-key"], ["k1", "k2"])


def test_sglang_and_vllm_launchers_never_put_a_key_on_a_command_line() -> None:
    import pytest

    from servelab.engines.sglang.launch import start as start_sglang
    from servelab.engines.vllm.launch import _api_key
    from servelab.errors import ConfigError

    with pytest.raises(ConfigError, match="sglang reads its API key from its command line only"):
        start_sglang("m", ["--api-key", "k"], host="127.0.0.1", port=1, log_path=None, timeout_s=1)
    assert _api_key(["--api-key", "k", "--dtype", "bf16"]) == (["--dtype", "bf16"], "k")
    with pytest.raises(ConfigError, match="VLLM_API_KEY"):
        _api_key(["--api-key", "a", "--api-key", "b"])
