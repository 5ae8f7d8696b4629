"""Phase 1, configuration: the schema (pure frozen data), loading it from the Hydra tree (load.py), the value
checks (checks.py) and every error message about a config (messages.py)."""
