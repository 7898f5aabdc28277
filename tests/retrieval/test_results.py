"""What the agent reads of the documents a lookup returns, and the message that goes with them.

The items are built from real ApiDocument / DocumentChunk rows in the database (as ingestion
stores them); the message from a real Selection, in English so the assertions read plainly.
"""

from __future__ import annotations

import hashlib

import pytest

from knowledge.models import ApiDocument, DocumentChunk
from retrieval.lookup.normalisation import RelevanceLevel
from retrieval.lookup.ranking import Candidate, Selection
from retrieval.lookup.results import DocumentRow, message_build, result_items_build


def _document(
    doc_key: str, chunks: list[str], *, title: str = "", domain: str = "api", pages=None, content=None
):
    """An ApiDocument whose content is its chunks joined (unless given), one DocumentChunk row per
    chunk; its DocumentRow as the lookup reads it (content_len is the content's length)."""
    content = "\n\n".join(chunks) if content is None else content
    document = ApiDocument.objects.create(
        doc_key=doc_key,
        title=title or doc_key.upper(),
        domain=domain,
        content=content,
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
        status=ApiDocument.Status.INDEXED,
        chunk_count=len(chunks),
    )
    DocumentChunk.objects.bulk_create(
        DocumentChunk(
            document=document,
            chunk_index=i,
            heading_path=f"{document.title} > part {i}",
            content=text,
            pages=(pages or {}).get(i, ""),
        )
        for i, text in enumerate(chunks)
    )
    return DocumentRow(document.id, doc_key, document.title, domain, len(content))


def _items(returned: list[Candidate], rows: list[DocumentRow], max_chars: int) -> list[dict]:
    return result_items_build(
        returned=returned, documents={r.doc_key: r for r in rows}, content_max_chars=max_chars
    ).items


def _l1(doc_key: str, chunk_index: int | None) -> Candidate:
    return Candidate(doc_key, "api", "", chunk_index=chunk_index, similarity=0.8)


def _l0(doc_key: str, terms: list[str], chunk_index: int | None = None) -> Candidate:
    return Candidate(doc_key, "api", "", l0_terms=terms, chunk_index=chunk_index)


pytestmark = pytest.mark.django_db


# --- the items ------------------------------------------------------------------------------------
def test_nothing_returned_builds_no_item():
    assert _items([], [], 100) == []


def test_a_primary_that_fits_carries_its_whole_document():
    row = _document("a.md", ["first part", "second part", "third part"], title="Alpha")
    (item,) = _items([_l1("a.md", 1)], [row], max_chars=row.content_len)
    assert item == {
        "title": "Alpha",
        "domain": "api",
        "docKey": "a.md",
        "headingPath": "Alpha > part 1",
        "content": "first part\n\nsecond part\n\nthird part",
    }


def test_a_primary_too_long_carries_the_chunks_around_the_matched_one_in_document_order():
    chunks = ["c0" * 5, "c1" * 5, "c2" * 5, "c3" * 5, "c4" * 5]  # 10 characters each
    row = _document("a.md", chunks)
    # Room for three chunks and the two separators: the matched chunk 2, then 1 and 3 (nearest
    # first, the lower index on a tie), shown in document order.
    (item,) = _items([_l1("a.md", 2)], [row], max_chars=34)
    assert item["content"] == "\n\n".join(chunks[1:4])[:34]
    assert item["headingPath"] == "A.MD > part 2"


def test_the_window_takes_the_earlier_of_two_equally_near_chunks_and_fills_to_the_limit_exactly():
    chunks = ["c0" * 5, "c1" * 5, "c2" * 5, "c3" * 5]  # 10 characters each
    row = _document("a.md", chunks)
    # 20 characters: the matched chunk and one more fit exactly (the separator is cut off the end).
    (item,) = _items([_l1("a.md", 2)], [row], max_chars=20)
    assert item["content"] == ("c1" * 5 + "\n\n" + "c2" * 5)[:20]


