"""Modal screens of the console: confirmation, flags, help, deployment picker."""
