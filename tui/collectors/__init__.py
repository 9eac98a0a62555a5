"""Collectors: long-lived readers that turn a host's raw signals into typed, timestamped events."""
