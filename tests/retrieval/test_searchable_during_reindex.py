"""A document being re-indexed keeps answering at its previous version, and answers at the new
one once the swap committed (L0, the L1 candidate filter and the corpus signature all read
"has an indexed version", knowledge.selectors.documents_searchable)."""

import threading

import pytest
from django.db import connection

from knowledge.models import ApiDocument
from knowledge.services import indexing
from knowledge.services.documents import document_ingest
from knowledge.services.indexing import document_index
from retrieval.services import lookup_knowledge
from tests.conftest import SERVICES_MODE
from tests.support import documents as files

OLD_WORDS = "旧版流程：先联系渠道经理 old-channel-manager。"
NEW_WORDS = "新版流程：自动对账 new-auto-reconcile。"


def _lookup(session_id: str, n: int) -> dict:
    return lookup_knowledge(query="ERR_PAY_TIMEOUT 怎么处理", session_id=f"{session_id}-{n}").body


def _versions(body: dict) -> tuple[bool, bool]:
    content = (body["primary"] or {}).get("content", "")
    return "old-channel-manager" in content, "new-auto-reconcile" in content


@pytest.mark.django_db(transaction=False)  # on-commit callbacks captured, not run
def test_a_re_uploaded_document_answers_at_its_previous_version_until_the_swap(
    vector_store, session_id, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        document_ingest(data=files.pdf_bytes(pages=1, words=OLD_WORDS), name="pay/guide.pdf", domain="pay")
    assert _versions(_lookup(session_id, 0)) == (True, False)

    with django_capture_on_commit_callbacks(execute=False) as queued:
        document_ingest(data=files.pdf_bytes(pages=2, words=NEW_WORDS), name="pay/guide.pdf", domain="pay")
    assert ApiDocument.objects.get(doc_key="pay/guide.pdf").status == ApiDocument.Status.PENDING

    during = _lookup(session_id, 1)
    assert during["found"] is True and during["primary"]["docKey"] == "pay/guide.pdf"
    assert _versions(during) == (True, False)

    with django_capture_on_commit_callbacks(execute=True):
        for callback in queued:  # the indexing task (eager) and the domain hook
            callback()

    after = _lookup(session_id, 2)
    assert ApiDocument.objects.get(doc_key="pay/guide.pdf").status == ApiDocument.Status.INDEXED
    assert _versions(after) == (False, True)
    assert after["primary"]["pages"] in ("1", "1-2")


@pytest.mark.django_db(transaction=False)
def test_lookups_at_every_step_of_a_re_index_find_the_document(
    vector_store, session_id, django_capture_on_commit_callbacks, monkeypatch
):
    with django_capture_on_commit_callbacks(execute=True):
        document_ingest(data=files.pdf_bytes(pages=1, words=OLD_WORDS), name="pay/guide.pdf", domain="pay")
    with django_capture_on_commit_callbacks(execute=False):
        document_ingest(data=files.pdf_bytes(pages=3, words=NEW_WORDS), name="pay/guide.pdf", domain="pay")
    document = ApiDocument.objects.get(doc_key="pay/guide.pdf")

    seen: list[tuple[str, str, bool, tuple[bool, bool]]] = []

    def look(step: str) -> None:
        status = ApiDocument.objects.values_list("status", flat=True).get(pk=document.pk)
        body = _lookup(session_id, len(seen))
        seen.append((step, status, body["found"], _versions(body)))

    # Lookups run while the run converts the new PDF and while it embeds its chunks
    prepare = indexing.document_version_prepare

    armed = []

    def prepare_and_look(**kwargs):
        look("converting")
        armed.append(True)  # from here on, the next encode is the run's
        return prepare(**kwargs)

    monkeypatch.setattr(indexing, "document_version_prepare", prepare_and_look)
    embedder = indexing.get_embedder()
    encode = embedder.encode

    looking = []

    def encode_and_look(texts, **kwargs):
        if armed and not looking:  # lookups embed their query with the same model: look once
            looking.append(True)
            look("embedding")
        return encode(texts, **kwargs)

    monkeypatch.setattr(embedder, "encode", encode_and_look)
    with django_capture_on_commit_callbacks(execute=True):
        document_index(document_id=document.pk)
    monkeypatch.undo()
    look("committed")

    assert seen == [
        ("converting", "INDEXING", True, (True, False)),
        ("embedding", "INDEXING", True, (True, False)),
        ("committed", "INDEXED", True, (False, True)),
    ]


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_lookups_from_another_thread_while_the_worker_re_indexes_always_find_it(vector_store, session_id):
    """The same with real concurrency (MariaDB: in-memory SQLite locks whole tables)."""
    if not SERVICES_MODE:
        pytest.skip("needs the service-backed database")
    document_ingest(data=files.pdf_bytes(pages=1, words=OLD_WORDS), name="pay/guide.pdf", domain="pay")
    document = ApiDocument.objects.get(doc_key="pay/guide.pdf")
    errors: list[BaseException] = []
    # The re-upload's own indexing runs eagerly at its commit: start it in a thread.

    def reupload() -> None:
        try:
            document_ingest(
                data=files.pdf_bytes(pages=8, words=NEW_WORDS), name="pay/guide.pdf", domain="pay"
            )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=reupload)
    worker.start()
    seen = []
    while worker.is_alive() or not seen:
        status = ApiDocument.objects.values_list("status", flat=True).get(pk=document.pk)
        body = _lookup(session_id, len(seen))
        seen.append((status, body["found"], (body["primary"] or {}).get("docKey")))
    worker.join()
    assert not errors
    assert all(found and key == "pay/guide.pdf" for _, found, key in seen), seen
    assert any(status != ApiDocument.Status.INDEXED for status, _, _ in seen), seen
    assert _versions(_lookup(session_id, len(seen))) == (False, True)
