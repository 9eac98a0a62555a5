"""Developers' tools, run from a checkout (`python -m tools.serverfacts ...`): never installed with bringup (the
wheel ships `tui` and `widgets` only), and never imported by them (`lint-imports`)."""
