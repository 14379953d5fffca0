"""The engine contract: everything an engine provides, named in one place.

An engine is one package under ``servelab/engines/`` whose ``engine.py`` builds one ``Engine`` value, and one
line in ``servelab/engines/registry.py``. Every other layer loops over the registry; none names an engine.

Every engine provides (required):
    identity        name, label, aliases (``llama.cpp`` = ``llamacpp``), default port, health path
    endpoints       identify(probe) -> DetectedEngine | None; read_effective(probe, model) -> dict (EffectiveConfig's
                    keys, and those of its own ``reported_type``: what only it reports, verify's ``EffectiveConfig.own``)
    verify_rules    LABELS, UNREPORTED, reported(key, got), explain(...) -> (cause, fix), notes(got)
    bench_extras    ACCEPTS_TOKEN_IDS, KEEP_ALIVE, SNAPSHOT_PATHS, SERVER_METRICS, request_fields(), tokenize(), count_chat_tokens()

Optional capabilities are ``None`` when the engine lacks them (never discovered by ``getattr``):
    cmdline         the command-line reader and writer: recognises(argv), parse(argv, env), expectations(launch),
                    LAUNCH_FORMS, IMAGE_WORDS (container images that run it)
    launcher        start(model, args, host=, port=, log_path=, timeout_s=) -> EngineServer; HEALTH_TIMEOUT_S
    installer       find(), install(cuda=, progress=), register(path) -> Installed (``servelab engine install``)
    planner         ``Planner``: memory rules + planner adapter + efficiency figures; its own ``settings_type`` (the
                    knobs ``plan``/``predict`` take after ``--``, read by ``settings(words, environment)``) and
                    ``figures_type`` (what the planner hands its scheduler and saves; typed.py); launch_settings: a
                    parsed launch command as ``LaunchSettings``, for ``plan --cmd/--compose``
    signatures      the package holding ``signatures.yaml`` (known log lines, see diagnose/signatures)
    environment     ENV_SWITCHES (variables that degrade it), p2p_cache_glob(env, cache_home)
    speculative     parse_log(lines, where), parse_metrics(text, where) -> SpecObservation | None
    log_memory      ``LogMemory``: log text -> bytes the engine says it allocated (for the bill)
    source_build    quant -> ``SourceBuild`` (a fork) when the official image cannot load that format
    scheduler       ``EngineSetup`` (the plan's typed engine figures) -> the emulator's ``Scheduler`` for `servelab
                    predict` (servelab/scheduling/core.py; continuous batching or llama.cpp's slots)
    cpu_batched_path  True when its CPU backend prices a pass of >= 2 tokens as weights streamed, then computed
                    (llama.cpp's tinyBLAS): the emulator's ``AchievedRates.batched_bandwidth_bytes_s``
    cpu_decode_attention  on a CPU, the rate its decode attention runs at after the matmuls, as a fraction of
                    the compute figure: the emulator's ``Roofline.decode_attention_ratio`` (None: inside the max)
    reported_type   what only it reports of its effective configuration (a frozen dataclass): verify's
                    ``EffectiveConfig.own``
    bench_replay    ``BenchReplay``: its own benchmark tools (llama-bench …) as the steps they run, for replaying a
                    published row of theirs (predict/corpus/harness.py)
    cpu_threads     n -> its flags for n compute threads on a CPU (llama.cpp ``-t n``), so a server pinned to n CPUs
                    runs n threads (the demo, ``advise --confirm``); None: it takes the CPUs it is given
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from servelab.sizing.typed import Figures, NoFigures, NoSettings, SpeculativeWords

if TYPE_CHECKING:
    from servelab.engines.http import DetectedEngine, HttpProbe
    from servelab.engines.process import EngineServer
    from servelab.engines.prometheus import ServerMetric
    from servelab.hardware.gpus import GPU
    from servelab.model.spec import ModelSpec
    from servelab.results.configs import Asked, EffectiveConfig
    from servelab.results.observation import SpecObservation
    from servelab.scheduling.core import EngineSetup, Scheduler, Step
    from servelab.sizing.efficiency import EfficiencyTable
    from servelab.sizing.fit import EngineFit, PlanSettings


class Endpoints(Protocol):
    """How the engine says who it is and what it really got, over HTTP."""

    def identify(self, probe: HttpProbe) -> DetectedEngine | None: ...

    def read_effective(self, probe: HttpProbe, model: str | None = None) -> dict[str, Any]: ...


class VerifyRules(Protocol):
    """How an asked key is read from the effective config and why a mismatch happened."""

    @property
    def LABELS(self) -> Mapping[str, str]: ...
    @property
    def UNREPORTED(self) -> Mapping[str, str]: ...  # why a key cannot be checked against this engine

    def reported(self, key: str, got: EffectiveConfig) -> Any: ...

    def explain(
        self, key: str, asked_value: Any, got_value: Any, asked: Asked, got: EffectiveConfig
    ) -> tuple[str, str] | None: ...

    def notes(self, got: EffectiveConfig) -> tuple[str, ...]: ...


class BenchExtras(Protocol):
    """What the benchmark does differently against this engine."""

    @property
    def ACCEPTS_TOKEN_IDS(self) -> bool: ...  # /v1/completions takes a list of token ids as the prompt
    @property
    def KEEP_ALIVE(self) -> bool: ...  # reuse connections between requests
    @property
    def SNAPSHOT_PATHS(self) -> tuple[str, ...]: ...  # endpoints stored before and after each level
    @property
    def SERVER_METRICS(self) -> tuple[ServerMetric, ...]: ...  # /metrics series summarised per level

    def request_fields(self) -> dict[str, Any]: ...

    def tokenize(self, probe: HttpProbe, text: str, model: str | None) -> list[int] | None: ...

    def count_chat_tokens(self, probe: HttpProbe, messages: list[dict], model: str | None) -> int | None: ...


class CommandLine(Protocol):
    """The engine's launch command taken apart (reader) and the words ``servelab plan`` emits (writer)."""

    @property
    def LAUNCH_FORMS(self) -> tuple[str, ...]: ...  # how a launch is spelled, for messages
    @property
    def IMAGE_WORDS(self) -> tuple[str, ...]: ...  # words in a container image name that run this engine

    def recognises(self, argv: list[str]) -> bool: ...

    def parse(self, argv: list[str], environment: dict[str, str] | None = None) -> Any: ...

    def expectations(self, launch: Any) -> dict[str, Any]: ...


