"""A batch never waits for a document another run holds: it indexes the others and hands that
one to a run of its own, which indexes it once the lock is free. The lock is held from another
thread (its own database connection: GET_LOCK on MariaDB, a file lock in the embedded mode), as a
second worker would hold it. Vectors are counted in Milvus against the chunk rows."""

from __future__ import annotations

import logging
import re
import threading
import time
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from config import file_locks
from config.env import VAR_DIR
from knowledge.models import ApiDocument, DocumentChunk
from knowledge.services import indexing
from knowledge.services.documents import document_ingest
from knowledge.services.index_queue import IndexQueue
from knowledge.services.indexing import DEFERRED, INDEXED, documents_index
from knowledge.services.locks import (
    DOCUMENT_LOCKS_FILE,
    SERVER_LOCK_NAME_MAX,
    LockTimeout,
    document_lock,
    documents_locked,
    server_lock_name,
)
from tests.knowledge.test_ingestion import chunk_ids, markdown

# Not a transactional test: what the batch queues on commit is captured and sent by the test once
# the lock is free (sent at once, the deferred document's own run would wait for the lock here).
pytestmark = pytest.mark.django_db


class HeldLock:
    """``document_lock`` taken by another thread until ``release``."""

    def __init__(self, document_id: int) -> None:
        self._taken, self._release = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, args=(document_id,), daemon=True)

    def _hold(self, document_id: int) -> None:
        try:
            with document_lock(document_id=document_id, timeout=5):
                self._taken.set()
                self._release.wait(60)
        finally:
            connection.close()  # this thread's own connection

    def __enter__(self) -> HeldLock:
        self._thread.start()
        assert self._taken.wait(30), "the other thread did not get the lock"
        return self

    def __exit__(self, *exc) -> None:
        self._release.set()
        self._thread.join(30)


def test_a_batch_indexes_the_others_and_defers_a_document_another_run_holds(
    vector_store, django_capture_on_commit_callbacks
):
    first, held, last = _three_documents()

    with HeldLock(held), django_capture_on_commit_callbacks(execute=False) as queued:
        outcome = documents_index(entries=[(first, False), (held, False), (last, False)], final_attempt=True)

    # The batch did not wait: the held document is deferred, untouched, the others indexed
    statuses = {i: r.status for i, r in outcome.results.items()}
    assert statuses == {first: INDEXED, held: DEFERRED, last: INDEXED}
    assert "being indexed by another run" in outcome.results[held].error
    held_doc = ApiDocument.objects.get(pk=held)
    assert (held_doc.status, held_doc.chunk_count, vector_store.count(doc_key=held_doc.doc_key)) == (
        ApiDocument.Status.PENDING,
        0,
        0,
    )
    # and a run of its own was queued for it (sent on commit; here, once the lock is free)
    assert queued, "nothing was queued for the deferred document"
    for send in queued:
        send()

    assert set(ApiDocument.objects.values_list("status", flat=True)) == {"INDEXED"}
    for document in ApiDocument.objects.all():
        assert vector_store.chunk_ids(doc_key=document.doc_key) == chunk_ids(document), document.doc_key
    assert vector_store.count() == DocumentChunk.objects.count()


def _three_documents() -> list[int]:
    return [
        document_ingest(
            data=markdown(f"Doc {i}", 2), name=f"doc-{i}.md", index_queue=IndexQueue()
        ).document.id
        for i in range(3)
    ]


def test_a_batch_tries_a_held_lock_once_and_does_not_wait_for_it(
    vector_store, monkeypatch, django_capture_on_commit_callbacks
):
    first, held, last = _three_documents()
    waits: list[float] = []
    monkeypatch.setattr(
        file_locks,  # the file lock's polling (the embedded default's document lock)
        "time",
        SimpleNamespace(monotonic=time.monotonic, sleep=lambda s: (waits.append(s), time.sleep(s))),
    )
    with (
        HeldLock(held),
        CaptureQueriesContext(connection) as queries,
        django_capture_on_commit_callbacks(execute=False),
    ):
        outcome = documents_index(entries=[(first, False), (held, False), (last, False)], final_attempt=True)

    assert outcome.results[held].status == DEFERRED
    if connection.vendor == "mysql":  # one query for the batch's locks, each with a timeout of 0 s
        asked = [q["sql"] for q in queries if "GET_LOCK" in q["sql"]]
        assert len(asked) == 1, asked
        calls = re.findall(r"GET_LOCK\('[^']*index-(\d+)',\s*(\d+)\)", asked[0])
        assert sorted(calls) == sorted((str(i), "0") for i in (first, held, last)), asked
    else:  # the file lock polls: not once
        assert waits == []


