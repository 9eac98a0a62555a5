"""The project's own machinery: configuration files, the CI test-host script, import layering, the preset registry."""
