"""Pure functions and recorded fixtures: the reducer, parsers, presets against their releases, sweep plans; no
process, no Textual."""
