"""`servelab advise`: what to run for this model on these GPUs, for this workload and these SLOs (servelab/advise/;
docs/advise.md). Parses, calls `advise.core.advise`, renders; results on stdout, progress on stderr."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from servelab.errors import ConfigError

MAX_USERS = 65_536
CONTEXT_STEP = 1024  # the planned context: the workload's longest request rounded up to this
SHOWN_OTHERS = 12  # other candidates printed without --all


def register(app: typer.Typer) -> None:
    """Add `servelab advise` to the app."""

    @app.command("advise")
    def advise_command(
        model: str | None = typer.Argument(
            None,
            help="Catalog id, .gguf file or config.json; none: rank the catalog's and this machine's models.",
        ),
        gpu: str = typer.Option(
            ..., "--gpu", help="GPU from the catalog (servelab plan's names), cpu, or auto: this machine's."
        ),
        gpus: int | None = typer.Option(
            None,
            "--gpus",
            help="GPUs to use: tensor parallelism within, replicas for the rest (default 1; auto: all).",
        ),
        interconnect: str | None = typer.Option(
            None, "--interconnect", help="nvlink, pcie-p2p or pcie-host-staged (default: the card's)."
        ),
        slo: str = typer.Option(..., "--slo", help="Percentile SLOs, e.g. ttft_p99_ms=2000,tpot_p99_ms=50."),
        users: int | None = typer.Option(None, "--users", help="Closed loop: users to carry in all."),
        rate: float | None = typer.Option(None, "--rate", help="Open loop: requests/s to carry in all."),
        workload: str = typer.Option(
            "short", "--workload", help="short|long|mixed|shared-prefix|multi-turn|FILE."
        ),
        trace: Path | None = typer.Option(
            None, "--trace", help="Not yet: predict does not replay traces (use --workload and --rate)."
        ),
        input_tokens: int | None = typer.Option(None, "--input-tokens", help="Prompt length in tokens."),
        output_tokens: int | None = typer.Option(None, "--output-tokens", help="Output length in tokens."),
        context: int | None = typer.Option(
            None, "--context", help="Context to plan for (default: the workload's longest request)."
        ),
        price: float | None = typer.Option(
            None, "--price", help="USD per GPU-hour (cost per million tokens)."
        ),
        power_price: float | None = typer.Option(
            None, "--power-price", help="USD per kWh, at the GPUs' board power (an upper bound)."
        ),
        engine: list[str] = typer.Option([], "--engine", help="Only this engine (repeat for more)."),
        variant: list[str] = typer.Option(
            [],
            "--variant",
            help="'ENGINE FLAGS…': the engine's own flags as one more candidate (repeatable).",
        ),
        show_all: bool = typer.Option(False, "--all", help="Print every other candidate, not the first few."),
        json_out: bool = typer.Option(False, "--json", help="Print the advice as JSON on stdout."),
        no_calibration: bool = typer.Option(
            False, "--no-calibration", help="Ignore calibration profiles; use the plans' figures."
        ),
        seed: int = typer.Option(0, "--seed", help="Seed for prompts and arrivals."),
        spec_alpha: float | None = typer.Option(
            None,
            "--spec-acceptance",
            help="Speculative decoding as well, at this per-token acceptance (0-1).",
        ),
        spec_method: str = typer.Option(
            "mtp", "--spec-method", help="mtp or ngram (with --spec-acceptance)."
        ),
        spec_tokens: int = typer.Option(
            4, "--spec-draft-tokens", help="Speculative decoding: drafts per step."
        ),
        spec_cost: float = typer.Option(
            0.05, "--spec-draft-cost", help="Speculative decoding: one draft step over one target step."
        ),
        jobs: int = typer.Option(1, "--jobs", help="Emulate in this many local processes."),
        ray_address: str | None = typer.Option(
            None, "--ray", help="Emulate on a Ray cluster: auto, local or HOST:PORT (the ray extra)."
        ),
        no_screen: bool = typer.Option(
            False, "--no-screen", help="Emulate every fitting candidate (no analytic screen first)."
        ),
        no_catalog: bool = typer.Option(
            False, "--no-catalog", help="Without MODEL: only the models on disk, not the catalog's."
        ),
        confirm: bool = typer.Option(
            False,
            "--confirm",
            help="Launch the winner here (CPU engines), verify, bench, calibrate, re-predict; else print the commands.",
        ),
        db: Path | None = typer.Option(
            None, "--db", help="--confirm: the result store for its runs (default: the user data directory)."
        ),
    ) -> None:
        """Rank engines, formats, KV dtypes, tensor parallelism and batch limits for a workload and SLOs: plan prunes,
        predict finds each one's highest load within the SLOs, the Pareto front and its launch commands."""
        from servelab.advise.core import advise
        from servelab.advise.goal import Prices, parse_bounds
        from servelab.advise.judge import Setting
        from servelab.cli.advise_machine import device, machine, offered_models
        from servelab.cli.bench import build_config
        from servelab.model.load import load_model
        from servelab.plan.make import check_plan_numbers
        from servelab.ranges import count, number

        if confirm and model is None:
            raise ConfigError("--confirm needs a MODEL: it measures the advice for one model")
        bounds = parse_bounds(slo)
        prices = Prices(price, power_price)
        check_plan_numbers(context, None, gpus)
        card, gpus, note = device(gpu, gpus)
        demand = _demand(users, rate, trace, count, number)
        options: dict[str, Any] = {
            "targets": ["advise"],
            "concurrency": "1",
            "workload": workload,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "seed": seed,
            "chat": True,
        }
        config = build_config(options, None)
        offered = offered_models(not no_catalog, True) if model is None else None
        readable = [o.spec for o in offered or () if o.spec is not None]
        spec = readable[0] if readable else load_model(model or "Qwen/Qwen3-8B")  # each model replaces it
        speculative, speculation = _speculative(spec_alpha, spec_method, spec_tokens, spec_cost)
        setting = Setting(
            model=spec,
            gpu=card,
            gpus=gpus,
            bounds=bounds,
            demand=demand,
            prices=prices,
            config=config,
            rates=None if no_calibration else _profile_figures(card),
            speculative=speculative,
            speculation=speculation,
        )
        planned = context or _longest(config)
        from servelab.advise.spread import runner
        from servelab.cli.advise_progress import progress_bar

        run = runner(jobs, ray_address)
        try:
            if offered is not None:  # no MODEL: which models fit this machine
                machine(
                    setting,
                    context=planned,
                    engines=tuple(engine) or None,
                    runner=run,
                    models=offered,
                    note=note,
                    json_out=json_out,
                )
                return
            with progress_bar("advise") as progress:
                advice = advise(
                    setting,
                    context=planned,
                    interconnect=interconnect,
                    engines=tuple(engine) or None,
                    variants=_variants(variant),
                    progress=progress,
                    screen=not no_screen,
                    runner=run,
                )
        finally:
            run.close()
        checked = _confirm(advice, model, db) if confirm else None
        if json_out:
            from servelab.cli.output import print_json

            print_json(advice.to_json(checked))
            return
        for line in lines(advice, show_all):
            typer.echo(line)
        for line in confirmation_lines(checked):
            typer.echo(line)


