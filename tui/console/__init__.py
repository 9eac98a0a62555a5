"""The Textual console, in parts: the read-only console app (viewer), its screen with the panels and their keys
(screen), the full console with the actions that change the deployment (control), the overview's data (overview),
the sweeps it finds (sweeps), the keymap check (keys), the one Textual message the engine's updates arrive as
(messages), and running it as a program (run)."""