def test_the_window_leaves_out_a_chunk_one_character_too_long():
    row = _document("a.md", ["x" * 11, "matched 10"])  # 10 + 11 characters: one over a limit of 20
    (item,) = _items([_l1("a.md", 1)], [row], max_chars=20)
    assert item["content"] == "matched 10"


def test_a_primary_up_to_the_limit_long_is_sent_whole_as_stored_not_as_chunks():
    # The stored document (its source Markdown) is not its chunks joined: the heading line.
    row = _document("a.md", ["first part", "second part"], content="# Alpha\nfirst part\nsecond part")
    (item,) = _items([_l1("a.md", 0)], [row], max_chars=row.content_len)
    assert item["content"] == "# Alpha\nfirst part\nsecond part"
    (item,) = _items([_l1("a.md", 0)], [row], max_chars=row.content_len + 100)
    assert item["content"] == "# Alpha\nfirst part\nsecond part"


def test_an_l0_document_prefers_l1_s_chunk_among_many_holding_the_keyword():
    primary = _document("p.md", ["primary"])
    chunks = [f"part {i}" + (" ERR_QUOTA" if i in (280, 299) else "") for i in range(300)]
    doc = _document("k.md", chunks)
    items = _items([_l1("p.md", 0), _l0("k.md", ["err_quota"], chunk_index=299)], [primary, doc], 1000)
    assert items[1]["content"] == "part 299 ERR_QUOTA"
    assert items[1]["headingPath"] == "K.MD > part 299"


def test_the_window_skips_a_chunk_that_does_not_fit_and_takes_a_smaller_farther_one():
    row = _document("a.md", ["far small", "x" * 50, "matched chunk", "y" * 50])
    (item,) = _items([_l1("a.md", 2)], [row], max_chars=30)
    assert item["content"] == "far small\n\nmatched chunk"


def test_the_window_is_cut_at_the_limit_when_the_matched_chunk_alone_is_longer():
    row = _document("a.md", ["z" * 40, "matched " * 10])
    (item,) = _items([_l1("a.md", 1)], [row], max_chars=20)
    assert item["content"] == ("matched " * 10)[:20]


def test_a_supplement_carries_its_matched_chunk_cut_at_the_limit():
    primary = _document("p.md", ["primary"])
    other = _document("s.md", ["unrelated", "the supplement's matched chunk", "more"])
    items = _items([_l1("p.md", 0), _l1("s.md", 1)], [primary, other], max_chars=20)
    assert items[1]["content"] == "the supplement's matched chunk"[:20]
    assert items[1]["headingPath"] == "S.MD > part 1"
    assert [i["docKey"] for i in items] == ["p.md", "s.md"]


def test_the_first_returned_document_is_the_one_sent_whole():
    primary = _document("p.md", ["primary text"], content="# P\nprimary text")
    other = _document("s.md", ["a supplement far longer than the limit allows"])
    items = _items([_l1("p.md", 0), _l1("s.md", 0)], [primary, other], max_chars=20)
    assert items[0]["content"] == "# P\nprimary text"
    assert items[1]["content"] == "a supplement far lon"


def test_a_supplement_that_fits_still_carries_only_its_chunk():
    primary = _document("p.md", ["primary"])
    other = _document("s.md", ["one", "two"])
    items = _items([_l1("p.md", 0), _l1("s.md", 0)], [primary, other], max_chars=1000)
    assert items[1]["content"] == "one"


def test_an_l0_document_shows_a_chunk_holding_a_matched_keyword():
    primary = _document("p.md", ["primary"])
    doc = _document("k.md", ["intro", "no keyword here", "set ERR_QUOTA here", "ERR_QUOTA again"])
    # Matched terms are normalised (casefolded): the chunk's text is compared normalised too.
    items = _items([_l1("p.md", 0), _l0("k.md", ["err_quota"], chunk_index=1)], [primary, doc], 1000)
    assert items[1]["content"] == "set ERR_QUOTA here"  # L1's chunk 1 lacks it: the first holding it