def _confirm(advice, model: str | None, db: Path | None):
    """`--confirm`: the first front member measured here, or the commands that would measure it."""
    from servelab.advise.confirm import confirm
    from servelab.cli.output import stderr_console
    from servelab.paths import data_dir
    from servelab.store import Store

    if not advice.pareto.front or model is None:
        raise ConfigError("--confirm: nothing meets the SLO, so there is no advice to confirm")

    err = stderr_console()

    def say(line: str) -> None:
        err.print(line, markup=False, highlight=False)

    with Store.open(db) as store:
        folder = data_dir() / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        return confirm(advice.pareto.front[0], advice.setting, model, store=store, log_dir=folder, say=say)


def confirmation_lines(checked) -> list[str]:
    """Advice vs measurement per figure, for a person."""
    if checked is None:
        return []
    out = [f"confirm {checked.candidate}: {checked.verdict()}"]
    if not checked.ran:
        out += ["  to confirm it where it runs:"] + [f"   $ {c}" for c in checked.commands]
        return out
    out += [f"   $ {c}" for c in checked.commands]
    out += [f"  verify: {m}" for m in checked.mismatches]
    out.append("  figure          advised   re-predicted   measured   (advised-measured)/measured")
    for f in checked.figures:
        err = f.error(f.advised, f.measured)
        out.append(
            f"  {f.figure:<14} {_num(f.advised):>9} {_num(f.repredicted):>14} {_num(f.measured):>10}   "
            + ("-" if err is None else f"{err:+.1%}")
        )
    for lv in checked.levels:
        state = "meets the SLO" if not lv.misses else "misses: " + "; ".join(lv.misses)
        out.append(
            f"  measured {lv.load:g}: {lv.goodput_tok_s:.1f} tok/s, p99 TTFT {_num(lv.ttft_p99_ms)} ms,"
            f" TPOT {_num(lv.tpot_p99_ms)} ms; {state}"
        )
    out += [f"  note: {n}" for n in checked.notes]
    if checked.profile:
        out.append(f"  calibration profile saved: {checked.profile} (advise and predict use it from now on)")
    return out


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _demand(users, rate, trace, count, number):
    from servelab.advise.judge import Demand

    if users is not None and rate is not None:
        raise ConfigError("give --users (closed loop) or --rate (open loop), not both")
    if (
        trace is not None
    ):  # predict/virtual_ladder.py takes the workload's prompts and a seeded schedule, not a trace's
        raise ConfigError(
            f"--trace {trace}: servelab predict does not replay a trace's arrivals and lengths yet; give its shape"
            " as --workload/--input-tokens/--output-tokens and its mean rate as --rate"
        )
    if users is not None:
        count(users, "--users", 1, MAX_USERS, "users")
    if rate is not None:
        number(rate, "--rate", 0, 1_000_000.0, "requests/s", above=True)
    return Demand(users, rate)


