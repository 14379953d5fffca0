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
