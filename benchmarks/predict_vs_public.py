"""Cross-validate the GPU step model on the public measurement corpus (docs/predict.md "The GPU step model").

    python benchmarks/predict_vs_public.py                  # the shipped corpus (servelab/predict/corpus/data)
    python benchmarks/predict_vs_public.py --data DIR ...   # corpus files elsewhere (every *.json in DIR)
    python benchmarks/predict_vs_public.py --write          # also save the fit on every row as the shipped model
    python benchmarks/predict_vs_public.py --engine llama.cpp --limit 200    # a quick slice

Every row is replayed once through its engine's scheduler and recorded as what the step model's parameters
multiply (predict/corpus/recorded.py); the folds are priced from those records, so the whole corpus takes
minutes, not a replay per fold.

Prints, for today's predictions (the plan's figures, nothing fitted), the step model at its priors, the choice of
each engine's prior pull and of fit or priors (predict/corpus/select.py), and the shipped model under
leave-one-source-out and leave-one-GPU-type-out: the median |error| per engine x figure x GPU class, the whole
corpus's, the worst rows and how often the coverage-calibrated bands hold the left-out figures. A left-out row is predicted with parameters fitted without its source (GPU type): no row is predicted by
parameters fitted on itself. The rows servelab cannot predict are counted with the reason.
"""

from __future__ import annotations

import os

# One BLAS thread: the folds' QR solves are small (~1,700 x 100), and OpenBLAS's threads on a shared, loaded
# machine made each one 20x slower (1.7 s against 0.03 s measured); set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import datetime
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from servelab.engines import registry
from servelab.errors import ServelabError
from servelab.paths import cache_dir
from servelab.predict.corpus import load_corpus
from servelab.predict.corpus.crossval import (
    CrossValidation,
    Prepared,
    band_coverage,
    bands,
    fit_all,
    prepare,
    table,
    uncalibrated,
)
from servelab.predict.corpus.schema import Measurement
from servelab.predict.corpus.select import (
    Selection,
    at_priors,
    calibrated_quantiles,
    choose,
    coverage_line,
    shipped_cv,
)
from servelab.predict.stepmodel import FIT_FILE, StepModel, prior

GROUPS = ("TTFT", "TPOT/ITL", "output tok/s", "pp tok/s", "tg tok/s", "all")
CLASSES = ("gddr", "hbm", "apple", "amd", "all")


def print_table(cv: CrossValidation, title: str) -> None:
    t = table(cv)
    engines = [*sorted({k[0] for k in t} - {"all"}), "all"]
    print(f"\n## {title}: median |error| (rows)\n")
    print("| engine | figure | " + " | ".join(CLASSES) + " |")
    print("|---|---|" + "---|" * len(CLASSES))
    for engine in engines:
        for group in GROUPS:
            if (engine, group, "all") not in t:
                continue
            cells = []
            for cls in CLASSES:
                got = t.get((engine, group, cls))
                cells.append("" if got is None else f"{got[0] * 100:.1f}% ({got[1]})")
            print(f"| {engine} | {group} | " + " | ".join(cells) + " |")


def print_worst(cv: CrossValidation, count: int) -> None:
    worst = sorted(cv.predictions, key=lambda p: -abs(p.error))[:count]
    print(f"\nworst {count} ({cv.kind}):")
    for p in worst:
        r = p.setup.row
        w = r.workload
        load = f"c={w.concurrency}" if w.concurrency else f"r={w.request_rate}" if w.request_rate else ""
        print(
            f"  {p.error * 100:+8.1f}%  {r.label:45s} {r.engine:9s} {r.gpu:12s} {r.model[:40]:40s} "
            f"{r.weight_format:8s} {p.figure:15s} pred {p.predicted:10.2f} meas {p.measured:10.2f} "
            f"p{w.prompt_tokens}/o{w.output_tokens} d{w.depth} b{w.batch or 1} {load}"
        )


def print_selection(selection: Selection) -> None:
    """Each engine's λ grid, its choice, and its fit's errors against its priors' (select.py)."""
    print("\n## each engine's prior pull and fit or priors (leave-one-source-out median |error|)\n")
    for engine, c in sorted(selection.choices.items()):
        grid = ", ".join(f"λ={lam:g}: {err * 100:.1f}%" for lam, err in sorted(c.grid.items()))
        print(f"{engine}: {grid} -> λ={c.pull:g}, ships {'the fit' if c.use_fit else 'its priors'}")
        for group in sorted(c.fit):
            print(f"  {group:14s} fit {c.fit[group] * 100:5.1f}%  priors {c.priors[group] * 100:5.1f}%")


