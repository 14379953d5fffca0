"""A mutation campaign over the model readers: how many hostile files end cleanly, and at what cost.

    python benchmarks/fuzz_readers.py --cases 2000 --seed 0 [--cap-s 10] [--no-special]

Seeds: the GGUF files servelab makes itself (`servelab.modelmake`, draft and hybrid kinds) and a small
hand-built config.json + model.safetensors. Each case is mutated (values, types, lengths, nesting, counts,
offsets; tests/unit/model_mutants.py), written under a temporary directory and read in-process through
`servelab.model.load.load_model`. Outcomes: ok / clean (ModelFormatError or ConfigError) / traceback (any
other exception; its innermost servelab frame is the site) / hang (past --cap-s, stopped by SIGALRM) /
nonsense (ok, but the spec has a non-positive dimension, or with --plan the plan has a negative or infinite
tok/s). --plan also plans every model that loads (one H100, llama.cpp for GGUF, vLLM otherwise). Special cases (a FIFO model.safetensors, a FIFO
.gguf, a device, a 100 MB GGUF of small arrays, a 1 GiB sparse GGUF) run once each. Prints one table per
reader: counts, distinct traceback sites, max seconds per case and the process's peak RSS growth per case;
the special cases run in forked children, each with its own peak RSS.
The process's address space is capped (--max-gib), so a reader that reads without bound ends in MemoryError.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import signal
import struct
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from servelab.errors import ConfigError, ModelFormatError
from servelab.model.gguf_header import read_gguf_header
from servelab.model.load import load_model
from servelab.model.safetensors_header import read_file_header
from servelab.model.spec import ModelSpec
from servelab.modelmake import make_model
from servelab.sizing.types import Plan
from tests.unit.model_mutants import (
    SEED_CONFIG,
    mutate_gguf,
    mutate_model_dir,
    parse_gguf,
    write_model_dir,
)


class Hang(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise Hang


def site_of(exc: BaseException) -> str:
    """`file:line ExcType` of the innermost servelab frame of the traceback."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/servelab/" in f.filename]
    where = frames[-1] if frames else traceback.extract_tb(exc.__traceback__)[-1]
    return f"{where.filename.rsplit('/servelab/', 1)[-1]}:{where.lineno} {type(exc).__name__}"


def load_and_plan(ref: str, plan: bool) -> object:
    """load_model(ref), then (with --plan) a plan on one H100 with the engine that reads its format."""
    spec = load_model(ref)
    if not plan or nonsense(spec):
        return spec
    from servelab.hardware.gpus import find_gpu
    from servelab.plan.make import make_plan

    engine = "llamacpp" if spec.source == "gguf" else "vllm"
    return make_plan(spec, find_gpu("h100"), engine=engine, context=min(spec.max_context or 4096, 4096))


def nonsense_plan(plan: Plan) -> bool:
    figures = [plan.decode_ceiling_tok_s.short, plan.decode_expected_tok_s.short, plan.prefill_ceiling_tok_s]
    return any(not math.isfinite(f) or f < 0 for f in figures) or plan.memory_bytes.total < 0


def nonsense(spec: ModelSpec) -> bool:
    dims = [spec.hidden_size, spec.num_layers]
    if spec.attention and spec.attention.num_heads:
        dims += [spec.attention.num_heads, spec.attention.num_kv_heads, spec.attention.head_dim]
    return min(dims) <= 0 or spec.vocab_size < 0 or min(spec.kv_heads_per_layer, default=0) < 0


def run_case(fn: Callable[[], object], cap_s: float) -> tuple[str, str, float, int]:
    """(outcome, site, seconds, RSS growth KiB) of one call."""
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, cap_s)
    outcome, site = "ok", ""
    try:
        result = fn()
        if (isinstance(result, ModelSpec) and nonsense(result)) or (
            isinstance(result, Plan) and nonsense_plan(result)
        ):
            outcome = "nonsense"
    except Hang:
        outcome = "hang"
    except (ModelFormatError, ConfigError):
        outcome = "clean"
    except BaseException as exc:
        outcome, site = "traceback", site_of(exc)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    seconds = time.perf_counter() - start
    return outcome, site, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0


class Tally:
    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()
        self.sites: Counter[str] = Counter()
        self.max_s = 0.0
        self.max_rss_kib = 0

    def add(self, outcome: str, site: str, seconds: float, rss: int) -> None:
        self.outcomes[outcome] += 1
        if site:
            self.sites[site] += 1
        self.max_s, self.max_rss_kib = max(self.max_s, seconds), max(self.max_rss_kib, rss)


def gguf_cases(work: Path, n: int, rng: random.Random, cap_s: float, plan: bool) -> Tally:
    seeds = [
        parse_gguf(make_model(kind, work / f"{kind}.gguf").path.read_bytes()) for kind in ("draft", "hybrid")
    ]
    tally, path = Tally(), work / "case.gguf"
    for _ in range(n):
        path.write_bytes(mutate_gguf(rng.choice(seeds), rng))
        tally.add(*run_case(lambda: load_and_plan(str(path), plan), cap_s))
    return tally


def dir_cases(work: Path, n: int, rng: random.Random, cap_s: float, target: str, plan: bool) -> Tally:
    tally, directory = Tally(), work / "case-dir"
    for _ in range(n):
        write_model_dir(directory, *mutate_model_dir(rng, target))
        tally.add(*run_case(lambda: load_and_plan(str(directory), plan), cap_s))
    return tally


