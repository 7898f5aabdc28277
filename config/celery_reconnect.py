"""The worker survives its Redis broker restarting (a guard around Celery 5.7.0's reconnect).

When the broker connection is lost, Celery 5.7.0's consumer first releases the connection's
resources (``collect``), then closes it. With the Redis transport, closing gives back the
messages the worker held unacknowledged (a task due later, prefetched ones), which needs a
client the release has just dropped: ``AttributeError: 'NoneType' object has no attribute
'hostname'``. Celery calls the close through ``ignore_errors``, which ignores only connection
errors, so the worker ended ("Unrecoverable error") on every Redis restart while it held such a
message (reproduced by ``tests/knowledge/test_broker_restart.py``).

Here the close of a connection already lost ignores that error too, and the consumer goes on to
reconnect as it does when nothing is held. The messages it could not give back stay in Redis's
unacknowledged set and are delivered again after ``CELERY_BROKER_VISIBILITY_TIMEOUT`` (or were
lost with a Redis that keeps nothing on disk; an indexing task's document is then queued again
by the sweep: ``knowledge.services.index_lease``).
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def _close_quietly(connection) -> None:
    close = connection.close

    def close_lost_connection() -> None:
        try:
            close()
        except AttributeError as exc:
            logger.warning("closing the lost broker connection failed (%s); reconnecting anyway", exc)

    # An attribute of this one connection object, which the consumer drops right after.
    connection.close = close_lost_connection


def guard_consumer_reconnect() -> None:
    """Wrap the consumer's handling of a lost connection (idempotent)."""
    from celery.worker.consumer.consumer import Consumer

    original = Consumer.on_connection_error_after_connected
    if getattr(original, "_agentkb_guarded", False):
        return

    def on_connection_error_after_connected(self, exc):
        if self.connection is not None:
            _close_quietly(self.connection)
        return original(self, exc)

    on_connection_error_after_connected._agentkb_guarded = True  # type: ignore[attr-defined]
    Consumer.on_connection_error_after_connected = on_connection_error_after_connected
