"""Django's MySQL/MariaDB backend with a circuit breaker on connecting (``DATABASES`` names it
when ``DATABASE_URL`` is MySQL; ``config/settings/database.py``).

A hung server costs each new connection its whole ``DATABASE_CONNECT_TIMEOUT``: with four web
workers every request would wait that long before its 503. Once a connection attempt (or the
health check of a kept connection) fails for want of an answer, the breaker opens: for
``DEPENDENCY_BREAKER_SECONDS`` new connections fail at once with the same error class, which the
API answers as its JSON 503 naming the database (``config.outages``). Then one attempt goes
through again; a server that answers closes the breaker. Errors of a query itself (a deadlock, a
constraint) are the request's, not the server's, and leave the breaker alone.
"""

from __future__ import annotations

from django.conf import settings
from django.db.backends.mysql import base as mysql

from config.breaker import CircuitBreaker, CircuitOpen, shared_breaker

Database = mysql.Database

# MySQL client errors that mean the server did not answer (CR_CONNECTION_ERROR,
# CR_CONN_HOST_ERROR, CR_SERVER_GONE_ERROR, CR_SERVER_LOST, CR_SERVER_LOST_EXTENDED).
SERVER_NOT_ANSWERING = frozenset({2002, 2003, 2006, 2013, 2055})


def database_breaker(params: dict) -> CircuitBreaker:
    """This process's one breaker for the server ``params`` (connection parameters) name: every
    thread's connection to it shares it."""
    where = params.get("unix_socket") or f"{params.get('host', 'localhost')}:{params.get('port', 3306)}"
    return shared_breaker(f"database {where}", "the database", cooldown=settings.DEPENDENCY_BREAKER_SECONDS)


def _not_answering(exc: Exception) -> bool:
    return bool(exc.args) and exc.args[0] in SERVER_NOT_ANSWERING


class DatabaseWrapper(mysql.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        breaker = database_breaker(conn_params)
        try:
            breaker.check()
        except CircuitOpen as exc:
            # The driver's class, so Django wraps it as it wraps a real connection failure.
            raise Database.OperationalError(2003, f"not attempted: {exc}") from None
        try:
            connection = super().get_new_connection(conn_params)
        except Database.OperationalError as exc:
            if _not_answering(exc):
                breaker.failed(exc)
            raise
        breaker.succeeded()
        return connection

    def is_usable(self):
        # A kept connection is checked before reuse (CONN_HEALTH_CHECKS): while the breaker is
        # open it is not pinged (the ping would wait the read timeout); it is dropped, and the new
        # connection that replaces it fails at once above.
        breaker = database_breaker(self.get_connection_params())
        if breaker.is_open:
            return False
        try:
            self.connection.ping()
        except Database.Error as exc:
            if _not_answering(exc):
                breaker.failed(exc)
            return False
        return True
