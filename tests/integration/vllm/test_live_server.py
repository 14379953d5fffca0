"""The shared real vLLM server (``vllm_live``): serving on loopback, its environment, caches inside servelab's dirs,
and `servelab verify` and `servelab logs` against it (docs/reference/vllm-cpu.md §3, §9)."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import psutil

from servelab.cli.app import main
from servelab.verify import from_command, verify
from tests.integration.vllm.conftest import LIVE_KV_GIB


def _post(url: str, body: dict) -> dict:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def _kv_tokens(model_dir) -> int:
    """Tokens LIVE_KV_GIB holds: K and V, bf16, every layer's KV heads × head_dim."""
    config = json.loads((model_dir / "config.json").read_text())
    per_token = 2 * 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * config["head_dim"]
    return LIVE_KV_GIB * 2**30 // per_token


def test_serves_chat_on_loopback(vllm_live):
    assert vllm_live.url.startswith("http://127.0.0.1:")
    answer = _post(
        f"{vllm_live.url}/v1/chat/completions",
        {
            "model": str(vllm_live.model_dir),
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4,
            "ignore_eos": True,
        },
    )
    assert answer["usage"]["completion_tokens"] == 4
    assert vllm_live.server.failure() is None


def test_environment_and_caches_stay_inside_servelab_dirs(vllm_live):
    env = psutil.Process(vllm_live.server.pid).environ()
    runtime = vllm_live.cache_dir / "vllm" / "runtime"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == str(LIVE_KV_GIB)
    assert (env["HF_HUB_OFFLINE"], env["TRANSFORMERS_OFFLINE"]) == ("1", "1")
    assert (env["VLLM_NO_USAGE_STATS"], env["DO_NOT_TRACK"]) == ("1", "1")
    assert env["VLLM_CACHE_ROOT"] == str(runtime / "vllm")
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(runtime / "torchinductor")
    assert env["XDG_CACHE_HOME"] == str(runtime / "xdg")
    assert Path(env["TMPDIR"]).name.startswith(f"servelab-vllm-{os.getpid()}-")
    assert Path(env["TMPDIR"]) == vllm_live.server.run_tmp
    log = vllm_live.log_path.read_text()
    assert f"distributed_init_method=file://{env['TMPDIR']}/vllm_dist_" in log, (
        "gloo's file store is in TMPDIR"
    )
    assert list((runtime / "vllm" / "modelinfos").glob("*LlamaForCausalLM.json")), "vLLM's cache is ours"


def test_verify_reads_the_pool_blocks_and_settings(vllm_live, capsys):
    assert main(["verify", vllm_live.url, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    got = out["effective"]
    tokens = _kv_tokens(vllm_live.model_dir)
    assert out["engine"] == "vllm" and got["version"] == "0.32.0"
    assert got["context_per_slot"] == 2048
    assert got["max_total_tokens"] == tokens == 524_288
    assert got["kv_blocks"] * got["kv_block_size"] == tokens
    assert got["kv_block_size"] == 128  # the CPU backend's default block
    assert got["kv_cache_dtype"] == "auto"
    assert got["prefix_caching"] is True
    assert got["model"] == str(vllm_live.model_dir)


def test_a_different_launch_is_reported_as_mismatches(vllm_live, capsys):
    """Asked: the context and a 2 GiB pool of another launch; got: this server's 2048 and 1 GiB."""
    asked = f"vllm serve {vllm_live.model_dir} --max-model-len 4096"
    result = verify(vllm_live.url, from_command(asked))
    (m,) = result.mismatches
    assert (m.key, m.asked, m.got) == ("context", 4096, 2048)
    assert "--max-model-len 4096" in m.line
    code = main(
        [
            "verify",
            vllm_live.url,
            "--cmd",
            asked,
            "--expect",
            f"max_total_tokens={2 * _kv_tokens(vllm_live.model_dir)}",
            "--strict",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert {m["key"]: (m["asked"], m["got"]) for m in out["mismatches"]} == {
        "context": (4096, 2048),
        "max_total_tokens": (1_048_576, 524_288),
    }


def test_logs_explains_the_live_servers_own_lines(vllm_live, capsys):
    assert main(["logs", str(vllm_live.log_path), "--json"]) == 0
    found = {f["id"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert found["vllm.cpu.kv_cache_size"]["captures"]["tokens"] == f"{_kv_tokens(vllm_live.model_dir):,}"
    assert found["vllm.kv.max_concurrency"]["captures"] == {"tokens": "2,048", "concurrency": "256.00"}
    assert found["vllm.cpu.kv_space_set"]["captures"]["kv_gib"] == f"{LIVE_KV_GIB:.1f}"
    assert {"vllm.cpu.no_triton", "vllm.cpu.runner_v1", "vllm.cpu.no_tcmalloc", "vllm.cpu.no_iomp"} <= set(
        found
    )
    assert not {"vllm.engine.core_died", "vllm.engine.failed_start"} & set(found), "a healthy server"
