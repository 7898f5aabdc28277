"""A bulk ingest reports each changed domain once, not once per file: the domain row is locked,
its document count recomputed and its debounced summary task queued once for the upload and once
for the indexing batch, however many of the files it holds. A single upload still reports at
once. Embedded mode: eager tasks, the real embedder and milvus-lite."""

from __future__ import annotations

import pytest

from knowledge.models import ApiDocument, KnowledgeDomain
from knowledge.services.documents import document_ingest
from knowledge.services.uploads import documents_upload

pytestmark = pytest.mark.django_db(transaction=True)


def _file(name: str, domain: str) -> tuple[str, bytes]:
    # covers and when_to_retrieve given: no summary fill task stands between indexing and the
    # domain's report, so every report counted below is the ingest's own.
    text = (
        f"---\ndomain: {domain}\ncovers: [{name}]\nwhen_to_retrieve: 问到{name}时\n---\n"
        f"# {name}\n\n支付超时时先查询订单状态，再决定是否重试。{name}\n"
    )
    return name, text.encode()


def _domain(domain_id: str) -> KnowledgeDomain:
    return KnowledgeDomain.objects.get(domain_id=domain_id)


def test_a_bulk_upload_reports_each_domain_once_for_the_upload_and_once_for_its_indexing(vector_store):
    files = [_file(f"pay-{i}.md", "payment") for i in range(6)] + [
        _file(f"ops-{i}.md", "ops") for i in range(4)
    ]
    files.append(("broken.md", b"---\ndomain: refused\ncovers: [unterminated\n---\n# x\n"))

    results = documents_upload(files=files)

    assert [r.outcome for r in results] == ["added"] * 10 + ["failed"]
    assert set(ApiDocument.objects.values_list("status", flat=True)) == {"INDEXED"}
    payment, ops = _domain("payment"), _domain("ops")
    assert (payment.document_count, ops.document_count) == (6, 4)
    # one change for the stored files, one for the indexing batch (per file: 12 and 8)
    assert (payment.change_seq, ops.change_seq) == (2, 2)
    # the summary task queued for the last change ran (eager): the domain is summarised
    assert payment.summary_state == KnowledgeDomain.SummaryState.OK and payment.dirty_since is None
    # a refused file reports nothing: its domain was never created
    assert not KnowledgeDomain.objects.filter(domain_id="refused").exists()


def test_a_file_moved_to_another_domain_in_a_bulk_upload_updates_both_counts(vector_store):
    document_ingest(data=_file("moving.md", "payment")[1], name="moving.md")
    assert _domain("payment").document_count == 1

    documents_upload(files=[_file("moving.md", "ops"), _file("staying.md", "payment")])

    assert (_domain("payment").document_count, _domain("ops").document_count) == (1, 1)
    assert ApiDocument.objects.get(doc_key="moving.md").domain == "ops"


def test_a_single_upload_reports_its_domain_at_once(vector_store):
    document_ingest(data=_file("one.md", "payment")[1], name="one.md")
    document_ingest(data=_file("two.md", "payment")[1], name="two.md")

    # each upload and each indexing run reports: two changes per file
    assert (_domain("payment").document_count, _domain("payment").change_seq) == (2, 4)
