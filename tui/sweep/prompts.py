"""The prompts of a sweep's requests: deterministic words of about the cell's prompt length, different per request so
that no prefix cache turns the matrix into a cache benchmark, or the plan's dataset's (plan.py reads it). Pure: built
offline, no download, no tokenizer.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

_VOCAB = ("time", "system", "river", "model", "light", "paper", "number", "garden", "signal", "market", "window",
          "history", "engine", "morning", "letter", "bridge", "energy", "question", "village", "pattern", "music",
          "silver", "orbit", "harbor", "theory", "winter", "circle", "forest", "mirror", "device", "station",
          "journey")


def build_prompt(tokens: int, index: int, dataset: Sequence[str] | None = None) -> str:
    """A deterministic prompt of about `tokens` tokens (one common English word is about one token), different per
    request `index` so that no prefix cache turns the matrix into a cache benchmark; built offline, no download.
    With a dataset: its `index`-th prompt (cycled), cut or repeated to about `tokens` words when `tokens` > 0."""
    if dataset:
        text = dataset[index % len(dataset)]
        if tokens <= 0:
            return text
        words = text.split() or ["x"]
        return " ".join(itertools.islice(itertools.cycle(words), tokens))
    head = f"Request {index}. Continue this list of words:"
    n = max(1, tokens - 7)
    state = (index * 2654435761 + tokens * 40503 + 12345) & 0xFFFFFFFF
    words = []
    for _ in range(n):
        state = (1103515245 * state + 12345) & 0x7FFFFFFF
        words.append(_VOCAB[(state >> 8) % len(_VOCAB)])
    return head + " " + " ".join(words)
