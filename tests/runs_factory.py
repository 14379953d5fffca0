"""Builds stored runs from RequestRecords with known timings, for the store/compare/export/report tests.

Every figure is derived from the arguments, so tests can compute the expected metrics by hand.
"""

from __future__ import annotations

from array import array
from pathlib import Path

from servelab.bench.summary import summarize_level
from servelab.results.level_key import Level
from servelab.results.records import RequestRecord
from servelab.results.run import RunMeta, RunWorkload, TargetInfo
from servelab.results.stats import LevelSummary
from servelab.store import Store

MS = 1_000_000


def make_record(
    target_index: int,
    level: str,
    request_index: int,
    *,
    start_ns: int,
    ttft_ms: float,
    itl_ms: float,
    output_tokens: int,
    prompt_tokens: int = 32,
    phase: str = "measure",
    status: str = "ok",
    evicted: bool = False,
    error: str = "HTTP 500: boom",
) -> RequestRecord:
    """A streamed request: first token after `ttft_ms`, then one token every `itl_ms`."""
    if status != "ok":
        return RequestRecord(
            target_index=target_index,
            level=level,
            repeat=0,
            request_index=request_index,
            phase=phase,
            status=status,
            sent_ns=start_ns,
            end_ns=start_ns + int(ttft_ms * MS),
            error_kind="http_5xx",
            error=error,
            http_status=500,
            prompt_tokens=prompt_tokens,
        )
    first = start_ns + int(ttft_ms * MS)
    chunks = array("q", (first + int(i * itl_ms * MS) for i in range(output_tokens)))
    return RequestRecord(
        target_index=target_index,
        level=level,
        repeat=0,
        request_index=request_index,
        phase=phase,
        status="ok",
        sent_ns=start_ns,
        end_ns=chunks[-1],
        intended_ns=start_ns,
        first_token_ns=first,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        tokens_source="server",
        max_tokens=output_tokens,
        finish_reason="length",
        evicted=evicted,
        chunk_ns=chunks,
        chunk_tokens=array("i", [1] * output_tokens),
    )


def level_records(
    target_index: int,
    concurrency: int,
    *,
    ttft_ms: float,
    itl_ms: float,
    output_tokens: int = 16,
    rounds: int = 3,
) -> list[RequestRecord]:
    """A closed-loop level: `rounds` waves of `concurrency` identical requests, back to back."""
    records = []
    duration_ns = int((ttft_ms + itl_ms * (output_tokens - 1)) * MS)
    for wave in range(rounds):
        for slot in range(concurrency):
            index = wave * concurrency + slot
            start = 10_000 * MS + wave * (duration_ns + MS) + slot * 1000
            records.append(
                make_record(
                    target_index,
                    f"c={concurrency}",
                    index,
                    start_ns=start,
                    ttft_ms=ttft_ms,
                    itl_ms=itl_ms * (1 + 0.1 * (concurrency - 1)),
                    output_tokens=output_tokens,
                )
            )
    return records


def store_run(
    db: Path,
    *,
    name: str = "synthetic",
    engines: tuple[str, ...] = ("llamacpp",),
    model: str = "tiny-test-model",
    ladder: tuple[int, ...] = (1, 2, 4),
    itl_ms: float = 10.0,
    workload: RunWorkload | None = None,
    finish: bool = True,
    failure: str | None = None,
    invalid: dict[str, str] | None = None,
) -> str:
    """Write a whole run (targets, records, level summaries) and return its id; `failure`: one failed request
    with that message is added to each target's first level; `invalid`: level -> why the bench distrusts it."""
    workload = workload or RunWorkload(kind="short", input_tokens=32, output_tokens=16)
    settings = {"concurrency": list(ladder)}
    meta = RunMeta(
        name=name, servelab_version="0.1.0", client_host="test", workload=workload, settings=settings
    )
    with Store.open(db) as store:
        run_id = store.create_run(meta)
        for t, engine in enumerate(engines):
            info = TargetInfo(model=model, version="b1234", context_per_slot=2048)
            store.add_target(run_id, t, f"http://127.0.0.1:{8000 + t}/v1", engine, info)
            if failure is not None:
                store.add_request(
                    run_id,
                    make_record(
                        t,
                        f"c={ladder[0]}",
                        999,
                        start_ns=10_000 * MS,
                        ttft_ms=1,
                        itl_ms=1,
                        output_tokens=0,
                        status="error",
                        error=failure,
                    ),
                )
            for c in ladder:
                records = level_records(t, c, ttft_ms=50.0 + 5 * c, itl_ms=itl_ms * (1 + t))
                store.add_requests(run_id, records)
                why = (invalid or {}).get(f"c={c}")
                stats = summarize_level(records, Level.closed(c))
                store.add_level(run_id, t, 0, LevelSummary(stats, valid=why is None, invalid_reason=why))
        if finish:
            store.finish_run(run_id, partial=False)
    return run_id
