"""bringup: a terminal console for bringing up LLM inference servers."""

__version__ = "0.1.0"