def test_an_l0_document_shows_the_first_chunk_holding_the_keyword_not_the_next_after_l1_s():
    primary = _document("p.md", ["primary"])
    doc = _document("k.md", ["ERR_QUOTA early", "intro", "L1's chunk", "ERR_QUOTA late"])
    items = _items([_l1("p.md", 0), _l0("k.md", ["err_quota"], chunk_index=2)], [primary, doc], 1000)
    assert items[1]["content"] == "ERR_QUOTA early"


def test_an_l0_document_shows_l1_s_chunk_when_it_holds_the_keyword():
    primary = _document("p.md", ["primary"])
    doc = _document("k.md", ["ERR_QUOTA first", "intro", "ERR_QUOTA best"])
    items = _items([_l1("p.md", 0), _l0("k.md", ["err_quota"], chunk_index=2)], [primary, doc], 1000)
    assert items[1]["content"] == "ERR_QUOTA best"


def test_an_l0_document_without_the_keyword_in_its_chunks_shows_l1_s_chunk_or_the_first():
    primary = _document("p.md", ["primary"])
    titled = _document("t.md", ["zero", "one", "two"])  # matched on its title only
    items = _items([_l1("p.md", 0), _l0("t.md", ["title word"], chunk_index=1)], [primary, titled], 1000)
    assert items[1]["content"] == "one"
    items = _items([_l1("p.md", 0), _l0("t.md", ["title word"])], [primary, titled], 1000)
    assert items[1]["content"] == "zero"


def test_an_l1_candidate_whose_chunk_is_gone_shows_nothing_rather_than_another_chunk():
    primary = _document("p.md", ["primary"])
    other = _document("s.md", ["zero", "one"])
    items = _items([_l1("p.md", 0), _l1("s.md", 9)], [primary, other], 1000)
    assert (items[1]["content"], items[1]["headingPath"]) == ("", "")


def test_a_primary_without_chunks_carries_no_content_when_too_long_to_send_whole():
    document = ApiDocument.objects.create(
        doc_key="bare.md", title="Bare", domain="api", content="x" * 50, content_hash="h", chunk_count=0
    )
    row = DocumentRow(document.id, "bare.md", "Bare", "api", 50)
    (item,) = _items([_l1("bare.md", 0)], [row], max_chars=10)
    assert (item["content"], item["headingPath"]) == ("", "")
    assert "pages" not in item


def test_the_pages_a_chunk_comes_from_are_shown_as_a_citation_and_omitted_when_unknown():
    primary = _document("deck.pdf", ["slide one", "slide two"], pages={1: "2-3"})
    other = _document("notes.md", ["plain"])
    items = _items([_l1("deck.pdf", 1), _l1("notes.md", 0)], [primary, other], 1000)
    assert items[0]["pages"] == "2-3"
    assert "pages" not in items[1]


def test_each_returned_document_reads_only_its_own_chunks():
    a = _document("a.md", ["a0", "a1"])
    b = _document("b.md", ["b0", "b1"])
    c = _document("c.md", ["c0", "c1"])
    items = _items([_l1("a.md", 1), _l1("b.md", 1), _l1("c.md", 0)], [a, b, c], max_chars=2)
    assert [i["content"] for i in items] == ["a1", "b1", "c0"]


# --- the message ----------------------------------------------------------------------------------
def _candidate(doc_key: str, domain: str = "api", title: str | None = None) -> Candidate:
    return Candidate(doc_key, domain, doc_key.upper() if title is None else title)


def _message(selection: Selection, **kwargs) -> str:
    defaults = {
        "domains_before": [],
        "held_in_blocked_domain": [],
        "domain_dedup": "soft",
        "degraded": False,
        "language": "en",
    }
    return message_build(selection=selection, **(defaults | kwargs))


def _found(returned, withheld=(), level=RelevanceLevel.REFERENCE) -> Selection:
    return Selection(list(returned), list(withheld), None, level, "doc_retrieved" if withheld else None)


