"""The guarded places: each guarantee bringup makes about what crosses its edge lives in one module here, and every
path goes through it (issue 47). A guarantee kept at the sites where it was first needed is missing from the next
site someone writes; one kept here is checked by a test that fails when a new path goes around it.

- `files`: every file bringup writes and every directory it makes (no link followed, private modes, a directory
  another user can write refused). `tests/infra/test_guarded_writes.py` walks the source for any other write.
"""
