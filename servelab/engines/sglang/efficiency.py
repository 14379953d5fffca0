"""sglang's decode efficiency by weight format family and batch. No public single-stream measurement with the
model, card and tokens per second that the derivation needs was found, so every format uses the default
(docs/planning.md "Decode efficiency"); types: servelab/sizing/efficiency.py.
"""

from __future__ import annotations

from servelab.sizing.efficiency import EfficiencyTable, hf_math_unit

TABLE = EfficiencyTable(
    engine="sglang",
    default=0.8,
    default_note="the field report: AWQ on one RTX 4090 48 GB 'ran close to the ceiling',"
    " docs/reference/field-report.md §2",
    cells=(),
    math_unit=hf_math_unit,
    eager_flags=("disable_cuda_graph",),
)
