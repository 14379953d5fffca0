"""Sizing: the pure arithmetic of what a model takes on a card and how fast it can go, and the plan's value types.

KV cache (`kv`), fixed-size recurrent state (`state`), weights (`weights`), tensor-parallel cost (`parallel`),
speed ceilings and efficiencies (`speed`, `efficiency`), a plan's settings and fit (`fit`: `PlanSettings`,
`EngineFit`), the plan itself (`types`), typed JSON (`typed_json`) and the bases of each engine's Settings and
Figures (`typed`). Engine packages and `plan.make` build on it; it imports no engine and nothing above it.
"""
