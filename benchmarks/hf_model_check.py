"""Do transformers' own loaders take the Hugging Face models servelab makes? One row per kind.

    python benchmarks/hf_model_check.py --python /path/to/venv/bin/python

The venv needs torch, transformers and tokenizers (for example
``python -m venv V && V/bin/pip install torch==2.13.0+cpu transformers tokenizers safetensors``).
This process makes each kind with ``servelab model make --format hf``; the venv's python then loads it
with AutoTokenizer and AutoModelForCausalLM (bf16), checks that no weight is missing or unexpected,
that a unicode prompt survives encode/decode, that the chat template renders ChatML, and that a forward
pass and an 8-token greedy generation give finite logits. Prints the table and exits 1 if a row fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if TYPE_CHECKING:
    from servelab.modelmake import MadeModel

PROMPT = "Héllo wörld: 你好 🙂 def f(x): return x**2\t<|im_end|> tail"
CHAT = [{"role": "user", "content": "hi there"}]
CHATML = "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n"


def consume(directory: str) -> dict[str, object]:
    """Run inside the transformers venv: load ``directory`` and report what its loaders saw."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(directory)
    model, info = AutoModelForCausalLM.from_pretrained(
        directory, dtype=torch.bfloat16, output_loading_info=True
    )
    load_ms = (time.perf_counter() - start) * 1000
    chat = tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    ids = torch.tensor([tok(chat)["input_ids"]])
    start = time.perf_counter()
    with torch.no_grad():
        logits = model(ids).logits
        generated = model.generate(ids, max_new_tokens=8, do_sample=False)
    return {
        "model_class": type(model).__name__,
        "params": sum(p.numel() for p in model.parameters()),
        "missing": len(info.get("missing_keys", [])),
        "unexpected": len(info.get("unexpected_keys", [])),
        "roundtrip": tok.decode(tok(PROMPT)["input_ids"]) == PROMPT,
        "chatml": chat == CHATML,
        "eos": tok.eos_token,
        "finite": bool(torch.isfinite(logits).all()) and generated.shape[1] == ids.shape[1] + 8,
        "logit_std": float(logits.float().std()),
        "load_ms": load_ms,
        "forward_ms": (time.perf_counter() - start) * 1000,
        "transformers": __import__("transformers").__version__,
    }


def check(python: str) -> int:
    from servelab.modelmake import HF_KINDS, make_model

    rows: list[tuple[str, MadeModel, dict[str, object]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in HF_KINDS:
            made = make_model(kind, Path(tmp) / kind, fmt="hf")
            done = subprocess.run(
                [python, __file__, "--consume", str(made.path)], capture_output=True, text=True, timeout=600
            )
            if done.returncode != 0:
                rows.append((kind, made, {"error": done.stderr.strip().splitlines()[-1:]}))
                continue
            rows.append((kind, made, json.loads(done.stdout.strip().splitlines()[-1])))
    return _print(rows)


def _print(rows: list[tuple[str, MadeModel, dict[str, object]]]) -> int:
    head = ["kind", "class", "params made", "params loaded", "missing", "unexpected", "round trip", "ChatML"]
    head += ["eos", "finite", "logit std", "load ms", "fwd+gen ms"]
    table, failed = [head], 0
    for kind, made, r in rows:
        if "error" in r:
            table.append([kind, f"failed: {r['error']}"])
            failed += 1
            continue
        ok = r["missing"] == r["unexpected"] == 0 and r["roundtrip"] and r["chatml"] and r["finite"]
        failed += not (ok and r["params"] == made.n_params)
        cells = [kind, r["model_class"], made.n_params, r["params"], r["missing"], r["unexpected"]]
        cells += [r["roundtrip"], r["chatml"], r["eos"], r["finite"], f"{r['logit_std']:.3f}"]
        cells += [f"{r['load_ms']:.0f}", f"{r['forward_ms']:.0f}"]
        table.append([str(c) for c in cells])
    widths = [max(len(row[i]) for row in table if i < len(row)) for i in range(len(head))]
    for row in table:
        print("  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row)))
    versions = {str(r["transformers"]) for _, _, r in rows if "transformers" in r}
    print(f"transformers {', '.join(sorted(versions))}; {failed} of {len(rows)} kinds failed")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="a python with torch + transformers")
    parser.add_argument("--consume", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consume:
        print(json.dumps(consume(args.consume)))
        sys.exit(0)
    sys.exit(check(args.python))
