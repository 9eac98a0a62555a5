"""vLLM's changes between consecutive releases with facts, in what its preset relies on, and how the preset
treats each (tui/lifecycle/presets/release_changes.py; held to the facts by tests/unit/test_release_changes.py).
Written out with the facts of each new release: a change a release brings fails that test until it is declared here,
after the preset has been taught it."""

from __future__ import annotations

from tui.lifecycle.presets.release_changes import ChangeKind as K
from tui.lifecycle.presets.release_changes import ReleaseChange as C
from tui.lifecycle.presets.release_changes import Treatment as T

CHANGES: tuple[C, ...] = (
    C("0.8.5", K.FLAG_ADDED, "--data-parallel-size", T.OFFERED_WHERE_TAKEN),
    C("0.8.5", K.FLAG_ADDED, "--enable-expert-parallel", T.OFFERED_WHERE_TAKEN),
    C("0.8.5", K.METRIC_ADDED, "vllm:spec_decode_num_drafts_total", T.READ_WHERE_EXPORTED,
      why="speculative drafts counted where exported (0.8.5+)"),
    C("0.9.2", K.FLAG_ADDED, "--cuda-graph-sizes", T.HINTED_WHERE_TAKEN,
      why="the capture cap hints name where the release takes it (vllm_hints._capture_cap)"),
    C("0.11.0", K.WORDING_GONE, "EngineDeadError", T.WORDING_KEPT,
      why="older releases word it in a message; later ones raise `EngineDeadError()` with none "
          "(v1/engine/core_client.py), its class name ending the traceback"),
    C("0.12.0", K.FLAG_DEPRECATED, "--cuda-graph-sizes", T.HINTED_WHERE_TAKEN,
      successor="--max-cudagraph-capture-size", why="--cuda-graph-sizes is deprecated and will be removed in "
                                                    "v0.13.0 or v1.0.0, whichever is soonest. Please use --cudagraph-"),
    C("0.12.0", K.FLAG_ADDED, "--max-cudagraph-capture-size", T.OFFERED_WHERE_TAKEN,
      why="offered and named in hints from 0.12.0"),
    C("0.12.0", K.WORDING_GONE, r"Avg generation throughput: (?:[1-9]\d*|0\.\d*[1-9])", T.WORDING_KEPT,
      why="0.12+ join the line from a list of parts (v1/metrics/loggers.py `log_parts`), which the facts do not "
          "hold as one template; the logged words are unchanged (`Avg generation throughput: %.1f tokens/s`)"),
    C("0.13.0", K.FLAG_ADDED, "--attention-backend", T.HINTED_WHERE_TAKEN),
    C("0.13.0", K.FLAG_GONE, "--cuda-graph-sizes", T.HINTED_WHERE_TAKEN,
      successor="--max-cudagraph-capture-size", why="hints name --max-cudagraph-capture-size where it exists "
                                                    "(0.12.0+)"),
    C("0.17.0", K.FLAG_ADDED, "--moe-backend", T.HINTED_WHERE_TAKEN),
    C("0.20.0", K.WORDING_GONE, r"Engine core proc \S+ died unexpectedly", T.WORDING_KEPT,
      why="kept for 0.8.5 ... 0.19; 0.33+ say `engine core exited unexpectedly`, a fatal wording of its own"),
    C("0.22.0", K.FLAG_ADDED, "--linear-backend", T.HINTED_WHERE_TAKEN),
    C("0.23.0", K.WORDING_GONE, "Shutting down FastAPI HTTP server", T.WORDING_KEPT,
      why="kept for the releases that log it; later stops are seen by the other stopping wordings"),
    C("0.33.0", K.WORDING_GONE, r"SIGTERM received\b", T.WORDING_KEPT,
      why="kept for the releases that log it; 0.33+ stops are seen by their `[shutdown]` lines"),
    C("0.34.0", K.FLAG_DEPRECATED, "--max-cudagraph-capture-size", T.OFFERED_WHERE_TAKEN,
      why="0.34 deprecates it for model runner V2 (compilation config keys, no flag of its own) but still takes it: "
          "offered and hinted while taken"),
)

__all__ = ["CHANGES"]
