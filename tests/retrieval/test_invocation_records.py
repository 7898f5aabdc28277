"""FS-6: every lookup_knowledge call writes one tool_invocation row the seeds' SQL can read."""

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test.utils import CaptureQueriesContext

from observability.models import ToolInvocation
from observability.services import invocation_record
from retrieval.services import lookup_knowledge
from tests.conftest import SERVICES_MODE

# The seeds' levels on the seed corpus (see the seeds_rules fixture).
pytestmark = pytest.mark.usefixtures("seeds_rules")

DETAIL_KEYS = {
    "l0_titles",
    "l0_match_count",
    "l1_scores",
    "l1_top_score",
    "l1_top_similarity",
    "relevance_level",
    "completeness_hint",
    "retrieved_domains",
    "dedup_reason",
    "returned_doc_keys",
    "withheld_doc_keys",
    "embedding_model",
    "timings",
    "l1_candidates",
    "returned_domains",
}

# seed 000 section 8, verbatim.
SQL_RELEVANCE = """SELECT relevance_level, COUNT(*) AS cnt
FROM tool_invocation
WHERE tool_name = 'lookup_knowledge'
GROUP BY relevance_level;"""
SQL_DEDUP = """SELECT dedup_reason, COUNT(*) AS cnt
FROM tool_invocation
WHERE tool_name = 'lookup_knowledge'
GROUP BY dedup_reason;"""
SQL_SIMILARITY = """SELECT
    JSON_EXTRACT(retrieval_details, '$.l1_top_similarity') AS similarity,
    COUNT(*) AS cnt
FROM tool_invocation
WHERE tool_name = 'lookup_knowledge'
  AND retrieval_details IS NOT NULL
GROUP BY similarity
ORDER BY similarity;"""


def _column(name) -> tuple[str, bool]:
    """(declared type, nullable) of a tool_invocation column, read from the database itself."""
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute(
                "SELECT COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'tool_invocation' AND COLUMN_NAME = %s",
                [name],
            )
            column_type, nullable = cursor.fetchone()
            return column_type.lower(), nullable == "YES"
        cursor.execute("PRAGMA table_xinfo(tool_invocation)")
        row = next(r for r in cursor.fetchall() if r[1] == name)
        return row[2].lower(), not row[3]


@pytest.mark.django_db
def test_fs6_the_v010_migration_is_applied():
    applied = MigrationRecorder(connection).applied_migrations()
    assert ("observability", "0002_v010_relevance_level_dedup_reason") in applied


@pytest.mark.django_db
def test_fs6_relevance_level_is_a_nullable_varchar_20():
    assert _column("relevance_level") == ("varchar(20)", True)


@pytest.mark.django_db
def test_fs6_dedup_reason_is_a_nullable_varchar_32():
    assert _column("dedup_reason") == ("varchar(32)", True)


@pytest.mark.django_db
def test_fs6_every_call_records_level_dedup_reason_and_details(seeded_corpus, session_id):
    first = lookup_knowledge(query="数据库连接池配置", session_id=session_id)
    again = lookup_knowledge(query="数据库连接池配置", session_id=session_id)
    row = ToolInvocation.objects.get(pk=first.invocation_id)
    assert row.tool_name == "lookup_knowledge" and row.session_id == session_id
    assert row.status == "SUCCESS" and row.duration_ms >= 0
    assert row.relevance_level == "HIGHLY_RELEVANT" and row.dedup_reason is None
    assert row.request["query"] == "数据库连接池配置" and row.request["session_id"] == session_id
    assert "infrastructure/mysql-pool.md" in row.result_summary
    assert set(row.retrieval_details) >= DETAIL_KEYS
    details = row.retrieval_details
    assert details["l1_top_similarity"] == pytest.approx(1 - details["l1_top_score"] / 2, abs=1e-4)
    assert details["l1_scores"][0] == details["l1_top_score"]
    assert details["retrieved_domains"] == ["infrastructure"]
    assert details["returned_domains"] == ["infrastructure"]
    assert set(details["timings"]) >= {"embed_ms", "search_ms", "total_ms"}
    deduped = ToolInvocation.objects.get(pk=again.invocation_id)
    assert (deduped.relevance_level, deduped.dedup_reason) == ("DEDUPED", "doc_retrieved")
    assert deduped.retrieval_details["withheld_doc_keys"] == ["infrastructure/mysql-pool.md"]


