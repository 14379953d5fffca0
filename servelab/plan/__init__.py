"""The planner: will a model fit, under which engine flags, and how fast can it go (pure arithmetic).

``plan.make`` (make_plan, compare_plans) drives each engine's planner adapter through the registry; the
core (kv, state, weights, dtypes, speed, parallel, fit, types) imports no engine (fit: only the contract's leaf
``sizing/typed.py``, the base of each engine's Figures). This package's ``__init__`` imports nothing, so
engines can import the core without a cycle.
"""
