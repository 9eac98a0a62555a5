"""bringup: a terminal console for bringing up LLM inference servers."""

import sys

__version__ = "0.1.0"

# httpx imports its own command line (`httpx._main`: click, rich's console and syntax highlighting, pygments)
# whenever click is installed, as it is next to SGLang and vLLM (uvicorn needs it) and in the test environment:
# 60-80 ms of CPU at every `bringup` start, for a function bringup never calls. A None in sys.modules makes that one
# optional import fail as it does where click is missing, and httpx (0.28, pinned) then defines its stub `main`.
# setdefault: an interpreter that imported it already (a program embedding bringup) keeps it.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
