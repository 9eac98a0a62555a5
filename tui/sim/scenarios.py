"""What `--scenario` can ask the simulated server to do; a module of its own so the CLI can offer the list
without importing the server."""

#: each scenario and what it shows, for `bringup demo --help`
DESCRIPTIONS = {
    "dflash-graph-crash": "DFLASH with CUDA graphs crashes in warmup; the hint fixes it",
    "oom-on-fast-restart": "GPU memory outlives the process: a restart that does not wait OOMs",
    "stale-health": "the old process still answers /v1/models after a restart",
    "hang-loading": "loading stops making progress: STALLED, not READY or FAILED",
    "crash-while-serving": "ready, then a scheduler exception kills it while it serves",
    "log-burst": "20,000 log lines a second for 10 s after ready",
}
SCENARIOS = tuple(DESCRIPTIONS)
