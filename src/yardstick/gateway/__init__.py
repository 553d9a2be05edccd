"""The gateway: the HTTP application over every front door, and the composition of a running platform."""
