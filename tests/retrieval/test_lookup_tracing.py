"""OpenTelemetry spans of a lookup: one per stage, under the lookup's span, when tracing is set up;
nothing at all (no provider, no OpenTelemetry import) when OTEL_EXPORTER_OTLP_ENDPOINT is unset."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from observability import tracing
from retrieval.lookup.clock import LOOKUP_SPAN
from retrieval.services import lookup_knowledge
from tests.conftest import REPO
from tests.support.lookup_stages import LOOKUP_STAGES

pytestmark = pytest.mark.django_db

STAGES = list(LOOKUP_STAGES)


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    tracing.tracing_configure(exporter)
    yield exporter
    tracing.tracing_reset()


def test_a_lookup_yields_one_span_per_stage_under_the_lookup_span(spans, seeded_corpus, session_id):
    outcome = lookup_knowledge(query="数据库连接池配置", session_id=session_id)
    assert outcome.body["found"] is True

    finished = spans.get_finished_spans()
    (lookup,) = [span for span in finished if span.name == LOOKUP_SPAN]
    stages = [span for span in finished if span.name != LOOKUP_SPAN]
    assert [span.name for span in sorted(stages, key=lambda span: span.start_time)] == STAGES
    assert {span.parent.span_id for span in stages} == {lookup.context.span_id}
    assert {span.context.trace_id for span in finished} == {lookup.context.trace_id}
    assert lookup.resource.attributes["service.name"] == "agentkb"


def test_a_stage_that_raises_ends_its_span_with_the_error(spans, seeded_corpus, session_id, monkeypatch):
    from retrieval.lookup import pipeline

    def broken(*args):
        raise RuntimeError("selection broke")

    monkeypatch.setattr(pipeline, "selection_make", broken)
    with pytest.raises(RuntimeError):
        lookup_knowledge(query="数据库连接池配置", session_id=session_id)
    failed = {span.name: span for span in spans.get_finished_spans()}
    assert not failed["selection"].status.is_ok and not failed[LOOKUP_SPAN].status.is_ok
    assert "content" not in failed


def test_without_an_endpoint_no_tracer_provider_is_set_up(settings, seeded_corpus, session_id):
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = ""
    tracing.tracing_reset()
    lookup_knowledge(query="数据库连接池配置", session_id=session_id)
    assert tracing.tracer_provider() is None
    from opentelemetry import trace

    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"  # the API's no-op


def test_with_an_endpoint_an_otlp_exporter_is_set_up(settings):
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = "http://127.0.0.1:23999"  # nothing listens: never reached
    tracing.tracing_reset()
    try:
        tracing.tracing_configure()  # what the first span of a process does
        provider = tracing.tracer_provider()
        assert provider is not None
        processors = provider._active_span_processor._span_processors
        (exporter,) = [processor.span_exporter for processor in processors]
        assert type(exporter).__name__ == "OTLPSpanExporter"
        assert exporter._endpoint == "http://127.0.0.1:23999/v1/traces"
    finally:
        settings.OTEL_EXPORTER_OTLP_ENDPOINT = ""
        tracing.tracing_reset()


def test_without_an_endpoint_neither_the_tracing_sdk_nor_an_exporter_is_imported():
    # Only agentkb's own part can be checked here: where OpenTelemetry is installed (the [tracing]
    # extra, and dev), redis-py imports its metrics API in every process by itself.
    script = textwrap.dedent(
        """
        import sys, django
        django.setup()
        from observability.tracing import span
        from retrieval.lookup.clock import StageClock
        clock = StageClock()
        with clock.lookup():
            clock.run("memory", lambda: None)
        loaded = sorted(
            name for name in sys.modules
            if name.startswith(("opentelemetry.sdk.trace", "opentelemetry.exporter"))
        )
        assert not loaded, loaded
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings_test"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
