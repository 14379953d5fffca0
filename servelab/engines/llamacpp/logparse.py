"""Reading what llama-server allocated from its log: model, KV, recurrent-state, output and compute buffers.

The buffer lines need ``-lv 4`` in the pinned build (b1-0c1e570: the default verbosity 3 hides them); they
come from llama-model.cpp (load_tensors), llama-context.cpp, llama-kv-cache.cpp,
llama-memory-recurrent.cpp and ggml sched_reserve, e.g.::

    load_tensors:   CPU_Mapped model buffer size =     4.79 MiB
    llama_context: n_ctx                 = 8192
    llama_kv_cache:        CPU KV buffer size =     4.00 MiB
    llama_kv_cache: size =    4.00 MiB (  2048 cells,   2 layers,  4/4 seqs), K (f16):    2.00 MiB, V (f16): ...
    llama_memory_recurrent:        CPU RS buffer size =     0.13 MiB
    sched_reserve:        CPU compute buffer size =     4.27 MiB

Sizes are printed in MiB with two decimals, so a parsed size is exact to +-0.005 MiB (``MIB_PRECISION_BYTES``).
A log with a draft model (-md) holds one section per model, in load order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

MIB = 1 << 20
MIB_PRECISION_BYTES = MIB // 200  # half of the last printed digit (0.005 MiB)

BUFFER = re.compile(
    r"(?P<where>\w+):\s+(?P<device>\S+)\s+(?P<kind>model|KV|RS|output|compute) buffer size =\s*(?P<mib>[\d.]+) MiB"
)
CONTEXT_FIELD = re.compile(
    r"llama_context: (?P<key>n_ctx|n_ctx_seq|n_seq_max|n_batch|n_ubatch|n_rs_seq|kv_unified|flash_attn)\s+= (?P<value>\S+)"
)
KV_SIZE = re.compile(
    r"llama_kv_cache: size =\s*[\d.]+ MiB \(\s*(?P<cells>\d+) cells,\s*(?P<layers>\d+) layers,\s*(?P<seqs>\d+)/\d+ seqs\), K \((?P<k>\w+)\):.*V \((?P<v>\w+)\)"
)
RS_SIZE = re.compile(
    r"llama_memory_recurrent: size =\s*[\d.]+ MiB \(\s*(?P<cells>\d+) cells,\s*(?P<layers>\d+) layers"
)
SLOTS = re.compile(r"n_slots = (?P<slots>\d+), n_ctx_slot = (?P<ctx>\d+)")
FLASH_RESOLVED = re.compile(r"Flash Attention (?:was auto, set to )?(?P<state>enabled|disabled)")
NEW_CONTEXT = "llama_context: constructing llama_context"
KINDS = {"model": "model", "KV": "kv", "RS": "recurrent", "output": "output", "compute": "compute"}


@dataclass(frozen=True, kw_only=True)
class LoggedBuffers:
    """One model's buffers as logged (bytes, from MiB: +-MIB_PRECISION_BYTES), summed over devices."""

    model_bytes: int = 0
    kv_bytes: int = 0
    recurrent_bytes: int = 0
    output_bytes: int = 0
    compute_bytes: int = 0
    by_device: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> device -> bytes
    context: dict[str, str] = field(default_factory=dict)  # llama_context fields as printed
    kv_cells: int | None = None
    kv_layers: int | None = None
    kv_type_k: str | None = None
    kv_type_v: str | None = None
    recurrent_cells: int | None = None
    recurrent_layers: int | None = None
    flash_attn: bool | None = None

    def context_int(self, key: str) -> int | None:
        value = self.context.get(key)
        return int(value) if value is not None and value.isdigit() else None


@dataclass(frozen=True)
class ServerLog:
    sections: tuple[LoggedBuffers, ...]  # the target model first, then a draft model if any
    n_slots: int | None = None
    n_ctx_slot: int | None = None

    @property
    def main(self) -> LoggedBuffers:
        return self.sections[0] if self.sections else LoggedBuffers()


def _add_buffer(section: LoggedBuffers, match: re.Match[str]) -> LoggedBuffers:
    kind = KINDS[match["kind"]]
    size = round(float(match["mib"]) * MIB)
    devices = {k: dict(v) for k, v in section.by_device.items()}
    devices.setdefault(kind, {})
    devices[kind][match["device"]] = devices[kind].get(match["device"], 0) + size
    return replace(
        section, **{f"{kind}_bytes": getattr(section, f"{kind}_bytes") + size, "by_device": devices}
    )


def _parse_line(section: LoggedBuffers, line: str) -> LoggedBuffers:
    if m := BUFFER.search(line):
        return _add_buffer(section, m)
    if m := CONTEXT_FIELD.search(line):
        return replace(section, context={**section.context, m["key"]: m["value"]})
    if m := KV_SIZE.search(line):
        return replace(
            section, kv_cells=int(m["cells"]), kv_layers=int(m["layers"]), kv_type_k=m["k"], kv_type_v=m["v"]
        )
    if m := RS_SIZE.search(line):
        return replace(section, recurrent_cells=int(m["cells"]), recurrent_layers=int(m["layers"]))
    if m := FLASH_RESOLVED.search(line):
        return replace(section, flash_attn=m["state"] == "enabled")
    return section


def parse_server_log(text: str) -> ServerLog:
    """Every model's buffers in a llama-server log. A model's ``load_tensors`` lines come before its context."""
    sections: list[LoggedBuffers] = []
    current = LoggedBuffers()
    slots = ctx_slot = None
    for line in text.splitlines():
        if "load_tensors:" in line and "model buffer size" in line and current.context:
            sections.append(current)  # a second model (the draft) starts loading
            current = LoggedBuffers()
        current = _parse_line(current, line)
        if m := SLOTS.search(line):
            slots, ctx_slot = int(m["slots"]), int(m["ctx"])
    if current != LoggedBuffers():
        sections.append(current)
    return ServerLog(tuple(sections), slots, ctx_slot)


# --- planner prediction versus the log -------------------------------------------------------------------

BUFFERS = ("model_bytes", "kv_bytes", "recurrent_bytes", "compute_bytes")  # names shared with LlamaCppMemory


@dataclass(frozen=True)
class BufferCheck:
    buffer: str  # model_bytes, kv_bytes, recurrent_bytes, compute_bytes
    predicted_bytes: int
    logged_bytes: int

    @property
    def error_bytes(self) -> int:
        return self.predicted_bytes - self.logged_bytes

    @property
    def relative_error(self) -> float | None:
        return self.error_bytes / self.logged_bytes if self.logged_bytes else None

    def within(self, fraction: float) -> bool:
        """|predicted - logged| <= fraction of logged, or within the log's own print precision (0.005 MiB)."""
        return abs(self.error_bytes) <= max(fraction * self.logged_bytes, MIB_PRECISION_BYTES)


def compare_buffers(predicted: object, logged: LoggedBuffers) -> tuple[BufferCheck, ...]:
    """Each buffer the planner predicts (a LlamaCppMemory) beside the one llama-server logged."""
    return tuple(BufferCheck(name, int(getattr(predicted, name)), getattr(logged, name)) for name in BUFFERS)


def log_memory_bytes(text: str) -> int | None:
    """Every buffer a llama-server log reports (model, KV, recurrent state, output, compute; draft included)."""
    sections = parse_server_log(text).sections
    total = sum(
        s.model_bytes + s.kv_bytes + s.recurrent_bytes + s.output_bytes + s.compute_bytes for s in sections
    )
    return total or None
