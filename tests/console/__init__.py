"""The Textual console and its screens through Pilot, on fixed states or the simulated server; the SVG snapshots."""
