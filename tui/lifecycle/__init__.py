"""Lifecycle: presets, line cleaning, the pure reducer and replay."""
