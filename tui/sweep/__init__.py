"""`bringup sweep`: server configurations x a benchmark matrix, each cell measured on a run bound to its flags.

plan.py (the plan file) and metrics.py (the per-cell figures) are pure; results.py is the results directory's
format and reader; runner.py is the protocol (safe restarts under one lock, cells, validity) over a small Protocol
of the engine, like ops/restart.py.
"""
