"""OpenTelemetry spans of a lookup and its stages, sent over OTLP/HTTP when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (docs/operations.md, "Metrics and traces").

Without the setting there is nothing: OpenTelemetry is not imported, no provider or exporter is
made, and a span is a shared no-op context manager. With it, the first span of a process builds
this process's own tracer provider (after gunicorn's fork, so each worker has its exporter
thread) with a batching OTLP/HTTP exporter; the exporter reads the standard ``OTEL_EXPORTER_OTLP_*``
variables itself (headers, timeout, ``/v1/traces`` appended to the endpoint) and the resource
``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (service name ``agentkb`` when unset). The
provider is agentkb's, not the global one: nothing else in the process is traced by it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from contextlib import AbstractContextManager
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

_NO_SPAN: AbstractContextManager[Any] = contextlib.nullcontext()
_lock = threading.Lock()
_resolved = False
_provider: Any = None
_tracer: Any = None


def tracer_provider() -> Any:
    """This process's tracer provider, or None when tracing is off (or not yet resolved)."""
    return _provider


def tracing_configure(exporter: Any = None) -> None:
    """Set up the provider now: with ``exporter`` (tests: the SDK's in-memory exporter, exported
    as each span ends), else from the settings (nothing when no endpoint is set)."""
    with _lock:
        _configure(exporter)


def tracing_reset() -> None:
    """Forget the provider (flushed and shut down); the next span reads the settings again."""
    global _resolved
    with _lock:
        _shutdown()
        _resolved = False


def span(name: str) -> AbstractContextManager[Any]:
    """A span named ``name`` under the current one (an exception raised inside it is recorded
    on it), or a no-op when tracing is off."""
    if not _resolved:
        with _lock:
            if not _resolved:
                _configure(None)
    tracer = _tracer
    if tracer is None:
        return _NO_SPAN
    return tracer.start_as_current_span(name)


def _configure(exporter: Any) -> None:
    # Under _lock.
    global _resolved, _provider, _tracer
    _shutdown()
    if exporter is None and not settings.OTEL_EXPORTER_OTLP_ENDPOINT:
        _resolved = True
        return
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "agentkb"}
    provider = TracerProvider(resource=Resource.create(attributes))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # As the standard variable means it: the base URL, the signal's path appended. Passed
        # explicitly because the setting may come from .env or a test's override.
        endpoint = settings.OTEL_EXPORTER_OTLP_ENDPOINT.rstrip("/") + "/v1/traces"
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        logger.info("tracing lookups to %s", endpoint)
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    _provider, _tracer, _resolved = provider, provider.get_tracer("agentkb.lookup"), True


def _shutdown() -> None:
    global _provider, _tracer
    if _provider is not None:
        _provider.shutdown()
    _provider = _tracer = None
