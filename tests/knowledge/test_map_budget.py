"""The planner's knowledge map within PLANNER_MAP_MAX_CHARS: every domain kept, each listing its
most useful documents and a count of the rest (2,000 documents); and the domain summary's
debounce capped by DOMAIN_SUMMARY_MAX_DELAY_SECONDS."""

from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge.map_budget import yaml_size
from knowledge.models import ApiDocument, KnowledgeDomain
from knowledge.selectors import knowledge_map_build, knowledge_map_yaml
from knowledge.services.domains import domain_documents_changed
from retrieval.selectors import planner_prompt_render

pytestmark = pytest.mark.django_db

DOMAINS = [f"domain-{d:02}" for d in range(8)]


def _corpus(per_domain: list[int]) -> None:
    now = timezone.now()
    rows = []
    for domain_id, count in zip(DOMAINS, per_domain, strict=False):
        KnowledgeDomain.objects.create(
            domain_id=domain_id,
            description=f"{domain_id} 的文档",
            when_to_retrieve=f"问题涉及 {domain_id} 时检索",
        )
        for i in range(count):
            covers = [f"{domain_id} 场景 {i} 超时排查", f"scenario {i} refund"][: 1 + (i % 7 == 0)]
            rows.append(
                ApiDocument(
                    doc_key=f"{domain_id}/doc-{i:05}.md",
                    title=f"{domain_id} 文档 {i:05} troubleshooting guide",
                    domain=domain_id,
                    content="x",
                    content_hash=f"{domain_id}-{i}",
                    status=ApiDocument.Status.INDEXED,
                    indexed_at=now,
                    chunk_count=1 + i % 5,
                    metadata={"covers": covers, "covers_source": "manual"},
                )
            )
    ApiDocument.objects.bulk_create(rows, batch_size=500)


def test_at_2000_documents_the_map_fits_its_budget_and_keeps_every_domain(settings):
    # Given 2,000 documents, most in one domain
    _corpus([1300, 300, 200, 100, 50, 30, 15, 5])
    unlimited = knowledge_map_build(max_chars=0)
    assert yaml_size(unlimited) > 150_000

    # When the map is built within the default budget
    settings.PLANNER_MAP_MAX_CHARS = 24_000
    fitted = knowledge_map_build()

    # Then it fits, every domain is there with its guidance, and what is not listed is counted
    assert len(knowledge_map_yaml(fitted)) <= 24_000
    domains = fitted["available_knowledge_domains"]
    assert [d["domain_id"] for d in domains] == DOMAINS
    for domain, total in zip(domains, [1300, 300, 200, 100, 50, 30, 15, 5], strict=True):
        assert domain["when_to_retrieve"] == f"问题涉及 {domain['domain_id']} 时检索"
        assert len(domain["documents"]) + domain.get("more_documents", 0) == total
        assert domain["documents"], domain["domain_id"]  # no domain crowded out
    # the small domains are listed whole; the big one lists its best documents first: those
    # whose covers name two scenarios (every seventh)
    assert "more_documents" not in domains[-1]
    biggest = domains[0]["documents"]
    assert all(len(d["covers"]) == 2 for d in biggest)
    # and the prompt carries the fitted map
    assert len(planner_prompt_render()) < 24_000 + 5_000


def test_a_map_under_the_budget_is_unchanged(settings):
    _corpus([3, 2])
    settings.PLANNER_MAP_MAX_CHARS = 24_000
    assert knowledge_map_build() == knowledge_map_build(max_chars=0)
    assert "more_documents" not in knowledge_map_yaml()


def test_a_budget_smaller_than_the_domains_shortens_guidance_but_drops_no_domain():
    _corpus([20] * 8)
    KnowledgeDomain.objects.update(when_to_retrieve="很长的检索指引。" * 200)
    fitted = knowledge_map_build(max_chars=3_000)
    assert len(knowledge_map_yaml(fitted)) <= 3_000
    assert [d["domain_id"] for d in fitted["available_knowledge_domains"]] == DOMAINS
    assert all(d["more_documents"] + len(d["documents"]) == 20 for d in fitted["available_knowledge_domains"])


def test_steady_changes_cannot_postpone_the_summary_past_the_maximum_delay(
    settings, django_capture_on_commit_callbacks, monkeypatch
):
    settings.DOMAIN_SUMMARY_DEBOUNCE_SECONDS = 10
    settings.DOMAIN_SUMMARY_MAX_DELAY_SECONDS = 60
    sent: list[float] = []
    from knowledge.tasks import domains as tasks

    monkeypatch.setattr(
        tasks.domain_summary_regenerate_task, "apply_async", lambda args, countdown=0: sent.append(countdown)
    )
    start = timezone.now()
    # Given a change every 5 seconds for two minutes (each would push a plain debounce on)
    for step in range(24):
        monkeypatch.setattr(timezone, "now", lambda step=step: start + timedelta(seconds=5 * step))
        with django_capture_on_commit_callbacks(execute=True):
            domain_documents_changed(domain_id="payment")
    # Then every queued run is due at most 60 s after the first change waiting for it
    due = [5 * step + countdown for step, countdown in enumerate(sent)]
    assert sent[0] == 10 and sorted(due) == due  # a later change never makes the run earlier...
    assert due[10] == 60  # ...but the one queued at 50 s runs at 60 s, not 10 s after each change
    # and past the maximum delay a change queues its run for now
    assert all(countdown == 0 for step, countdown in enumerate(sent) if 5 * step >= 60)
