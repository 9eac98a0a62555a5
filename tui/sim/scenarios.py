"""What `--scenario` can ask the simulated server to do; a module of its own so the CLI can offer the list
without importing the server."""

SCENARIOS = ("dflash-graph-crash", "oom-on-fast-restart", "stale-health", "hang-loading", "crash-while-serving",
             "log-burst")
