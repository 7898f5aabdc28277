"""The tantivy lexical index on its own: BM25 search with the domain filter, one writer across
processes, readers that see another process's commit within a second, and a writer killed
mid-write. Other processes are real ones (subprocesses on the same folder), as Celery workers and
web processes would be."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from knowledge.lexical import LexicalChunk, LexicalIndexError, analyse, query_tokens
from knowledge.lexical.tantivy_index import TantivyLexicalIndex
from tests.conftest import REPO


def chunk(doc_key: str, index: int, text: str, domain: str = "payment") -> LexicalChunk:
    return LexicalChunk(f"{doc_key}#{index}", doc_key, domain, index, tuple(analyse(text)), text)


@pytest.fixture
def index(tmp_path) -> TantivyLexicalIndex:
    return TantivyLexicalIndex(path=tmp_path / "lexical", lock_timeout=30)


def _run(script: str, *args: str, **kwargs) -> subprocess.Popen:
    """A Python process in the repository running ``script`` (the index folder and more as argv)."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


# --- search ------------------------------------------------------------------------------------
def test_search_ranks_by_bm25_and_returns_every_field_from_the_index(index):
    index.documents_replace(
        {
            "pay.md": [chunk("pay.md", 0, "支付超时时先查询订单状态"), chunk("pay.md", 1, "退款需要三天")],
            "api.md": [chunk("api.md", 0, "网关返回 ERR_QUOTA_EXCEEDED 时说明配额用完", domain="api")],
        }
    )

    hits = index.search(["支付", "超时"], top_k=5)
    assert [h.chunk_id for h in hits] == ["pay.md#0"]
    hit = hits[0]
    assert (hit.doc_key, hit.domain, hit.chunk_index, hit.text) == (
        "pay.md",
        "payment",
        0,
        "支付超时时先查询订单状态",
    )
    assert hit.score > 0
    # a full-width, upper-case identifier in the text is found by its folded form
    assert [h.chunk_id for h in index.search(["err_quota_exceeded"], top_k=5)] == ["api.md#0"]
    assert index.search([], top_k=5) == [] and index.search(["不存在的词"], top_k=5) == []


def test_the_domain_filter_reads_like_the_vector_filter_and_leaves_scores_alone(index):
    index.documents_replace(
        {
            "a.md": [chunk("a.md", 0, "订单 超时 重试", domain="payment")],
            "b.md": [chunk("b.md", 0, "订单 超时", domain="api")],
            "c.md": [chunk("c.md", 0, "订单 查询", domain="ops")],
        }
    )
    everything = {h.chunk_id: h.score for h in index.search(["订单", "超时"], top_k=10)}
    assert set(everything) == {"a.md#0", "b.md#0", "c.md#0"}

    one = index.search(["订单", "超时"], top_k=10, domain="api")
    assert [(h.chunk_id, h.score) for h in one] == [("b.md#0", everything["b.md#0"])]
    scope = index.search(["订单", "超时"], top_k=10, domain={"payment", "ops"})
    assert {h.chunk_id for h in scope} == {"a.md#0", "c.md#0"}
    assert index.search(["订单"], top_k=10, domain=set()) == []  # an empty scope matches nothing
    assert len(index.search(["订单"], top_k=10, domain="")) == 3  # "" = no filter, as in Milvus
    assert len(index.search(["订单"], top_k=2)) == 2


def test_the_doc_keys_filter_keeps_only_those_documents_with_their_scores(index):
    index.documents_replace(
        {
            "a.md": [chunk("a.md", 0, "订单 超时 重试", domain="payment")],
            "b.md": [chunk("b.md", 0, "订单 超时", domain="api")],
            "c.md": [chunk("c.md", 0, "订单 查询", domain="ops")],
        }
    )
    everything = {h.chunk_id: h.score for h in index.search(["订单", "超时"], top_k=10)}
    only = index.search(["订单", "超时"], top_k=10, doc_keys={"b.md", "c.md"})
    assert {h.chunk_id: h.score for h in only} == {k: everything[k] for k in ("b.md#0", "c.md#0")}
    both = index.search(["订单"], top_k=10, domain={"payment", "api"}, doc_keys={"b.md", "c.md"})
    assert [h.chunk_id for h in both] == ["b.md#0"]
    assert index.search(["订单"], top_k=10, doc_keys=set()) == []  # no document passes: nothing


def test_nothing_written_yet_is_an_empty_index_that_is_not_created_by_reading(index):
    assert index.search(["订单"], top_k=5) == [] and index.entries() == [] and index.count() == 0
    assert not index.path.exists()


def test_replace_swaps_a_documents_entries_and_long_keys_are_whole(index):
    # tantivy's "raw" tokenizer drops tokens over 255 bytes: a long Chinese path must still delete
    key = "运维/" + "非常长的文档路径" * 15 + ".md"
    assert len(key.encode()) > 255
    index.documents_replace({key: [chunk(key, i, f"旧版本 第{i}段") for i in range(3)]})
    index.documents_replace({key: [chunk(key, 0, "新版本 内容")]})

    assert index.chunk_ids(doc_key=key) == {f"{key}#0"}
    assert index.search(["旧版本"], top_k=5) == []
    assert index.count(doc_key=key) == 1
    index.documents_delete([key])
    assert index.count() == 0


