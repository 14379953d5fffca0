"""Where acceptance comes from: engine logs, a live /metrics, or numbers given by the user.

Engine-specific parsing lives in servelab/engines/<engine>/speculative.py; this module reads the files or
the endpoint, pools what each engine found and resolves it to one accept length for a known gamma.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TextIO

from servelab.diagnose.logs import open_log, read_lines
from servelab.engines import registry
from servelab.engines.base import SpeculativeReader
from servelab.engines.http import HttpProbe
from servelab.errors import ConfigError, TargetError
from servelab.results.observation import SpecObservation
from servelab.speculative.theory import accept_length_from_rate


def _parsers() -> tuple[SpeculativeReader, ...]:
    """Every engine's speculative-decoding parser, in registry order."""
    return tuple(e.speculative for e in registry.engines() if e.speculative is not None)


@dataclass(frozen=True, kw_only=True)
class Acceptance:
    """One accept length (bonus included) for a known number of draft tokens per step, and where it came from."""

    accept_length: float
    draft_tokens: int
    source: str  # "log", "metrics" or "numbers"
    engine: str | None = None
    where: str | None = None
    samples: int = 0
    token_accept_rate: float | None = None  # accepted / drafted draft tokens


def observations_from_logs(paths: Iterable[str], stdin: TextIO | None = None) -> list[SpecObservation]:
    """What each engine's parser finds in each log (``-`` is standard input)."""
    found: list[SpecObservation] = []
    for path in paths:
        stdin_lines = _read_stdin(stdin) if path == "-" else None
        for parser in _parsers():
            lines = stdin_lines if stdin_lines is not None else _stream_lines(path)
            if (obs := parser.parse_log(lines, path)) is not None:
                found.append(obs)
    return found


def observations_from_metrics(url: str, api_key: str | None = None) -> list[SpecObservation]:
    """What each engine's parser finds in ``url``/metrics."""
    probe = HttpProbe(url, api_key=api_key)
    text = probe.get_text("/metrics")
    if text is None:
        raise TargetError(
            f"{probe.base_url}/metrics answered with an error; start the server with metrics on"
        )
    where = f"{probe.base_url}/metrics"
    return [obs for parser in _parsers() if (obs := parser.parse_metrics(text, where)) is not None]


def from_numbers(
    draft_tokens: int, accept_length: float | None = None, accept_rate: float | None = None
) -> Acceptance:
    """Acceptance given on the command line: an accept length, or an accepted/drafted token fraction."""
    if (accept_length is None) == (accept_rate is None):
        raise ConfigError("give exactly one of --accept-length and --accept-rate")
    if accept_length is not None:
        if not 1.0 <= accept_length <= draft_tokens + 1:
            raise ConfigError(
                f"--accept-length {accept_length} must lie between 1 and draft tokens + 1 = {draft_tokens + 1} "
                "(it counts the bonus token)"
            )
        rate = (accept_length - 1.0) / draft_tokens
        return Acceptance(
            accept_length=accept_length, draft_tokens=draft_tokens, source="numbers", token_accept_rate=rate
        )
    given = accept_rate / 100 if accept_rate is not None and 1.0 < accept_rate <= 100.0 else accept_rate
    if given is None or not 0.0 <= given <= 1.0:
        raise ConfigError(
            f"--accept-rate {accept_rate} must be a fraction between 0 and 1 (or a percent up to 100)"
        )
    length = accept_length_from_rate(given, draft_tokens)
    return Acceptance(
        accept_length=length, draft_tokens=draft_tokens, source="numbers", token_accept_rate=given
    )


def pool_acceptance(observations: list[SpecObservation], source: str, draft_tokens: int | None) -> Acceptance:
    """Pool observations of one engine into an Acceptance; ConfigError if none, several engines, or no gamma."""
    if not observations:
        raise ConfigError(f"no speculative-decoding numbers found in the {source}; is speculation on?")
    engines = sorted({obs.engine for obs in observations})
    if len(engines) > 1:
        raise ConfigError(
            f"the {source} show speculative numbers from several engines ({', '.join(engines)}); give one"
        )
    sizes = sorted({obs.draft_tokens for obs in observations if obs.draft_tokens is not None})
    if len(sizes) > 1:
        raise ConfigError(f"the {source} come from runs with different draft sizes ({sizes}); give one run's")
    pooled = observations[0]
    for obs in observations[1:]:
        pooled = pooled.merged(obs)
    gamma = draft_tokens or pooled.draft_tokens
    if gamma is None:
        raise ConfigError(
            f"the {source} do not say how many tokens are drafted per step; pass --draft-tokens N"
        )
    length = _accept_length(pooled, gamma)
    rate = (length - 1.0) / gamma
    if pooled.accepted_tokens is not None and pooled.drafted_tokens:
        rate = pooled.accepted_tokens / pooled.drafted_tokens
    return Acceptance(
        accept_length=length,
        draft_tokens=gamma,
        source=source,
        engine=pooled.engine,
        where=pooled.where,
        samples=pooled.samples,
        token_accept_rate=rate,
    )


def _accept_length(obs: SpecObservation, gamma: int) -> float:
    """Best available: accepted/steps, then the engine's own mean, then gamma * accepted/drafted."""
    if obs.accepted_tokens is not None and obs.verify_steps:
        return 1.0 + obs.accepted_tokens / obs.verify_steps
    if obs.accept_length is not None:
        return obs.accept_length
    if obs.accepted_tokens is not None and obs.drafted_tokens:
        return accept_length_from_rate(min(obs.accepted_tokens / obs.drafted_tokens, 1.0), gamma)
    raise ConfigError(
        f"the speculative numbers in {obs.where} are incomplete; pass --accept-length or --accept-rate"
    )


def _read_stdin(stdin: TextIO | None) -> list[str]:
    """Standard input can be read once, so it is kept; files are streamed once per engine parser."""
    if stdin is None:
        raise ConfigError("'-' needs standard input")
    return list(read_lines(stdin))


def _stream_lines(path: str) -> Iterator[str]:
    with open_log(path) as stream:
        yield from read_lines(stream)
