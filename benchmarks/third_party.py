"""GuideLLM and AIPerf against `servelab sim`: the server and workload of client_overhead.py, their figures.

Each tool runs as a subprocess from its own environment (`pip install guidellm aiperf` in a venv; nothing of
theirs is imported here), pinned to one CPU (sched_setaffinity before exec, as `taskset -c CPU`; its worker
processes inherit it) and offline: HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 DO_NOT_TRACK=1,
HF_HOME in a temp dir. Their tokenizer is written there by the tool's own Python: word-level, so each sim output
word "tN" is one token. It sits in a fake hub cache as `servelab/sim-tokenizer`, because aiperf 0.13 in offline
mode looks even a local path up in the hub cache. The workload: N closed-loop streams, a 16-token prompt, exactly
T output tokens (ignore_eos), S seconds of load. The commands (OUT: a temp dir, TOK: the tokenizer dir):

    guidellm run --backend kind=openai_http,target=URL,model=sim-model --profile kind=concurrent,streams=N
      --constraint kind=max_duration,seconds=S --data kind=synthetic_text,prompt_tokens=16,output_tokens=T
      --tokenizer kind=huggingface_auto,model=TOK --output kind=json,path=OUT/guidellm.json
      --disable-console-interactive
    aiperf profile --model sim-model --url URL --endpoint-type chat --streaming --tokenizer servelab/sim-tokenizer
      --concurrency N --benchmark-duration S --benchmark-grace-period 10 --isl 16 --isl-stddev 0 --osl T
      --osl-stddev 0 --extra-inputs ignore_eos:true --extra-inputs min_tokens:T --ui-type none
      --no-server-metrics --no-gpu-telemetry --output-artifact-dir OUT --export-level records

A row: achieved_ev_s is the tool's own output tokens/s (one token per SSE event here): guidellm's
output_tokens_per_second over all requests (those cut at the deadline included), aiperf's output_token_throughput.
ttft/itl p50/p99 are the tool's percentiles; both tools take ITL per request, (last token − first)/(tokens − 1),
so their ITL percentiles are over per-request means, not gaps. From the sim's log (GET /sim/requests, CLOCK_MONOTONIC)
the same requests give the truth: sim_ev_s, chunks the sim wrote to the tool per second in the steady window (all
streams running); sim_ttft_p99_ms, from the sim reading a request's headers to writing its first chunk (over 5 ms
when the tool sent the body late); sim_itl_p99_ms, per-request ITL as the tools define it; sim_tokens, chunks per
request (main() runs the sim with --eos-after 50: 200 shows ignore_eos was sent and honoured); first_err_p50/p99_ms,
the tool's first-token stamp minus the sim's write of that chunk (requests matched by id: aiperf sends X-Request-ID,
guidellm none, so its response id "sim-N" is the sim's key; the tools stamp with the wall clock, mapped to
CLOCK_MONOTONIC by one offset read here).

    python benchmarks/third_party.py        # both tools at 50/150/250 streams, each against its own sim
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from servelab.bench.metrics import percentile

TOKENIZER_REPO = "servelab/sim-tokenizer"
SNAPSHOT = "0" * 40
MAKE_TOKENIZER = """import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
vocab = {"x": 0, **{f"t{i}": i + 1 for i in range(16384)}}
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="x"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(sys.argv[1])
"""
OFFLINE = dict(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", DO_NOT_TRACK="1")
KEYS = ("achieved_ev_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "failed")


def find_tools() -> dict[str, str | None]:
    """guidellm and aiperf: on PATH, else in $SERVELAB_TOOLS_VENV/bin (e.g. a venv at /tmp/tools-venv)."""
    venv_bin = Path(os.environ.get("SERVELAB_TOOLS_VENV", "/nonexistent")) / "bin"
    return {
        name: shutil.which(name) or shutil.which(name, path=str(venv_bin)) for name in ("guidellm", "aiperf")
    }


def _tool_env(tmp: Path) -> dict[str, str]:
    """Offline (no hub, no datasets download, no tracking), its hub cache under ``tmp``."""
    return {**os.environ, **OFFLINE, "HF_HOME": str(tmp / "hf"), "NO_COLOR": "1", "COLUMNS": "200"}


def make_tokenizer(exe: str, tmp: Path) -> Path:
    """The word-level tokenizer, written by the Python in ``exe``'s shebang into a hub cache under ``tmp``."""
    with open(exe, "rb") as script:
        shebang = script.readline(500).decode(errors="replace")
    if not shebang.startswith("#!"):
        raise OSError(f"{exe} is not a script with a #! line")
    python = shebang.removeprefix("#!").strip()
    repo = tmp / "hf" / "hub" / ("models--" + TOKENIZER_REPO.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(SNAPSHOT)
    snapshot = repo / "snapshots" / SNAPSHOT
    argv = [python, "-c", MAKE_TOKENIZER, str(snapshot)]
    subprocess.run(argv, check=True, env=_tool_env(tmp), capture_output=True)
    return snapshot


def _run(cmd: list[str], cpu: int | None, env: dict, timeout_s: float, log: Path) -> str | None:
    """Run ``cmd`` pinned to ``cpu``; None when it exited 0, otherwise why not (its last error line)."""
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    with log.open("w") as out:
        try:
            run = subprocess.run(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout_s, preexec_fn=pin
            )
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout_s:.0f} s"
    if run.returncode == 0:
        return None
    lines = [line.strip(" │") for line in log.read_text(errors="replace").splitlines() if line.strip(" │")]
    errors = [line for line in lines if "error" in line.lower()] or lines or ["no output"]
    return f"exit {run.returncode}: {errors[-1][:200]}"


