"""Helpers the tests share: the one wait on a condition (wait.py), Textual's pilot waits (pilot.py), and the builders
of configs, deployments, processes and fixed states the tests run against."""
