"""Database backends of the project's own: Django's, with a circuit breaker in front."""