def test_the_embedded_defaults_document_locks_share_one_file_however_many_documents_are_indexed(
    vector_store, django_capture_on_commit_callbacks
):
    if connection.vendor == "mysql":
        pytest.skip("the embedded default's file locks")
    ids = _three_documents()
    with django_capture_on_commit_callbacks(execute=True):
        documents_index(entries=[(i, False) for i in ids], final_attempt=True)
        documents_index(entries=[(ids[0], True)], final_attempt=True)  # a run of one document
    assert [p.name for p in (VAR_DIR / "locks").glob("*documents*")] == [DOCUMENT_LOCKS_FILE]
    assert not list((VAR_DIR / "locks").glob("index-*"))


def test_a_document_lock_held_by_another_thread_blocks_that_document_only_and_frees_with_it():
    with HeldLock(5):
        with documents_locked(document_ids=[4, 5, 6]) as taken:
            assert taken == {4, 6}
        with (
            pytest.raises(LockTimeout, match="document 5 is being indexed"),
            document_lock(document_id=5, timeout=0.2),
        ):
            pass
    # The holder's block ended (its lock released): free for the next run
    with documents_locked(document_ids=[5]) as taken:
        assert taken == {5}
    with document_lock(document_id=5, timeout=0):
        pass


def test_a_failure_to_report_the_indexed_documents_does_not_fail_the_batch(
    vector_store, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    ids = _three_documents()

    def report_fails(*, document_ids):
        raise RuntimeError("the domain report broke")

    monkeypatch.setattr(indexing, "documents_indexed", report_fails)
    with caplog.at_level(logging.ERROR), django_capture_on_commit_callbacks(execute=True):
        outcome = documents_index(entries=[(i, False) for i in ids], final_attempt=True)

    # the documents are indexed and their vectors in; the report's failure is only logged
    assert {r.status for r in outcome.results.values()} == {INDEXED}
    assert set(ApiDocument.objects.values_list("status", flat=True)) == {"INDEXED"}
    assert vector_store.count() == DocumentChunk.objects.count()
    assert "the domain report broke" in caplog.text


@pytest.mark.skipif(connection.vendor != "mysql", reason="GET_LOCK names span a MySQL/MariaDB server")
def test_a_deployment_on_another_database_of_the_server_does_not_hold_this_ones_document_locks():
    """Two deployments (or a deployment and a test run) share a MariaDB server: the other's run of
    its own document 7 takes the server-wide lock of its database, not this database's."""
    import MySQLdb

    other_database = "test"  # the CI server's database; any name but this connection's own
    assert connection.settings_dict["NAME"] != other_database
    params = connection.get_connection_params()
    other = MySQLdb.connect(
        host=params.get("host", "127.0.0.1"),
        port=params.get("port", 3306),
        user=params.get("user", "root"),
        password=params.get("password", ""),
    )
    try:
        cursor = other.cursor()
        cursor.execute("SELECT GET_LOCK(%s, 0)", [server_lock_name("index-7", database=other_database)])
        assert cursor.fetchone() == (1,)
        with document_lock(document_id=7, timeout=0):  # free here: no LockTimeout
            pass
        # The same name in this database is the same lock: held there, busy here.
        cursor.execute(
            "SELECT GET_LOCK(%s, 0)",
            [server_lock_name("index-7", database=connection.settings_dict["NAME"])],
        )
        assert cursor.fetchone() == (1,)
        with pytest.raises(LockTimeout), document_lock(document_id=7, timeout=0):
            pass
    finally:
        other.close()  # releases both


def test_a_lock_name_stays_within_the_servers_limit_and_apart_for_every_database():
    long_a, long_b = "a" * 64, "a" * 63 + "b"
    names = {server_lock_name("index-123456789", database=d) for d in ("test", long_a, long_b)}
    assert len(names) == 3
    assert all(len(n) <= SERVER_LOCK_NAME_MAX and n.endswith("index-123456789") for n in names)
