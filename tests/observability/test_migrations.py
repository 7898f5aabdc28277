"""The migration history mirrors the original service: initial schema, V009, V010."""

import pytest
from django.core.management import call_command
from django.db import connection


def _columns(table: str) -> set[str]:
    with connection.cursor() as cursor:
        return {c.name for c in connection.introspection.get_table_description(cursor, table)}


def _tables() -> set[str]:
    return set(connection.introspection.table_names())


@pytest.mark.django_db(transaction=True)
def test_sqlmigrate_v010_shows_exactly_the_two_columns():
    from io import StringIO

    out = StringIO()
    call_command("sqlmigrate", "observability", "0002", stdout=out)
    statements = [line for line in out.getvalue().splitlines() if line.strip() and not line.startswith("--")]
    body = [s for s in statements if s.upper() not in {"BEGIN;", "COMMIT;"}]
    assert len(body) == 2, body
    assert "relevance_level" in body[0] and "varchar(20)" in body[0].lower() and "NULL" in body[0]
    assert "dedup_reason" in body[1] and "varchar(32)" in body[1].lower() and "NULL" in body[1]
    assert "NOT NULL" not in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_migrations_run_backwards_and_forwards():
    assert {"api_document", "knowledge_domain", "tool_invocation"} <= _tables()
    assert {"relevance_level", "dedup_reason"} <= _columns("tool_invocation")
    try:
        # Back to before V010: the two columns go, the table stays.
        call_command("migrate", "observability", "0001", verbosity=0)
        assert "tool_invocation" in _tables()
        assert not {"relevance_level", "dedup_reason"} & _columns("tool_invocation")
        # Back to before V009: knowledge_domain goes, api_document stays.
        call_command("migrate", "observability", "zero", verbosity=0)
        call_command("migrate", "knowledge", "0001", verbosity=0)
        assert "knowledge_domain" not in _tables()
        assert "api_document" in _tables()
    finally:
        call_command("migrate", verbosity=0)
    assert {"api_document", "knowledge_domain", "tool_invocation", "document_chunk"} <= _tables()
    assert {"relevance_level", "dedup_reason"} <= _columns("tool_invocation")


# knowledge 0004 adds agentkb's regeneration bookkeeping beside the V009 columns.
KNOWLEDGE_DOMAIN_ADDITIONS = {
    "summary_source",
    "summary_state",
    "last_regenerated_at",
    "last_error",
    "change_seq",
    "dirty_since",
    "lock_token",
    "locked_until",
}


@pytest.mark.django_db
def test_v009_knowledge_domain_columns():
    assert _columns("knowledge_domain") - KNOWLEDGE_DOMAIN_ADDITIONS == {
        "id",
        "domain_id",
        "description",
        "when_to_retrieve",
        "document_count",
        "updated_at",
        "created_at",
    }


@pytest.mark.django_db(transaction=True)
def test_rollups_built_before_the_agent_dimension_are_dropped_and_rebuilt_by_agent(django_user_model):
    """0008 adds the agent to the daily rollups: days rolled up without it are dropped (their
    sessions were counted across agents), then rebuilt with it; running it again is harmless."""
    from datetime import date, datetime, timedelta

    from django.db.migrations.executor import MigrationExecutor
    from django.utils import timezone

    from observability import rollups
    from observability.models import InvocationDailyRollup, InvocationRollupDay, ToolInvocation

    day = date(2026, 3, 9)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate([("observability", "0007_invocation_agent_public_id")])
        old = executor.loader.project_state([("observability", "0007_invocation_agent_public_id")]).apps
        old.get_model("observability", "InvocationRollupDay").objects.create(
            day=day, time_zone=timezone.get_current_timezone_name(), invocations=2
        )
        old.get_model("observability", "InvocationDailyRollup").objects.create(
            day=day, kind="level", tool_name="lookup_knowledge", calls=2
        )
        executor = MigrationExecutor(connection)
        executor.migrate([("observability", "0008_rollup_agent")])
        assert InvocationDailyRollup.objects.count() == 0 and InvocationRollupDay.objects.count() == 0
        # Backwards and forwards again: still consistent, nothing left half-built.
        MigrationExecutor(connection).migrate([("observability", "0007_invocation_agent_public_id")])
        MigrationExecutor(connection).migrate([("observability", "0008_rollup_agent")])
    finally:
        call_command("migrate", verbosity=0)
    agent = django_user_model.objects.create(username="after-migration")
    start = datetime.combine(day, datetime.min.time()).replace(tzinfo=timezone.get_current_timezone())
    for i, who in enumerate([agent, agent, None]):
        ToolInvocation.objects.create(
            tool_name="lookup_knowledge",
            session_id="conv-42",
            agent=who,
            request={"query": "q"},
            created_at=start + timedelta(hours=i + 1),
        )
    assert rollups.rollups_ensure([day]) == {day}
    sessions = InvocationDailyRollup.objects.filter(day=day, kind="sessions", tool_name="", primary_domain="")
    assert sorted(sessions.values_list("agent_id", "value", "calls"), key=str) == sorted(
        [(agent.pk, 2, 1), (None, 1, 1)], key=str
    )