class Launcher(Protocol):
    """Starts the engine as a managed child process bound where asked (127.0.0.1 by default)."""

    @property
    def HEALTH_TIMEOUT_S(self) -> float: ...
    def start(
        self,
        model: str,
        args: Sequence[str],
        *,
        host: str,
        port: int,
        log_path: Path | None,
        timeout_s: float,
    ) -> EngineServer: ...


class Installed(Protocol):
    """An engine program servelab found, built or registered."""

    @property
    def path(self) -> Path: ...
    @property
    def version(self) -> str: ...
    @property
    def source(self) -> str: ...  # "env", "config", "cache" or "build"


class Installer(Protocol):
    """How servelab gets the engine's program onto this machine (``servelab engine install``)."""

    def find(self) -> Installed: ...  # EngineError saying how to install when there is none

    def install(self, *, cuda: bool, progress: Callable[[str], None]) -> Installed: ...

    def register(self, path: Path) -> Installed: ...  # an existing binary (a fork too), checked first


class Environment(Protocol):
    """Environment variables the engine reads that change what it does, and its P2P-test cache."""

    @property
    def ENV_SWITCHES(self) -> Mapping[str, Any]: ...
    def p2p_cache_glob(self, env: Mapping[str, str], cache_home: str) -> str: ...


class SpeculativeReader(Protocol):
    """Acceptance figures from the engine's log lines and /metrics."""

    def parse_log(self, lines: Iterable[str], where: str) -> SpecObservation | None: ...

    def parse_metrics(self, metrics_text: str, where: str) -> SpecObservation | None: ...


@dataclass(frozen=True, kw_only=True)
class SourceBuild:
    """A build from source (a fork) for weight formats the engine's official image cannot load: what
    ``plan --emit dockerfile`` compiles for the card's CUDA architecture."""

    label: str  # "PrismML's llama.cpp fork"
    repo: str  # git URL
    ref: str  # branch or tag to build
    formats: tuple[str, ...]  # the weight formats only this build loads
    cmake_flags: tuple[str, ...]  # besides the CUDA architecture
    target: str  # the binary to build and run ("llama-server")
    image: str  # the local image tag the compose service builds


@dataclass(frozen=True, kw_only=True)
class LaunchSettings:
    """What a launch command asks the planner for (``plan --cmd/--compose``); None: the command does not say,
    the engine's default applies. ``context`` is what one request gets from the launch as written."""

    model: str | None = None
    context: int | None = None
    parallel: int | None = None
    kv_dtype: str | None = None
    tp: int | None = None
    quant: str | None = None
    engine: Any = (
        None  # the engine's own Settings (`Planner.settings_type`) the launch gives; None: its defaults
    )
    notes: tuple[str, ...] = ()  # what the launch does that its author may not expect


