"""The `yardstick` command."""
