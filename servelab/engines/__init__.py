"""One package per engine. Everything engine-specific (launch flags, endpoints, effective-config reading,
log signatures, allocation rules) lives in that engine's package and nowhere else; the contract is
``base.py``, the list of engines ``registry.py``."""
