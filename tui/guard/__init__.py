"""The guarded places: each guarantee bringup makes about what crosses its edge lives in one module here, and every
path goes through it (issue 47). A guarantee kept at the sites where it was first needed is missing from the next
site someone writes; one kept here is checked by a test that fails when a new path goes around it.

- `files`: every file bringup writes and every directory it makes (no link followed, private modes, a directory
  another user can write refused). `tests/infra/test_guarded_writes.py` walks the source for any other write.
- `text`: the one line splitter for text from outside (a server's log, live or read back, a command's output, a
  file): "\r\n", "\r", "\n" only, never `str.splitlines()`. `tests/infra/test_one_line_splitter.py` fails on any
  `.splitlines(` elsewhere.
- `numbers`: the one parser of a number from outside (a server's line, a file bringup wrote, a config, a plan):
  finite, in range, never a bool or quoted text; the config's and the plan's number types call it.
  `tests/infra/test_config_numbers.py` fails on a config or plan number field of another type.
- `redact` (with `secret_names`, the name rule): the one redactor of every output. A book of the secret values the
  process knows and `scrub`, installed on the CLI's stdout/stderr, applied to a server's lines as they enter the
  engine, the console's notifications and command line, the exporter's labels and every record's command line.
  `tests/e2e/test_secret_canary.py` runs every command with canary secrets and fails on any that gets out.
"""
