"""The platform: the gateway (HTTP front doors), plan resolution, quotas, workers and their queue."""