def test_a_found_message_names_the_count_the_primary_and_its_domain():
    message = _message(_found([_candidate("a.md", "ops", "Pool")]))
    assert message == 'Found 1 document(s); primary result "Pool" (domain: ops).'


def test_a_found_message_counts_the_supplements_and_names_a_title_less_primary_by_key():
    message = _message(_found([_candidate("a.md", title=""), _candidate("b.md"), _candidate("c.md")]))
    assert message == 'Found 3 document(s); primary result "a.md" (domain: api), plus 2 supplement(s).'


def test_a_found_message_with_one_supplement_counts_it():
    message = _message(_found([_candidate("a.md"), _candidate("b.md")]))
    assert message == 'Found 2 document(s); primary result "A.MD" (domain: api), plus 1 supplement(s).'


def test_a_found_message_names_what_was_withheld():
    message = _message(_found([_candidate("a.md")], withheld=[_candidate("b.md"), _candidate("c.md")]))
    assert message.endswith(
        'Left out documents this session already has: "B.MD", "C.MD"; use the earlier results.'
    )


def test_soft_dedup_points_out_only_returned_domains_the_session_searched_before():
    selection = _found([_candidate("a.md", "ops"), _candidate("b.md", "api"), _candidate("c.md", "ops")])
    message = _message(selection, domains_before=["ops", "payment"])
    assert "the domain(s) 'ops' were already retrieved" in message
    assert "'api'" not in message and "payment" not in message
    assert "already retrieved" not in _message(selection, domains_before=["ops"], domain_dedup="off")
    assert "already retrieved" not in _message(selection, domains_before=["elsewhere"])


@pytest.mark.parametrize("configured", ["soft", " Soft ", "SOFT"])
def test_soft_dedup_as_configured_points_out_a_repeated_domain(settings, configured):
    from retrieval.lookup.pipeline import domain_dedup_mode

    settings.RETRIEVAL_DOMAIN_DEDUP = configured
    message = _message(
        _found([_candidate("a.md", "ops")]), domains_before=["ops"], domain_dedup=domain_dedup_mode()
    )
    assert "the domain(s) 'ops' were already retrieved" in message


def test_not_found_says_so():
    message = _message(Selection([], [], None, None, None))
    assert message == "The knowledge base has no document related to this query."


def test_all_deduped_names_the_documents_and_their_domains_once():
    withheld = [_candidate("a.md", "ops"), _candidate("b.md", "api"), _candidate("c.md", "ops")]
    message = _message(Selection([], withheld, None, RelevanceLevel.DEDUPED, "doc_retrieved"))
    assert message.startswith(
        'Every document related to this query was already fetched in this session: "A.MD", "B.MD", "C.MD" '
        "(domains: ops, api)."
    )


def test_a_hard_block_names_the_domain_and_what_the_session_holds_there_at_most_five():
    selection = Selection([], [], "ops", RelevanceLevel.DEDUPED, "domain_retrieved")
    held = [f"d{i}.md" for i in range(7)]
    message = _message(selection, held_in_blocked_domain=held)
    assert message.startswith(
        "This session already retrieved the domain 'ops' (already fetched: d0.md, d1.md, d2.md, d3.md, d4.md)"
    )
    fallback = _message(selection, held_in_blocked_domain=[])
    assert "(already fetched: related documents)" in fallback


def test_a_vector_outage_is_named_and_wins_over_the_general_degraded_note():
    selection = _found([_candidate("a.md")])
    down = _message(selection, degraded=True, vector_search_down=True)
    assert down.endswith(
        "semantic search (the vector store) is down, so these results come from keyword "
        "matching only and may be incomplete.)"
    )
    assert "these results may be incomplete.)" not in down
    degraded = _message(selection, degraded=True)
    assert degraded.endswith(" (Part of the search is unavailable; these results may be incomplete.)")
    assert "(Part of" not in _message(selection)


def test_the_message_follows_the_agent_s_language():
    message = _message(_found([_candidate("a.md", "ops", "连接池")]), language="zh")
    assert message == "找到 1 篇文档，主结果《连接池》（域：ops）。"
