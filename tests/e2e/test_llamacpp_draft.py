"""The self-made draft models drive real speculative decoding in llama-server (what `servelab spec` reads).

In the pinned build `-md` alone only loads the draft (/props says speculative.types "none"); drafting
needs `--spec-type draft-simple`. A draft with the target's own shape and seed is the target, byte for byte
in its tensors, so greedy drafts are all accepted; the small random draft disagrees with the target.
"""

from __future__ import annotations

import json
import re
import urllib.request

from servelab.modelmake import make_model, shape_for

ACCEPTANCE = re.compile(r"draft acceptance = ([\d.]+) \(\s*(\d+) accepted /\s*(\d+) generated\)")


def _complete(url: str, n_predict: int) -> dict:
    body = json.dumps(
        {"prompt": "the model serves", "n_predict": n_predict, "ignore_eos": True, "temperature": 0}
    )
    request = urllib.request.Request(
        f"{url}/completion", data=body.encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as resp:
        return json.load(resp)


def test_identical_draft_is_accepted_and_random_draft_is_not(llama_server, model_files, tmp_path):
    twin = make_model(
        "draft",
        tmp_path / "twin.gguf",
        shape_for("draft", layers=4, hidden=128, heads=4, kv_heads=2, ffn=256),
    )
    rates = {}
    for name, draft in (("twin", twin.path), ("small", model_files["draft"])):
        server = llama_server(
            model_files["dense"], "-md", str(draft), "--spec-type", "draft-simple", "-c", "1024", "-np", "1"
        )
        timings = _complete(server.url, 48)["timings"]
        assert timings["predicted_n"] == 48 and timings["draft_n"] > 0
        server.stop()
        logged = ACCEPTANCE.search(server.log_path.read_text())
        assert logged is not None, "llama-server logs the draft acceptance line"
        assert (
            int(logged.group(2)) == timings["draft_n_accepted"] and int(logged.group(3)) == timings["draft_n"]
        )
        rates[name] = float(logged.group(1))
    assert rates["twin"] > 0.9
    assert rates["small"] < rates["twin"]


def test_draft_model_alone_does_not_speculate_in_this_build(llama_server, model_files):
    server = llama_server(model_files["dense"], "-md", str(model_files["draft"]), "-c", "1024", "-np", "1")
    assert "draft_n" not in _complete(server.url, 8)["timings"]
    with urllib.request.urlopen(f"{server.url}/props", timeout=10) as resp:
        params = json.load(resp)["default_generation_settings"]["params"]
    assert params["speculative.types"] == "none"