def _speculative(alpha: float | None, method: str, tokens: int, cost: float):
    """(plan's Speculative, emulator's Speculation), or (None, None) without an acceptance: advise does not guess one."""
    from servelab.cli.predict import _speculation
    from servelab.sizing.fit import Speculative

    if alpha is None:
        return None, None
    if method not in ("mtp", "ngram"):
        raise ConfigError(f"--spec-method {method!r}: advise plans mtp or ngram (no draft model to load)")
    return Speculative(method, tokens), _speculation(alpha, tokens, cost)


def _variants(given: list[str]) -> dict[str, tuple[Any, ...]]:
    """`--variant 'ENGINE FLAGS…'` -> each engine's extra Variants, its flags read by its own reader."""
    import shlex

    from servelab.advise.candidates import Variant
    from servelab.cli.engine_words import engine_settings

    out: dict[str, list[Any]] = {}
    for text in given:
        words = shlex.split(text)
        if len(words) < 2:
            raise ConfigError(f"--variant {text!r}: give an engine and its flags ('vllm --max-num-seqs 64')")
        settings = engine_settings(words[0], words[1:])
        for name, value in settings.items():
            out.setdefault(name, []).append(Variant(name, tuple(words[1:]), value))
    return {k: tuple(v) for k, v in out.items()}


