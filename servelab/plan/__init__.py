"""The planner: will a model fit, under which engine flags, and how fast can it go (pure arithmetic)."""

from servelab.plan.io import load_plan
from servelab.plan.make import compare_plans, make_plan
from servelab.plan.types import MemoryBytes, Plan, PlanSet

__all__ = ["MemoryBytes", "Plan", "PlanSet", "compare_plans", "load_plan", "make_plan"]
