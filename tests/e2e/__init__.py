"""Real processes: the CLI, the simulated server, the systemd test host over SSH, containers, tmux, a browser."""