def corpus_counts(p: Prepared) -> None:
    engines = Counter(s.row.engine for s in p.setups)
    classes = Counter(s.regime.memory for s in p.setups)
    gpus = Counter(s.gpu.name for s in p.setups)
    sources = Counter(s.row.source.id for s in p.setups)
    figures = sum(len([k for k in r.setup.row.figures if k in r.figures]) for r in p.recorded)
    print(f"rows predicted: {len(p.setups)} ({figures} figures), skipped: {len(p.skipped)}")
    print("  engines:", dict(engines))
    print("  GPU classes:", dict(classes))
    print(f"  GPU types ({len(gpus)}):", dict(gpus))
    print(f"  sources ({len(sources)}):", dict(sources))
    reasons = Counter(reason for _, reason in p.skipped)
    for reason, n in reasons.most_common():
        print(f"  skipped {n:4d}: {reason}")


def select(rows: Sequence[Measurement], engines: list[str] | None, limit: int | None) -> list[Measurement]:
    """The rows of `engines` (any spelling the registry knows), at most `limit` of them spread evenly."""
    if engines:
        try:
            wanted = {registry.get_engine(e).name for e in engines}
        except ServelabError as exc:
            raise SystemExit(f"predict_vs_public: {exc}") from None
        rows = [r for r in rows if registry.get_engine(r.engine).name in wanted]
    if limit is not None:
        if limit < 1:
            raise SystemExit("predict_vs_public: --limit must be at least 1")
        step = max(1.0, len(rows) / limit)
        rows = [rows[int(i * step)] for i in range(min(limit, len(rows)))]
    return rows


class Progress:
    """A line every 100 rows, and the rows whose replay took over 10 s."""

    def __init__(self) -> None:
        self.last: tuple[float, str] | None = None

    def __call__(self, done: int, total: int, row: Measurement) -> None:
        now = time.monotonic()
        if self.last is not None and now - self.last[0] > 10:
            print(f"  {self.last[1]}: {now - self.last[0]:.0f} s", file=sys.stderr, flush=True)
        self.last = (now, row.label)
        if done % 100 == 0:
            print(f"  replayed {done}/{total} rows", file=sys.stderr, flush=True)


DOC = Path(__file__).resolve().parent.parent / "docs" / "predict.md"
VALUES_BEGIN, VALUES_END = "<!-- generated: step model values -->", "<!-- end generated -->"


def values_table(model: StepModel) -> str:
    """The fitted values as docs/predict.md shows them: each parameter, its value, its prior."""
    lines = ["| parameter | fitted | prior |", "|---|---|---|"]
    for name, value in sorted(model.values.items()):
        lines.append(f"| `{name}` | {value:.4g} | {prior(name)[0]:.4g} |")
    return "\n".join(lines)


