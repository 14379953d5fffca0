"""`--hf` against a real HTTP server on 127.0.0.1 serving a fixture hub layout (`/{repo}/resolve/main/{file}`).

The server honours `Range` like the Hugging Face hub (206 + Content-Range) and records every request, so the
tests can check that only headers are fetched and that the token is sent but never echoed.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from servelab.errors import ConfigError, ModelFormatError
from servelab.model import load_model
from servelab.model.hub import fetch_model
from tests.unit.model_files import write_safetensors

REPO = "acme/tiny-model"
CONFIG = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 100,
    "max_position_embeddings": 2048,
}
SECRET = "hf_secret_token_123"


@dataclass
class Hub:
    url: str
    root: Path
    requests: list[dict[str, str]] = field(default_factory=list)
    ranges_ignored: bool = False
    redirect_shards: bool = False  # answer shard requests with a 302 to /cdn/…, like the real hub


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hub.requests.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            if hub.redirect_shards and self.path.endswith(".safetensors") and "/resolve/" in self.path:
                self.send_response(302)
                self.send_header("Location", "/cdn" + self.path.replace("/resolve/main", ""))
                self.end_headers()
                return
            cdn = re.fullmatch(r"/cdn/([^/]+/[^/]+)/(.+)", self.path)
            match = cdn or re.fullmatch(r"/([^/]+/[^/]+)/resolve/main/(.+)", self.path)
            file = hub.root / match.group(1) / match.group(2) if match else None
            if file is None or not file.is_file():
                self.send_error(404)
                return
            data = file.read_bytes()
            wanted = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            if wanted and not hub.ranges_ignored:
                start, end = int(wanted.group(1)), min(int(wanted.group(2)), len(data) - 1)
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                data = data[start : end + 1]
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:  # keep test output clean
            return

    return Handler


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    repo = tmp_path / REPO
    repo.mkdir(parents=True)
    (repo / "config.json").write_text(json.dumps(CONFIG))
    write_safetensors(
        repo / "model-00001-of-00002.safetensors", {"model.embed_tokens.weight": ("BF16", (100, 64))}
    )
    write_safetensors(
        repo / "model-00002-of-00002.safetensors",
        {"lm_head.weight": ("BF16", (100, 64)), "model.layers.0.mlp.up_proj.weight": ("BF16", (128, 64))},
    )
    (repo / "model.safetensors.index.json").write_text(
        json.dumps(
            {
                "weight_map": {
                    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                    "lm_head.weight": "model-00002-of-00002.safetensors",
                    "model.layers.0.mlp.up_proj.weight": "model-00002-of-00002.safetensors",
                }
            }
        )
    )
    hub = Hub("", tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield hub
    server.shutdown()
    server.server_close()


def test_fetch_config_and_headers_by_range(hub: Hub) -> None:
    spec = load_model(REPO, hf=True, hf_endpoint=hub.url)
    assert spec.source == "hf" and spec.weights_exact and spec.name == REPO
    assert {w.name: w.bytes for w in spec.weights} == {"embedding": 12_800, "lm_head": 12_800, "text": 16_384}
    shard_gets = [r for r in hub.requests if r["path"].endswith(".safetensors")]
    ranges = [r["range"] for r in shard_gets]
    assert ranges[:2] == ["bytes=0-7", f"bytes=8-{8 + _header_len(hub, 1) - 1}"]
    assert all("range" in r for r in shard_gets)  # never a whole shard


def _header_len(hub: Hub, shard: int) -> int:
    data = (hub.root / REPO / f"model-0000{shard}-of-00002.safetensors").read_bytes()
    return int.from_bytes(data[:8], "little")


def test_endpoint_from_env_and_token_sent_never_echoed(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    fetch_model(REPO)
    assert {r.get("authorization") for r in hub.requests} == {f"Bearer {SECRET}"}
    with pytest.raises(ConfigError) as info:
        fetch_model("acme/missing")
    assert "HTTP 404" in str(info.value) and SECRET not in str(info.value)


def test_server_that_ignores_range_still_reads_only_the_header(hub: Hub) -> None:
    hub.ranges_ignored = True
    spec = fetch_model(REPO, endpoint=hub.url)
    assert spec.weight_group("text").bytes == 16_384


def test_hostile_remote_header(hub: Hub) -> None:
    shard = hub.root / REPO / "model-00001-of-00002.safetensors"
    shard.write_bytes((10**15).to_bytes(8, "little") + b"{}")
    with pytest.raises(ModelFormatError, match="header length 1000000000000000 does not fit"):
        fetch_model(REPO, endpoint=hub.url)


def test_bad_repo_id_and_unreachable_endpoint() -> None:
    with pytest.raises(ConfigError, match="--hf needs a repository id like Org/Name"):
        fetch_model("../etc", endpoint="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match=r"cannot reach http://127\.0\.0\.1:9"):
        fetch_model(REPO, endpoint="http://127.0.0.1:9")


def test_redirect_keeps_range_and_drops_the_token(hub: Hub) -> None:
    hub.redirect_shards = True
    spec = fetch_model(REPO, endpoint=hub.url, token=SECRET)
    assert spec.weight_group("embedding").bytes == 12_800
    cdn = [r for r in hub.requests if r["path"].startswith("/cdn/")]
    assert cdn and all("range" in r and "authorization" not in r for r in cdn)
    assert all(r.get("authorization") == f"Bearer {SECRET}" for r in hub.requests if "/resolve/" in r["path"])


def test_catalog_short_name_resolves_to_the_hub_id(hub: Hub) -> None:
    repo = hub.root / "Qwen" / "Qwen3-8B"
    repo.mkdir(parents=True)
    (repo / "config.json").write_text(json.dumps(CONFIG))
    spec = load_model("qwen3-8b", hf=True, hf_endpoint=hub.url)
    assert spec.name == "Qwen/Qwen3-8B" and spec.source == "hf" and spec.hidden_size == 64
    assert hub.requests[0]["path"] == "/Qwen/Qwen3-8B/resolve/main/config.json"


def test_oversized_config_is_refused(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("servelab.model.hub.MAX_JSON_BYTES", 64)
    with pytest.raises(ModelFormatError, match=r"config\.json is \d+ bytes, more than 64"):
        fetch_model(REPO, endpoint=hub.url)