def special_cases(work: Path, cap_s: float, large_cap_s: float) -> dict[str, tuple[str, str, float, int]]:
    fifo_dir = work / "fifo-model"
    fifo_dir.mkdir()
    (fifo_dir / "config.json").write_text(__import__("json").dumps(SEED_CONFIG))
    os.mkfifo(fifo_dir / "model.safetensors")
    os.mkfifo(work / "fifo.gguf")
    arrays = work / "arrays.gguf"  # 100 MB of 4096-byte u8 arrays: the reader used to keep every one
    n_arrays = 100 * 2**20 // (4096 + 30)
    with arrays.open("wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, 0, n_arrays))
        for i in range(n_arrays):
            key = f"k{i}".encode()
            out.write(struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 0, 4096) + b"\0" * 4096)
    sparse = work / "sparse.gguf"  # 1 GiB of zeros after a header declaring as many (13-byte) entries as fit
    with sparse.open("wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, 0, (2**30 - 24) // 13))
        out.truncate(2**30)
    strings = work / "strings.gguf"  # 1 GiB sparse: one array of 134M empty strings (a skipped "vocabulary")
    with strings.open("wb") as out:
        key = b"tokenizer.ggml.tokens"
        out.write(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, len(key)) + key)
        out.write(struct.pack("<IIQ", 9, 8, (2**30 - 100) // 8))
        out.truncate(2**30)
    cases = {
        "FIFO model.safetensors (load_model dir)": lambda: load_model(str(fifo_dir)),
        "FIFO .gguf (read_gguf_header)": lambda: read_gguf_header(work / "fifo.gguf"),
        "FIFO .safetensors (read_file_header)": lambda: read_file_header(fifo_dir / "model.safetensors"),
        "/dev/zero (read_gguf_header)": lambda: read_gguf_header(Path("/dev/zero")),
    }
    large = {
        "100 MB GGUF of small arrays": lambda: load_model(str(arrays)),
        "1 GiB sparse GGUF": lambda: load_model(str(sparse)),
        "1 GiB sparse GGUF, 134M empty strings": lambda: load_model(str(strings)),
    }
    results = {name: forked(fn, cap_s) for name, fn in cases.items()}
    return results | {name: forked(fn, large_cap_s) for name, fn in large.items()}


def forked(fn: Callable[[], object], cap_s: float) -> tuple[str, str, float, int]:
    """run_case in a child process, so its peak RSS (KiB, ru_maxrss of the child) is its own."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        outcome, site, seconds, _ = run_case(fn, cap_s)
        os.write(write_end, f"{outcome}\t{site}\t{seconds}".encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read().decode()
    _, status, usage = os.wait4(pid, 0)
    if not report:
        return f"died (status {status})", "", 0.0, usage.ru_maxrss
    outcome, site, seconds = report.split("\t")
    return outcome, site, float(seconds), usage.ru_maxrss


def print_table(tallies: dict[str, Tally]) -> None:
    cols = ["ok", "clean", "nonsense", "traceback", "hang"]
    print(f"| reader | cases | {' | '.join(cols)} | traceback sites | max s/case | max RSS growth MiB |")
    print("|---" * (len(cols) + 5) + "|")
    for name, t in tallies.items():
        counts = " | ".join(str(t.outcomes[c]) for c in cols)
        total = sum(t.outcomes.values())
        print(
            f"| {name} | {total} | {counts} | {len(t.sites)} | {t.max_s:.3f} | {t.max_rss_kib / 1024:.1f} |"
        )
    for name, t in tallies.items():
        for site, count in t.sites.most_common():
            print(f"  {name}: {count:5d} x {site}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=1500, help="cases per reader")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cap-s", type=float, default=10.0, help="per-case time cap (a hang past it)")
    parser.add_argument("--large-cap-s", type=float, default=200.0, help="time cap of the two large files")
    parser.add_argument("--plan", action="store_true", help="also plan every model that loads (H100, 4k ctx)")
    parser.add_argument("--no-special", action="store_true", help="skip the FIFO / device / large-file cases")
    parser.add_argument("--max-gib", type=float, default=4.0, help="address-space cap (MemoryError past it)")
    args = parser.parse_args()
    cap = int(args.max_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))  # an unbounded read fails here, not in the OOM killer
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    with tempfile.TemporaryDirectory(prefix="fuzz-readers-") as tmp:
        work = Path(tmp)
        if not args.no_special:
            print("| special case | outcome | site | s | peak RSS MiB |\n|---|---|---|---|---|")
            for name, (outcome, site, s, rss) in special_cases(work, args.cap_s, args.large_cap_s).items():
                print(f"| {name} | {outcome} | {site} | {s:.2f} | {rss / 1024:.1f} |")
            print()
        start = time.perf_counter()
        tallies = {
            "GGUF header": gguf_cases(work, args.cases, random.Random(args.seed), args.cap_s, args.plan),
            "safetensors header": dir_cases(
                work, args.cases, random.Random(args.seed + 1), args.cap_s, "safetensors", args.plan
            ),
            "config.json": dir_cases(
                work, args.cases, random.Random(args.seed + 2), args.cap_s, "config", args.plan
            ),
        }
        print_table(tallies)
        print(f"\n{args.cases} cases per reader, seed {args.seed}, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