@dataclass(frozen=True, kw_only=True)
class Planner:
    """What ``servelab plan`` needs from an engine: its allocation rules behind one adapter, and its figures."""

    plan: Callable[[ModelSpec, GPU, PlanSettings], EngineFit]  # memory rules for one request -> a fit
    weight_formats: str  # "gguf": GGUF types; "hf": safetensors formats (bf16, fp8, awq, gptq …)
    usual_quants: tuple[str, ...]  # the quantizations `plan` compares when none is asked
    prefill_chunk_tokens: int  # n_ubatch / chunked_prefill_size / max_num_batched_tokens by default
    decode_efficiency: (
        EfficiencyTable  # share of the roofline its decode reaches, by format x batch (docs/planning.md)
    )
    prefill_efficiency: float
    state_dtypes: tuple[str | None, str | None] = (None, None)  # (conv, ssm) state dtypes; None: the model's
    tensor_parallel: str = "all-reduce"  # or "layers": GPUs hold layer ranges (a pipeline, no all-reduce)
    needs_cuda: bool = True  # False: runs on unified-memory (Apple) GPUs too
    cpu_efficiency: tuple[float, float] | None = (
        None  # (decode, prefill) on the CPU device; None: not planned there
    )
    # the engine's own knobs: a frozen dataclass of `typed.setting` fields, validated in __post_init__ (PlanSettings.engine)
    settings_type: type[Any] = NoSettings
    # the words after `servelab plan … --` (and the environment) -> settings_type, by the engine's command-line reader
    settings: Callable[[list[str], dict[str, str] | None], Any] | None = None
    # what the planner hands its scheduler and saves as a plan's `details` (a `typed.Figures`: to_json/from_json)
    figures_type: type[Figures] = NoFigures
    launch_settings: Callable[[Any], LaunchSettings] | None = None  # cmdline.parse's value -> plan settings
    image_version: Callable[[str], str | None] | None = None  # the release an image tag names, None: none
    kv_dtypes: tuple[str, ...] = ()  # KV cache dtypes `plan` tries when none is asked, the preferred first
    # its Settings' own speculative flags in servelab's terms (None: none asked; the field None: the engine has none)
    speculative_words: Callable[[Any], SpeculativeWords | None] | None = None


@dataclass(frozen=True)
class BenchWorkload:
    """One published run of an engine's own benchmark tool: `sequences` prompts of `prompt_tokens` after `depth`
    tokens of context, then `output_tokens` decode steps; `client` the tool's name."""

    client: str
    prompt_tokens: int
    output_tokens: int
    depth: int = 0
    sequences: int = 1


class BenchReplay(Protocol):
    """An engine's own benchmark tools as steps (the timed ones; their figures are tokens over those steps'
    time). `flags` are the row's stated flags (its batch sizes)."""

    CLIENTS: tuple[str, ...]  # the tools' names as the corpus writes them

    def prompt_steps(self, w: BenchWorkload, flags: Mapping[str, object]) -> Iterator[Step]: ...

    def decode_steps(self, w: BenchWorkload, flags: Mapping[str, object]) -> Iterator[Step]: ...


@dataclass(frozen=True)
class LogMemory:
    """How much memory the engine's own log says it allocated (the bill's 'memory used' from a log)."""

    read: Callable[[str], int | None]  # log text -> bytes, None when the log names no buffer
    hint: str  # what to do when it names none: "start llama-server with -lv 4 to log them"


@dataclass(frozen=True, kw_only=True)
class Engine:
    """One engine, as every layer of servelab sees it."""

    name: str  # canonical key, stored in results: "llamacpp"
    label: str  # how people write it: "llama.cpp"
    endpoints: Endpoints
    verify_rules: VerifyRules
    bench_extras: BenchExtras
    aliases: tuple[str, ...] = ()
    default_port: int | None = None
    health_path: str = "/health"
    image: str | None = None  # the container image `plan --emit compose` uses
    fallback: bool = False  # the generic engine: detected last, its rules used for unknown servers
    model_scoped_endpoints: bool = (
        False  # its effective config is read per model: verify passes the asked one
    )
    cmdline: CommandLine | None = None
    launcher: Launcher | None = None
    installer: Installer | None = None
    planner: Planner | None = None
    signatures: str | None = None  # the package whose signatures.yaml lists its known log lines
    environment: Environment | None = None
    speculative: SpeculativeReader | None = None
    log_memory: LogMemory | None = None
    source_build: Callable[[str], SourceBuild | None] | None = None  # quant -> the fork that loads it
    scheduler: Callable[[EngineSetup], Scheduler] | None = None  # the emulator's model of its scheduler
    cpu_batched_path: bool = (
        False  # on a CPU, passes of >= 2 tokens take a matrix-matrix path (predict/roofline.py)
    )
    cpu_decode_attention: float | None = None  # on a CPU, decode attention's rate / the compute figure
    # what only this engine reports of its effective configuration (a frozen dataclass; read_effective's keys beyond
    # EffectiveConfig's): verify's `EffectiveConfig.own`
    reported_type: type | None = None
    bench_replay: BenchReplay | None = None
    cpu_threads: Callable[[int], tuple[str, ...]] | None = None  # n -> its flags for n threads on a CPU

    def spellings(self) -> tuple[str, ...]:
        """Every name a user may type for this engine, normalised."""
        return tuple(dict.fromkeys(normalise(n) for n in (self.name, self.label, *self.aliases)))


def normalise(name: str) -> str:
    """``llama.cpp``, ``LlamaCpp``, ``llama-cpp`` -> ``llamacpp``: the one way engine names are compared."""
    return name.strip().lower().replace(".", "").replace("-", "").replace("_", "")
