"""Point the action memory, the cache and the throttle at another Redis (a closed port, a hung
peer) for one test, with the production clients' short timeouts; the machine's Redis keeps
running for everything else."""


def redis_point_at(settings, url: str, *, timeout: float) -> None:
    settings.REDIS_URL = url
    settings.RETRIEVAL_TRACKER_BACKEND = "redis"
    settings.CACHES = {
        "default": {
            **settings.CACHES["default"],
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": url,
            "OPTIONS": {
                "SOCKET_CONNECT_TIMEOUT": timeout,
                "SOCKET_TIMEOUT": timeout,
                "IGNORE_EXCEPTIONS": True,
            },
        }
    }