def _row(tool: str, streams: int, note: str = "", **values) -> dict:
    return {"tool": tool, "streams": streams, **dict.fromkeys(KEYS), **values, "note": note}


def sim_log(url: str) -> dict | None:
    """The sim's per-request log, None when ``url`` is no sim."""
    try:
        with urllib.request.urlopen(url + "/sim/requests", timeout=60) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def _pcts(name: str, source: dict) -> dict:
    return {f"{name}_p50_ms": source.get("p50"), f"{name}_p99_ms": source.get("p99")}


def _run_tool(
    tool: str, exe: str, url: str, streams: int, seconds: float, cpu: int | None, command, read
) -> dict:
    """Tokenizer, run, read: ``command(tmp, tokenizer_dir) -> argv``, ``read(tmp) -> (row values, stamps)``."""
    with tempfile.TemporaryDirectory(prefix=f"servelab-{tool}-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            tokenizer = make_tokenizer(exe, tmp)
        except (OSError, subprocess.CalledProcessError) as exc:
            return _row(tool, streams, f"no tokenizer made with {exe}'s Python: {exc}")
        before = set(sim_log(url) or ())
        failure = _run(command(tmp, tokenizer), cpu, _tool_env(tmp), seconds + 180, tmp / "log.txt")
        if failure:
            return _row(tool, streams, failure)
        try:
            values, stamps = read(tmp)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            return _row(tool, streams, f"its output could not be read: {exc!r}")
    return _row(tool, streams, **values, **versus_sim(url, before, stamps))


def run_guidellm(
    exe: str, url: str, streams: int, output_tokens: int, seconds: float, cpu: int | None = 0
) -> dict:
    """One guidellm concurrent run; a row (see the module docstring), a note instead of numbers on failure."""

    def command(tmp: Path, tokenizer: Path) -> list[str]:
        return [
            exe,
            "run",
            "--backend",
            f"kind=openai_http,target={url},model=sim-model",
            "--profile",
            f"kind=concurrent,streams={streams}",
            "--constraint",
            f"kind=max_duration,seconds={seconds}",
            "--data",
            f"kind=synthetic_text,prompt_tokens=16,output_tokens={output_tokens}",
            "--tokenizer",
            f"kind=huggingface_auto,model={tokenizer}",
            "--output",
            f"kind=json,path={tmp / 'guidellm.json'}",
            "--disable-console-interactive",
        ]

    def read(tmp: Path) -> tuple[dict, list]:
        bench = json.loads((tmp / "guidellm.json").read_text())["benchmarks"][0]
        metrics, state = bench["metrics"], bench["scheduler_state"]
        timings = [
            (r["response_id"], r["info"]["timings"]["first_token_iteration"])
            for r in bench["requests"]["successful"]
        ]
        values = {
            "achieved_ev_s": metrics["output_tokens_per_second"]["total"]["mean"],
            **_pcts("ttft", metrics["time_to_first_token_ms"]["successful"]["percentiles"]),
            **_pcts("itl", metrics["inter_token_latency_ms"]["successful"]["percentiles"]),
            "failed": state["errored_requests"],
            "note": f"{state['cancelled_requests']} cut at the deadline",
        }
        return values, [(key, first * 1e9) for key, first in timings if key and first]

    return _run_tool("guidellm", exe, url, streams, seconds, cpu, command, read)


def run_aiperf(
    exe: str, url: str, streams: int, output_tokens: int, seconds: float, cpu: int | None = 0
) -> dict:
    """One aiperf concurrency run; a row (see the module docstring), a note instead of numbers on failure."""

    def command(tmp: Path, tokenizer: Path) -> list[str]:
        return [
            exe,
            "profile",
            "--model",
            "sim-model",
            "--url",
            url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--tokenizer",
            TOKENIZER_REPO,
            "--concurrency",
            str(streams),
            "--benchmark-duration",
            str(seconds),
            "--benchmark-grace-period",
            "10",
            "--isl",
            "16",
            "--isl-stddev",
            "0",
            "--osl",
            str(output_tokens),
            "--osl-stddev",
            "0",
            "--extra-inputs",
            "ignore_eos:true",
            "--extra-inputs",
            f"min_tokens:{output_tokens}",
            "--ui-type",
            "none",
            "--no-server-metrics",
            "--no-gpu-telemetry",
            "--output-artifact-dir",
            str(tmp / "out"),
            "--export-level",
            "records",
        ]

    def read(tmp: Path) -> tuple[dict, list]:
        summary = json.loads((tmp / "out" / "profile_export_aiperf.json").read_text())
        records = [json.loads(line) for line in (tmp / "out" / "profile_export.jsonl").open()]
        errors = (summary.get("error_request_count") or {}).get("avg", 0)
        values = {
            "achieved_ev_s": summary["output_token_throughput"]["avg"],
            "failed": int(errors),
            **_pcts("ttft", summary["time_to_first_token"]),
            **_pcts("itl", summary["inter_token_latency"]),
        }
        starts = [(r["metadata"], r.get("metrics", {}).get("time_to_first_token")) for r in records]
        return values, [(m["x_request_id"], m["request_start_ns"] + t["value"] * 1e6) for m, t in starts if t]

    return _run_tool("aiperf", exe, url, streams, seconds, cpu, command, read)


def versus_sim(url: str, before: set[str], stamps: list[tuple[str, float]]) -> dict:
    """The sim's truth for the requests it saw since ``before``; ``stamps`` (id, first-token wall-clock ns)."""
    wall_minus_mono = time.time_ns() - time.monotonic_ns()
    log = sim_log(url)
    if log is None:
        return {}
    entries = [e for k, e in log.items() if k not in before and e["chunks_ns"]]
    written = {k: e["chunks_ns"][0] for k, e in log.items() if e["chunks_ns"]}
    first = [(wall - wall_minus_mono - written[k]) / 1e6 for k, wall in stamps if k in written]
    ttft = [(e["chunks_ns"][0] - e["t0_ns"]) / 1e6 for e in entries]
    chunks = [e["chunks_ns"] for e in entries if len(e["chunks_ns"]) > 1]
    itl = [(c[-1] - c[0]) / 1e6 / (len(c) - 1) for c in chunks]
    return {
        "sim_ev_s": steady_rate(entries),
        "sim_ttft_p99_ms": percentile(ttft, 99),
        "sim_itl_p99_ms": percentile(itl, 99),
        "sim_tokens": percentile([len(e["chunks_ns"]) for e in entries], 50),
        "first_err_p50_ms": percentile(first, 50),
        "first_err_p99_ms": percentile(first, 99),
        "matched": len(first),
    }


def steady_rate(entries: list[dict]) -> float | None:
    """Chunks written per second between one request length after the first arrival and one before the last write."""
    if not entries:
        return None
    length_ns = sorted(e["chunks_ns"][-1] - e["t0_ns"] for e in entries)[len(entries) // 2]
    lo = min(e["t0_ns"] for e in entries) + length_ns
    hi = max(e["chunks_ns"][-1] for e in entries) - length_ns
    if hi <= lo:
        return None
    return sum(lo <= c <= hi for e in entries for c in e["chunks_ns"]) / ((hi - lo) / 1e9)


COLUMNS = (
    ("tool", 8, None),
    ("streams", 7, None),
    ("achieved_ev_s", 13, 0),
    ("sim_ev_s", 8, 0),
    ("ttft_p50_ms", 11, 2),
    ("ttft_p99_ms", 11, 2),
    ("sim_ttft_p99_ms", 15, 2),
    ("itl_p50_ms", 10, 3),
    ("itl_p99_ms", 10, 3),
    ("sim_itl_p99_ms", 14, 3),
    ("first_err_p50_ms", 16, 2),
    ("first_err_p99_ms", 16, 2),
    ("sim_tokens", 10, 0),
    ("failed", 6, None),
)


def _cell(value, width: int, decimals: int | None) -> str:
    if value is None:
        return "-".rjust(width)
    return f"{value:>{width}.{decimals}f}" if decimals is not None else str(value).rjust(width)


def format_row(row: dict) -> str:
    """One line of the table: each column right-aligned, '-' where the value is missing, then the note."""
    cells = " ".join(_cell(row.get(key), width, decimals) for key, width, decimals in COLUMNS)
    return cells + (f"  {row['note']}" if row.get("note") else "")


def main() -> None:
    from client_overhead import sim  # the same server as the client benchmark, on CPU 1

    tools = {name: exe for name, exe in find_tools().items() if exe}
    runners = {"guidellm": run_guidellm, "aiperf": run_aiperf}
    print(
        f"tools: {tools or 'none (PATH, $SERVELAB_TOOLS_VENV/bin)'}; truth: TTFT 5 ms, ITL 5 ms, 200 tokens"
    )
    print(" ".join(key.rjust(width) for key, width, _ in COLUMNS), flush=True)
    for name, exe in tools.items():
        for streams in (50, 150, 250):
            with sim("--ttft-ms", "5", "--itl-ms", "5", "--eos-after", "50", cpu=1) as url:
                row = runners[name](exe, url, streams, output_tokens=200, seconds=6, cpu=0)
                print(format_row(row), flush=True)


if __name__ == "__main__":
    main()
