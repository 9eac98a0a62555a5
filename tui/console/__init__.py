"""The Textual console, in parts: the read-only console (viewer), its keys (keys), the full console with the
actions that change the deployment (control), and running it as a program (run). `tui.app` re-exports them."""
