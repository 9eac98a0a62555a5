"""Helpers the tests share (a test module never imports another: tests/README.md): the one wait on a condition
(wait.py), Textual's pilot waits (pilot.py) and the console read through Textual's public API (console_app.py), the
test hosts and container engines (testhost.py, containers.py), and the builders of configs, deployments, processes,
records and fixed states the tests run against."""
