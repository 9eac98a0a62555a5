"""SGLang's changes between consecutive releases with facts, in what its preset relies on, and how the preset
treats each (tui/lifecycle/presets/release_changes.py; held to the facts by tests/unit/test_release_changes.py).
Written out with the facts of each new release: a change a release brings fails that test until it is declared here,
after the preset has been taught it."""

from __future__ import annotations

from tui.lifecycle.presets.release_changes import ChangeKind as K
from tui.lifecycle.presets.release_changes import ReleaseChange as C
from tui.lifecycle.presets.release_changes import Treatment as T

CHANGES: tuple[C, ...] = (
    C("0.5.1", K.FLAG_ADDED, "--moe-runner-backend", T.HINTED_WHERE_TAKEN),
    C("0.5.2", K.CHOICE_ADDED, "--speculative-algorithm=STANDALONE", T.CHOICES_FROM_RELEASE),
    C("0.5.2", K.FLAG_ADDED, "--speculative-draft-model", T.OFFERED_WHERE_TAKEN),
    C("0.5.3", K.CHOICE_ADDED, "--speculative-algorithm=NGRAM", T.CHOICES_FROM_RELEASE),
    C("0.5.4", K.METRIC_ADDED, "sglang:spec_accept_rate", T.READ_WHERE_EXPORTED,
      why="the accept rate shown where exported (0.5.4+), none before"),
    C("0.5.5", K.WORDING_GONE, r"Decode batch(?: \[\d+\])?[.,] #running-req: [1-9]", T.WORDING_KEPT,
      why="0.5.5+ `Decode batch{iter}, #running-req: {}`: the optional part renders as a number or nothing here, "
          "while the server writes ` [N]` or nothing, which the wording matches"),
    C("0.5.7", K.FLAG_ADDED, "--fp8-gemm-backend", T.HINTED_WHERE_TAKEN),
    C("0.5.7", K.METRIC_ADDED, "sglang:realtime_tokens_total", T.READ_WHERE_EXPORTED,
      why="decode tokens/s from this counter where exported (0.5.7+), else from the sglang:gen_throughput gauge"),
    C("0.5.7", K.WORDING_GONE, r"[Ww]atchdog timeout \(self\.watchdog_timeout=[^,)]*(?:\)|, self\.soft=False)",
      T.WORDING_KEPT, why="0.5.7+ `{} watchdog timeout (self.watchdog_timeout={}, self.soft={})`: self.soft "
                          "renders as 1 here; a hard watchdog logs self.soft=False, which the wording matches"),
    C("0.5.10", K.PROG_CHANGED, "prog", T.ANY_PROG,
      why="argv[0]'s name (launch_server.py) -> `sglang serve: error:`: common.BAD_ARGS takes a program of several "
          "words"),
    C("0.5.10", K.WORDING_GONE, "scheduler is dead", T.WORDING_KEPT,
      why="kept for the releases that log it (0.5.9 and older); later ones say the other scheduler-died wordings"),
    C("0.5.10", K.WORDING_GONE, "[Ss]erver warmup failed", T.WORDING_KEPT,
      why="kept for the releases that log it (0.5.9 and older); `warmup error` and the warmup frames stay"),
    C("0.5.11", K.CHOICE_ADDED, "--speculative-algorithm=DFLASH", T.CHOICES_FROM_RELEASE),
    C("0.5.11", K.FLAG_ADDED, "--speculative-dflash-block-size", T.OFFERED_WHERE_TAKEN),
    C("0.5.12", K.CHOICE_GONE, "--speculative-algorithm=NEXTN", T.CHOICES_FROM_RELEASE,
      why="0.5.12 lists no NEXTN (back in 0.5.13): not offered on 0.5.12"),
    C("0.5.12", K.CHOICE_ADDED, "--speculative-algorithm=FROZEN_KV_MTP", T.CHOICES_FROM_RELEASE),
    C("0.5.13", K.CHOICE_ADDED, "--speculative-algorithm=NEXTN", T.CHOICES_FROM_RELEASE),
    C("0.5.13", K.METRIC_ADDED, "sglang:spec_verify_calls_total", T.READ_WHERE_EXPORTED,
      why="the sweep's accept length from it where exported (0.5.13+)"),
    C("0.5.14", K.FLAG_ADDED, "--cuda-graph-backend-decode", T.OFFERED_WHERE_TAKEN),
    C("0.5.14", K.FLAG_ADDED, "--cuda-graph-backend-prefill", T.OFFERED_WHERE_TAKEN),
    C("0.5.14", K.FLAG_DEPRECATED, "--cuda-graph-max-bs", T.OFFERED_WHERE_TAKEN,
      successor="--cuda-graph-max-bs-decode", why="Deprecated alias for --cuda-graph-max-bs-decode. (the release): "
                                                  "hints name the decode flag where it exists (sglang_hints._max_bs)"),
    C("0.5.14", K.FLAG_ADDED, "--cuda-graph-max-bs-decode", T.OFFERED_WHERE_TAKEN),
    C("0.5.14", K.FLAG_DEPRECATED, "--disable-cuda-graph", T.KEY_MOVES,
      successor="--cuda-graph-backend-decode", why="Deprecated. Use --cuda-graph-backend-{decode,prefill}=disabled "
                                                   "instead."),
    C("0.5.14", K.FLAG_LIKE_ADDED, "--cuda-graph-bs-decode", T.NOT_RELIED_ON,
      why="a list of batch sizes, not a rename: bringup edits the cap (--cuda-graph-max-bs-decode)"),
    C("0.5.14", K.FLAG_LIKE_ADDED, "--cuda-graph-bs-prefill", T.NOT_RELIED_ON,
      why="a list of batch sizes, not a rename: bringup edits the cap (--cuda-graph-max-bs-decode)"),
    C("0.5.14", K.FLAG_LIKE_ADDED, "--cuda-graph-config", T.NOT_RELIED_ON,
      why="a JSON of every graph setting; the per-phase flags stay the command line bringup writes"),
    C("0.5.14", K.FLAG_LIKE_ADDED, "--cuda-graph-max-bs-prefill", T.NOT_RELIED_ON,
      why="the prefill half of the cap whose decode half replaced --cuda-graph-max-bs (the deprecation names "
          "decode): hints name the decode one"),
    C("0.5.14", K.FLAG_LIKE_ADDED, "--cuda-graph-tc-compiler", T.NOT_RELIED_ON,
      why="a compiler choice for graph capture, not a replacement of a flag bringup edits"),
    C("0.5.14", K.FLAG_LIKE_ADDED, "--disable-decode-cuda-graph", T.NOT_RELIED_ON,
      why="per-phase switches; the deprecation of --disable-cuda-graph names "
          "--cuda-graph-backend-{decode,prefill}=disabled, which g writes"),
    C("0.5.14", K.FLAG_LIKE_ADDED, "--disable-prefill-cuda-graph", T.NOT_RELIED_ON,
      why="per-phase switches; the deprecation of --disable-cuda-graph names "
          "--cuda-graph-backend-{decode,prefill}=disabled, which g writes"),
    C("0.5.16", K.CHOICE_ADDED, "--speculative-algorithm=DSPARK", T.CHOICES_FROM_RELEASE),
    C("0.5.20", K.FLAG_GONE, "--cuda-graph-max-bs", T.OFFERED_WHERE_TAKEN,
      successor="--cuda-graph-max-bs-decode", why="removed; the old spelling is then an ambiguous abbreviation of "
                                                  "-decode and -prefill, refused"),
    C("0.5.20", K.CHOICE_ADDED, "--speculative-algorithm=UNO", T.CHOICES_FROM_RELEASE),
    C("0.5.22", K.CHOICE_GONE, "--cuda-graph-backend-decode=tc_piecewise", T.CHOICES_FROM_RELEASE,
      why="0.5.22 refuses it: --set refuses it on 0.5.22+ (the release offers its own choices)"),
    C("0.5.22", K.CHOICE_GONE, "--cuda-graph-backend-prefill=tc_piecewise", T.CHOICES_FROM_RELEASE,
      why="0.5.22 refuses it: --set refuses it on 0.5.22+ (the release offers its own choices)"),
)

__all__ = ["CHANGES"]
