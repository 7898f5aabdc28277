"""Which dependency an uncaught exception says is down, so an API answers 503 naming it.

During a database or Redis outage a request under ``/api/``, ``/mcp/`` or Dify's endpoint fails
with the driver's exception, which Django turns into a 500 (and, before the JSON middleware
rewrote it, an HTML page). An outage is no bug of the request: the caller should retry, so
``config.middleware`` answers 503 with ``Retry-After`` and the part named. The exception is
learnt from Django's ``got_request_exception`` signal, which is sent for an exception raised by a
view and by any middleware alike.
"""

from __future__ import annotations

import sys

from django.core.signals import got_request_exception
from django.db import InterfaceError, OperationalError

# The attribute of the request the part is kept in between the signal and the response.
_ATTRIBUTE = "_agentkb_outage"
RETRY_AFTER_SECONDS = 5


def outage_part(exc: BaseException | None) -> str | None:
    """``database``, ``redis`` or ``broker`` when ``exc`` says that dependency does not answer."""
    if isinstance(exc, OperationalError | InterfaceError):
        return "database"
    try:
        import redis
    except ImportError:  # Redis is optional in the embedded setup
        redis = None  # type: ignore[assignment]
    if redis is not None and isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return "redis"
    from kombu.exceptions import OperationalError as BrokerError

    if isinstance(exc, BrokerError):
        return "broker"
    return None


def _remember(sender: object, request: object = None, **kwargs: object) -> None:
    if request is not None:
        setattr(request, _ATTRIBUTE, outage_part(sys.exc_info()[1]))


def request_outage(request: object) -> str | None:
    """The part whose outage failed this request, if one did."""
    return getattr(request, _ATTRIBUTE, None)


got_request_exception.connect(_remember, dispatch_uid="agentkb-outages")