@pytest.mark.django_db
def test_fs6_not_found_and_bad_input_are_recorded_too(seeded_corpus, session_id):
    not_found = lookup_knowledge(query="今天天气怎么样", session_id=session_id)
    row = ToolInvocation.objects.get(pk=not_found.invocation_id)
    assert row.status == "SUCCESS" and row.relevance_level is None and row.dedup_reason is None
    with pytest.raises(Exception) as excinfo:
        lookup_knowledge(query="  ", session_id=session_id)
    failed = ToolInvocation.objects.get(pk=excinfo.value.invocation_id)
    assert failed.status == "ERROR" and "query" in failed.error
    assert failed.relevance_level is None


@pytest.mark.django_db
def test_recording_is_one_insert(seeded_corpus, session_id):
    lookup_knowledge(query="数据库连接池配置", session_id=session_id)  # warm the index
    with CaptureQueriesContext(connection) as queries:
        lookup_knowledge(query="HikariCP 参数", session_id=session_id)
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("INSERT")]
    assert len(inserts) == 1 and "tool_invocation" in inserts[0]
    assert not [q for q in queries.captured_queries if "SAVEPOINT" in q["sql"].upper()]


@pytest.mark.django_db
def test_an_unknown_status_is_refused():
    with pytest.raises(ValueError, match="status"):
        invocation_record(tool_name="x", session_id="s", request={}, status="FINE", duration_ms=1)


@pytest.mark.django_db(transaction=True)
def test_fs6_the_seeds_three_sql_queries_run_unchanged(seeded_corpus, session_id, settings):
    """On MariaDB in the service-backed run (and on SQLite, whose JSON_EXTRACT takes the same form)."""
    if SERVICES_MODE:
        assert connection.vendor == "mysql"
    # A history row from before V010: NULL level, NULL reason, no details.
    ToolInvocation.objects.create(session_id="old", tool_name="lookup_knowledge", retrieval_details=None)
    lookup_knowledge(query="数据库连接池配置", session_id=session_id)  # HIGHLY_RELEVANT
    lookup_knowledge(query="数据库连接池配置", session_id=session_id)  # DEDUPED doc_retrieved
    lookup_knowledge(query="ERR_TIMEOUT", session_id=session_id)  # PRECISE
    lookup_knowledge(query="故障排查", session_id=session_id)  # REFERENCE
    lookup_knowledge(query="今天天气怎么样", session_id=session_id)  # not found
    settings.RETRIEVAL_DOMAIN_DEDUP = "hard"
    lookup_knowledge(query="HikariCP 参数", session_id=session_id)  # DEDUPED domain_retrieved

    with connection.cursor() as cursor:
        cursor.execute(SQL_RELEVANCE)
        relevance = dict(cursor.fetchall())
        cursor.execute(SQL_DEDUP)
        dedup = dict(cursor.fetchall())
        cursor.execute(SQL_SIMILARITY)
        similarity = cursor.fetchall()
    assert relevance == {None: 2, "HIGHLY_RELEVANT": 1, "DEDUPED": 2, "PRECISE": 1, "REFERENCE": 1}
    assert dedup == {None: 5, "doc_retrieved": 1, "domain_retrieved": 1}
    values = [(float(v) if v is not None else None, n) for v, n in similarity]
    assert sum(n for _, n in values) == 6  # the history row has no details
    # Both "数据库连接池配置" calls share one similarity; every value is a normalised one.
    stored = sorted(
        r.retrieval_details["l1_top_similarity"]
        for r in ToolInvocation.objects.exclude(retrieval_details=None)
    )
    assert sorted(v for v, n in values for _ in range(n)) == pytest.approx(stored)
    assert all(0 <= v <= 1 for v, _ in values)
