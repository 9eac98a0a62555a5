"""Textual widgets of the bringup console: plain data in, rendering out, no I/O."""