def write_doc_table(model: StepModel) -> None:
    text = DOC.read_text(encoding="utf-8")
    if VALUES_BEGIN not in text:
        return
    head, rest = text.split(VALUES_BEGIN, 1)
    _, tail = rest.split(VALUES_END, 1)
    DOC.write_text(f"{head}{VALUES_BEGIN}\n{values_table(model)}\n{VALUES_END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", action="append", type=Path, help="a directory of corpus files (repeatable)")
    ap.add_argument("--worst", type=int, default=12)
    ap.add_argument("--engine", action="append", help="only this engine's rows (repeatable)")
    ap.add_argument("--limit", type=int, help="at most this many rows, spread evenly over the corpus")
    ap.add_argument(
        "--cache",
        type=Path,
        default=cache_dir() / "corpus-replays",
        help="where each row's replay is kept, keyed by the row and the code it depends on (default: %(default)s)",
    )
    ap.add_argument("--no-cache", action="store_true", help="replay every row, keep nothing")
    ap.add_argument(
        "--max-concurrency",
        type=int,
        default=512,
        help="leave out serving rows with more clients (their replay takes minutes; default %(default)s)",
    )
    ap.add_argument("--no-gpu-out", action="store_true", help="skip leave-one-GPU-type-out")
    ap.add_argument(
        "--write", action="store_true", help=f"save the fit on every row as servelab/predict/{FIT_FILE}"
    )
    args = ap.parse_args(argv)
    paths = None if not args.data else [f for d in args.data for f in sorted(d.glob("*.json"))]
    started = time.monotonic()
    rows = select(load_corpus(paths), args.engine, args.limit)
    p = prepare(rows, Progress(), None if args.no_cache else args.cache, args.max_concurrency)
    corpus_counts(p)
    print(f"({time.monotonic() - started:.0f} s)", flush=True)

    def report(cv: CrossValidation, title: str, quantiles: dict | None = None) -> None:
        print_table(cv, title)
        print_worst(cv, args.worst)
        if cv.kind != "none":
            print(
                "\nbands (10-90% of the other folds' residuals) holding the left-out figure: "
                + coverage_line(band_coverage(cv))
            )
        if quantiles is not None:
            print(
                "bands (each figure's calibrated quantiles) holding the left-out figure: "
                + coverage_line(band_coverage(cv, quantiles=quantiles))
            )
        print(f"({time.monotonic() - started:.0f} s)", flush=True)

    report(uncalibrated(p), "today's predictions (plan figures, nothing fitted)")
    print_table(at_priors(p, "source"), "the step model at its priors (nothing fitted)")
    selection = choose(p)
    print_selection(selection)
    for lam, cv in sorted(selection.runs.items()):
        print_table(cv, f"leave-one-source-out, every engine fitted at λ={lam:g}")
    by_gpu = None if args.no_gpu_out else shipped_cv(p, selection, "gpu")
    calibrated = calibrated_quantiles(selection.loso, *([by_gpu] if by_gpu is not None else []))
    quantiles = calibrated["quantiles"]
    print(
        "\nband quantiles per figure (the narrowest whose band holds 80% of the left-out figures in each CV):"
    )
    for group, pair in sorted(quantiles.items()):
        print(f"  {group:14s} {pair[0]:g}-{pair[1]:g}")
        for kind, by_group in calibrated["coverage"].items():
            print(f"    coverage by pair, {kind} left out: {by_group.get(group)}")
    report(
        selection.loso, "leave-one-source-out, the shipped model (each engine's λ; fit or priors)", quantiles
    )
    if by_gpu is not None:
        report(by_gpu, "leave-one-GPU-type-out, the shipped model", quantiles)
    whole = fit_all(p, pull=selection.pulls)
    shipped = selection.shipped(whole.model)
    print(
        f"\nfit on every row: {whole.rows} figures, in-sample median |error| {whole.median_relative * 100:.1f}%,"
        f" {whole.trimmed} trimmed, {whole.rounds} rounds; shipped: the fit of {sorted(selection.fitted)}"
    )
    for name, value in sorted(shipped.values.items()):
        print(f"  {name:32s} {value:.4g}")
    if args.write:
        out = Path(__file__).resolve().parent.parent / "servelab" / "predict" / FIT_FILE
        provenance = {
            "fitted": datetime.date.today().isoformat(),
            "procedure": "servelab/predict/corpus/fit.py fit_design (non-negative least squares on relative error, "
            "each source weighted 1/sqrt(figures), priors' pull λ per engine); each engine's λ and fit-or-priors "
            "chosen by leave-one-source-out, bands' quantiles by their out-of-sample coverage "
            "(servelab/predict/corpus/select.py; docs/predict.md 'What ships')",
            "command": "python benchmarks/predict_vs_public.py --write"
            + "".join(f" --data {d}" for d in args.data or []),
            "sources": sorted({s.row.source.id for s in p.setups}),
            "files": sorted({f"servelab/predict/corpus/data/{s.row.source.id}.json" for s in p.setups}),
            "figures": whole.rows,
            "in_sample_median_relative": round(whole.median_relative, 4),
            "engines": {e: c.to_json() for e, c in sorted(selection.choices.items())},
            "band_quantiles": {g: list(pair) for g, pair in sorted(quantiles.items())},
            "band_coverage": {
                cv.kind: {
                    g: round(i / n, 4) for g, (i, n) in sorted(band_coverage(cv, quantiles=quantiles).items())
                }
                for cv in (selection.loso, by_gpu)
                if cv is not None
            },
        }
        banded = {k: (v[0], v[1]) for k, v in bands(selection.loso, quantiles=quantiles).items()}
        doc = StepModel(shipped.values, provenance, banded).to_json()
        out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        write_doc_table(shipped)
        print(f"wrote {out} and the values table of {DOC}")
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