def test_a_failed_write_commits_nothing(index):
    index.documents_replace({"a.md": [chunk("a.md", 0, "第一版")]})
    with pytest.raises(RuntimeError), index.writing() as write:
        write.replace("a.md", [chunk("a.md", 0, "第二版")])
        raise RuntimeError("the run failed before its commit")
    assert [h.text for h in index.search(["第一版"], top_k=5)] == ["第一版"]
    assert index.search(["第二版"], top_k=5) == []


# --- processes ---------------------------------------------------------------------------------
_WRITER = """
import sys
from knowledge.lexical import LexicalChunk
from knowledge.lexical.tantivy_index import TantivyLexicalIndex

path, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
index = TantivyLexicalIndex(path=path, lock_timeout=60)
for r in range(rounds):
    key = f"{name}/{r}.md"
    index.documents_replace(
        {key: [LexicalChunk(f"{key}#{i}", key, name, i, ("common", name, f"round{r}"), "") for i in range(5)]}
    )
print("done", flush=True)
"""


def test_two_processes_writing_at_once_take_turns_and_lose_nothing(index):
    index.documents_replace({"seed.md": [chunk("seed.md", 0, "种子")]})  # created before both start
    writers = [_run(_WRITER, str(index.path), name, "15") for name in ("alpha", "beta")]
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        assert out.strip() == "done"

    entries = index.entries()
    for name in ("alpha", "beta"):
        ids = {e.chunk_id for e in entries if e.domain == name}
        assert ids == {f"{name}/{r}.md#{i}" for r in range(15) for i in range(5)}
    assert len(index.search(["common"], top_k=1000)) == 150


_READER = """
import sys, time
from knowledge.lexical.tantivy_index import TantivyLexicalIndex

index = TantivyLexicalIndex(path=sys.argv[1])
assert index.search(["新词"], top_k=5) == []  # opened and searched before the commit
print("ready", flush=True)
committed = float(sys.stdin.readline())
while not index.search(["新词"], top_k=5):
    if time.time() - committed > 10:
        print("never", flush=True)
        sys.exit(1)
    time.sleep(0.01)
print(f"{time.time() - committed:.3f}", flush=True)
"""


def test_a_reader_in_another_process_sees_a_commit_within_a_second(index):
    index.documents_replace({"old.md": [chunk("old.md", 0, "旧的内容")]})
    reader = _run(_READER, str(index.path))
    try:
        assert reader.stdout.readline().strip() == "ready", reader.stderr.read()
        index.documents_replace({"new.md": [chunk("new.md", 0, "新词 出现了")]})
        reader.stdin.write(f"{time.time()}\n")
        reader.stdin.flush()
        out, err = reader.communicate(timeout=30)
    finally:
        if reader.poll() is None:
            reader.kill()
    assert reader.returncode == 0, err
    assert float(out.strip()) < 1.0


_CRASHING_WRITER = """
import sys
from knowledge.lexical import LexicalChunk
from knowledge.lexical.tantivy_index import TantivyLexicalIndex

index = TantivyLexicalIndex(path=sys.argv[1], heap_bytes=15_000_000)
with index.writing() as write:
    write.replace("doc.md", [])
    i = 0
    while True:  # killed in here: the commit never comes
        write.add([LexicalChunk(f"doc.md#{i}", "doc.md", "payment", i, ("半途", f"t{i}"), "半途")])
        i += 1
        if i == 2000:
            print("writing", flush=True)
"""


def test_a_writer_killed_mid_write_leaves_an_index_that_opens_answers_and_takes_the_next_write(tmp_path):
    path = tmp_path / "lexical"
    before = TantivyLexicalIndex(path=path)
    before.documents_replace({"doc.md": [chunk("doc.md", 0, "完整的 第一版")]})

    writer = _run(_CRASHING_WRITER, str(path))
    try:
        assert writer.stdout.readline().strip() == "writing", writer.stderr.read()
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(30)
    assert writer.returncode == -signal.SIGKILL

    # a process opening the index now finds the last commit, whole
    after = TantivyLexicalIndex(path=path, lock_timeout=10)
    assert after.chunk_ids() == {"doc.md#0"}
    assert [h.text for h in after.search(query_tokens("第一版"), top_k=5)] == ["完整的 第一版"]
    assert after.search(["半途"], top_k=5) == []
    # and the locks died with the writer: the next write goes through
    after.documents_replace({"doc.md": [chunk("doc.md", 0, "完整的 第二版"), chunk("doc.md", 1, "第二段")]})
    assert after.chunk_ids(doc_key="doc.md") == {"doc.md#0", "doc.md#1"}
    assert [h.chunk_id for h in before.search(query_tokens("第二版"), top_k=5)] == ["doc.md#0"]


def test_a_writer_that_stays_busy_makes_the_next_one_give_up_with_a_lexical_error(tmp_path):
    path = tmp_path / "lexical"
    holder = TantivyLexicalIndex(path=path)
    waiting = TantivyLexicalIndex(path=path, lock_timeout=0.3)
    with holder.writing() as write:
        write.add([chunk("a.md", 0, "内容")])
        with pytest.raises(LexicalIndexError, match="busy"):
            waiting.documents_replace({"b.md": [chunk("b.md", 0, "内容")]})
    assert waiting.chunk_ids() == {"a.md#0"}