def _longest(config) -> int:
    """The workload's longest request (prompt + output), rounded up to CONTEXT_STEP tokens."""
    from servelab.bench.workloads import build_prompts
    from servelab.predict.words import WordTokenizer

    tokenizer = WordTokenizer()
    prompts = build_prompts(config.workload, 64, tokenizer, None)
    most = max(len(tokenizer.prompt_ids(p)) + p.output_tokens for p in prompts)
    return -(-most // CONTEXT_STEP) * CONTEXT_STEP


def _profile_figures(card):
    """A calibration profile's figures for a plan, where one matches (servelab calibrate)."""
    from servelab.predict.profiles import find_profile

    def figures(plan):
        found = find_profile(card, plan.engine, plan.quant)
        return None if found is None else found[0].rates

    return figures


def lines(advice, show_all: bool = False) -> list[str]:
    """The advice for a person: the ask, the tally, the front with launch commands, why the others lost."""
    s, v = advice.setting, advice.pareto
    demand = (
        _count(s.demand.users, "user")
        if s.demand.users
        else f"{s.demand.rate:g} req/s"
        if s.demand.rate
        else "as many users as fit"
    )
    price = f"; ${s.prices.gpu_hour:g}/GPU-hour" if s.prices.gpu_hour is not None else ""
    missed = [j for j in advice.judged if not j.meets]
    out = [
        f"advise {s.model.name} on {s.gpus} x {s.gpu.name}"
        + (f" ({advice.interconnect})" if advice.interconnect and s.gpus > 1 else "")
        + f", context {advice.context}: {demand}, SLO "
        + ", ".join(f"{b.key}<={b.limit_ms:g}" for b in s.bounds)
        + price,
        f"{advice.candidates} candidates: {len(advice.pruned)} do not fit, {len(advice.screened)} screened out"
        f" by their bounds, {len(missed)} miss the SLO, {len(advice.order)} meet it; front of {len(v.front)}"
        f" (searched in {advice.seconds:.1f} s)",
    ]
    if not v.front:
        out.append("nothing meets the SLO: loosen --slo, lower the load, or add GPUs")
    tied = {id(member): winner for member, winner in v.ties}
    place = {id(j): rank for rank, j in enumerate(v.front, 1)}
    for rank, j in enumerate(v.front, 1):
        out.append(f"{rank}. {j.point.name}: {_figures(j)}")
        safety = _safety(j, s.demand)
        if safety:
            out.append(f"   {safety}")
        if id(j) in tied:
            w = tied[id(j)]
            out.append(
                f"   within the error band of {place[id(w)]} ({w.point.name}): a statistical tie, ranked by what"
                f" each can be counted on for (goodput per GPU at least {_counted(j):.1f} against {_counted(w):.1f})"
            )
        out.append(f"   $ {j.point.plan.command_line}")
    ties = [
        f"  {loser.point.name}: ties with {w.point.name} (the same figures)"
        for loser, w in v.dominated
        if v.same_figures(loser, w)
    ]
    others = [
        f"  {loser.point.name}: dominated by {w.point.name}"
        for loser, w in v.dominated
        if not v.same_figures(loser, w)
    ]
    others += [f"  {j.point.name}: {j.lost}" for j in missed]
    others += [f"  {p.name}: screened out: {p.reason}" for p in advice.screened]
    others += [f"  {p.name}: does not fit: {p.reason}" for p in advice.pruned]
    others += ties  # the same figures as a front member (a batch limit the load never reaches): last
    if others:
        out.append("why the others lost:")
        shown = others if show_all else others[:SHOWN_OTHERS]
        out += shown
        if len(shown) < len(others):
            out.append(f"  … {len(others) - len(shown)} more (--all, or --json)")
    return out


def _counted(j) -> float:
    """The goodput per GPU at its band's lower edge (the figure itself without a band)."""
    band = j.bands.goodput if j.bands is not None else None
    return j.per_gpu_tok_s * (band[0] if band else 1.0)


def _figures(j) -> str:
    from servelab.advise.core import figure_bands
    from servelab.predict.bands import band_number

    bands = figure_bands(j) or {}

    def banded(value: float, key: str, digits: int) -> str:
        band = bands.get(key)
        text = f"{value:.{digits}f}"
        return text if band is None else f"{text} ({band_number(band[0])}-{band_number(band[1])})"

    ttft, tpot = j.p99("ttft_ms"), j.p99("tpot_ms")
    cost = (
        f", ${banded(j.cost_per_mtok, 'usd_per_million_output_tokens', 3)}/M output tokens"
        if j.cost_per_mtok is not None
        else ""
    )
    load = _load(j.load, j.stats.level.rate_rps is None)
    return (
        f"{banded(j.per_gpu_tok_s, 'output_tok_s_per_gpu', 1)} tok/s per GPU ({_count(j.replicas, 'replica')} x"
        f" {load}, {_count(j.gpus_used, 'GPU')}); p99 TTFT {banded(ttft, 'ttft_p99_ms', 0)} ms,"
        f" TPOT {banded(tpot, 'tpot_p99_ms', 1)} ms{cost}"
    )


def _load(load: float, closed: bool) -> str:
    return _count(int(load), "user") if closed else f"{load:.3g} req/s"


def _safety(j, demand) -> str:
    """The SLOs at the bands' upper edge: met at the advised load or which break, and the safe load (where
    searched); empty without a band."""
    if j.bands is None:
        return ""
    closed = demand.closed
    if not j.over_band:
        head = "safe at this load (every SLO met at the bands' upper edge)"
    else:
        head = f"not safe at this load: at the bands' upper edge {'; '.join(j.over_band)}"
    if j.safe is None:
        return head
    if j.safe.load is None:
        least = "" if j.safe.failing is None else f" from {_load(j.safe.failing, closed)} per replica"
        return f"{head}; no share of the demand is safe{least}"
    replicas = f" ({_count(j.safe_replicas, 'replica')} for the demand)" if j.over_band else ""
    return f"{head}; safe to {_load(j.safe.load, closed)} per replica{replicas}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
