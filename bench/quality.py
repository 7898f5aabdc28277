"""Retrieval quality: labelled questions through the real lookup, beside a plain BM25 retriever.

For each data set the benchmark builds a throw-away agentkb in a temporary folder (SQLite,
embedded milvus-lite, Celery tasks run eagerly, in-process action memory), ingests the data set's
documents through the real ingestion path (``document_ingest``: parse, chunk, embed, store), then
asks every question with ``retrieval.services.lookup_knowledge(..., dry_run=True)`` and a fresh
session id, in this process. The systems, in the same run, on the same index:

- ``agentkb``: the lookup as configured;
- ``dense``: the lookup with ``RETRIEVAL_L1_MODE=dense`` (dense-only L1, the behaviour before the
  hybrid search); when that setting does not exist the configured lookup already is dense-only
  and the run says so instead of repeating it;
- ``bm25``: a plain retriever: jieba tokens, BM25 (bm25s) over each document's title and text,
  always answering its top document.

Data sets:

- ``cmrc``: the CMRC 2018 trial split (``--cmrc PATH``; by default found as
  ``shared/data/cmrc2018/cmrc2018_trial.json`` beside the repository or a folder above it; CC BY-SA
  4.0, read from there, never copied into the repository). Each paragraph is one document; 10% of
  the paragraphs (seeded) are held out of the index, so their questions are unanswerable.
- ``demo``: ``bench/data/demo_questions.jsonl`` over ``knowledge/demo_corpus`` (paraphrases,
  English, cross-lingual, exact error codes, and questions no document answers).

``--subset dev|test`` keeps one seeded half of each data set's questions (tune on one, confirm on
the other); ``all`` keeps both.

Figures, per system (answerable = the expected document is in the index):

- hit@1: answerable questions whose returned primary is the expected document (not found = miss);
- recall@5 / MRR@5: the expected document among the first five of the system's ranking (for the
  lookup: what it returned, then the candidates it weighed and did not return, in its order);
- found: answerable questions answered at all; not-found: unanswerable questions answered
  ``found: false``;
- precision per level: of the answers at that level, the share whose primary is the expected
  document (an unanswerable question answered at a level counts against that level);
- p50 / p95: milliseconds per question, as this process saw them.

    .venv/bin/python bench/quality.py                         # the level model's cross table
    .venv/bin/python bench/quality.py --pooled                # fitted on both sets at once
    .venv/bin/python bench/quality.py --draws 11,12,13        # a fit on each of three held-out draws
    .venv/bin/python bench/quality.py --dataset all           # CMRC and demo, all systems
    .venv/bin/python bench/quality.py --dataset demo --systems agentkb,bm25
    .venv/bin/python bench/quality.py --dataset cmrc --subset dev --limit 200 --json var/q.json
    .venv/bin/python bench/quality.py --dataset demo --url http://127.0.0.1:8000 --token TOKEN

``--url``/``--token`` ask a running agentkb over HTTP instead (it must hold the data set's
documents: the demo corpus is what ``make run`` loads; ``--write-corpus DIR`` writes a data set's
documents as files for ``manage.py import_documents DIR``). Over HTTP the lookup records each call
like an agent's and shows no similarities. Nothing is asserted: the figures are printed. Without
``--dataset`` the run fits and reports the level model instead (``bench/levels_fit.py``).
"""

from __future__ import annotations

import argparse
import atexit
import http.client
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEMO_CORPUS = REPO / "knowledge" / "demo_corpus"
DEMO_QUESTIONS = REPO / "bench" / "data" / "demo_questions.jsonl"
CMRC_RELATIVE = Path("shared") / "data" / "cmrc2018" / "cmrc2018_trial.json"
CMRC_DOMAIN = "cmrc2018"
DRCD_RELATIVE = Path("shared") / "data" / "drcd" / "DRCD_dev.json"
LEVELS = ("PRECISE", "HIGHLY_RELEVANT", "REFERENCE")
SYSTEMS = ("agentkb", "dense", "bm25")
DATASETS = ("cmrc", "drcd", "demo")
RANK_DEPTH = 5


# --- data ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Document:
    doc_key: str
    title: str
    text: str  # the body, as ingested
    data: bytes  # the file the ingestion path receives


@dataclass(frozen=True)
class Question:
    qid: str
    query: str
    expected: str | None  # doc key, or None: nothing in the index answers it
    kind: str = ""
    #: the article the question was asked of (``--pooled`` keeps an article's questions together)
    group: str = ""


@dataclass
class Dataset:
    name: str
    documents: list[Document]
    questions: list[Question]
    notes: list[str] = field(default_factory=list)


def cmrc_default_path(relative: Path = CMRC_RELATIVE) -> Path:
    """``shared/data/cmrc2018/cmrc2018_trial.json`` (or ``relative``) beside the repository or a
    folder above it (the main checkout and worktrees sit at different depths)."""
    for folder in REPO.parents:
        candidate = folder / relative
        if candidate.exists():
            return candidate
    return REPO.parent / relative


def _markdown(*, title: str, domain: str, body: str, extra: dict[str, str]) -> bytes:
    front = [f"title: {json.dumps(title, ensure_ascii=False)}", f"domain: {domain}"]
    front += [f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in extra.items()]
    return ("---\n" + "\n".join(front) + "\n---\n\n" + body.strip() + "\n").encode()


#: Where each SQuAD-format set comes from and its licence, kept with every document made from it.
SOURCES = {
    "cmrc": ("CMRC 2018 trial set, github.com/ymcui/cmrc2018", "CC BY-SA 4.0"),
    "drcd": ("DRCD dev set, github.com/DRCKnowledgeTeam/DRCD", "CC BY-SA 3.0"),
}


def cmrc_dataset(
    path: Path, *, seed: int, holdout: float, name: str = "cmrc", domain: str = CMRC_DOMAIN
) -> Dataset:
    """Paragraphs as documents; ``holdout`` of them (seeded) left out of the index, their questions
    then expect nothing. A title shared by several paragraphs gets the paragraph's number."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    paragraphs = []  # (paragraph id, title, context, qas, article id)
    for article in raw["data"]:
        many = len(article["paragraphs"]) > 1
        article_id = str(article.get("id", article["title"]))
        for n, paragraph in enumerate(article["paragraphs"], start=1):
            title = f"{article['title']}（第 {n} 段）" if many else article["title"]
            pid = paragraph.get("id") or f"{article_id}-{n}"
            paragraphs.append((pid, title, paragraph["context"], paragraph["qas"], article_id))
    titles = [p[1] for p in paragraphs]
    if len(set(titles)) != len(titles):
        raise ValueError(f"{path}: two paragraphs share a title even with their numbers")
    order = sorted(p[0] for p in paragraphs)
    random.Random(seed).shuffle(order)
    held_out = set(order[: round(len(order) * holdout)])
    documents, questions, blank = [], [], 0
    for pid, title, context, qas, article_id in paragraphs:
        doc_key = f"{domain}/{pid}.md"
        if pid not in held_out:
            data = _markdown(
                title=title,
                domain=domain,
                body=context,
                extra={"source": SOURCES[name][0], "licence": SOURCES[name][1]},
            )
            documents.append(Document(doc_key, title, context, data))
        for qa in qas:
            if not qa["question"].strip():  # the trial split has two empty questions
                blank += 1
                continue
            questions.append(
                Question(
                    qid=qa["id"],
                    query=qa["question"],
                    expected=None if pid in held_out else doc_key,
                    kind="held-out" if pid in held_out else "answerable",
                    group=article_id,
                )
            )
    return Dataset(
        name,
        documents,
        questions,
        notes=[
            f"{Path(path).name}: {len(paragraphs)} paragraphs, {len(held_out)} held out "
            f"(seed {seed}), {len(questions)} questions"
            + (f"; {blank} empty questions skipped" if blank else "")
            + f" ({SOURCES[name][1]})"
        ],
    )


def demo_dataset(*, questions_path: Path = DEMO_QUESTIONS, corpus: Path = DEMO_CORPUS) -> Dataset:
    """The demo corpus's documents, parsed by the ingestion path's own parser, and the labelled set."""
    from knowledge.parsing import parse_document

    documents = []
    for file in sorted(p for p in corpus.rglob("*.md") if p.is_file()):
        name = file.relative_to(corpus).as_posix()
        data = file.read_bytes()
        parsed = parse_document(data, name=name, domain=name.split("/")[0])
        documents.append(Document(parsed.doc_key, parsed.title, parsed.body, data))
    keys = {d.doc_key for d in documents}
    questions = []
    for n, line in enumerate(questions_path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        expected = row.get("expected")
        if expected is not None and expected not in keys:
            raise ValueError(f"{questions_path}:{n}: expected '{expected}' is not a demo document")
        questions.append(Question(row.get("id") or f"demo-{n}", row["query"], expected, row.get("kind", "")))
    return Dataset(
        "demo", documents, questions, notes=[f"{len(documents)} documents, {len(questions)} questions"]
    )


def subset_questions(questions: list[Question], subset: str, *, seed: int) -> list[Question]:
    """One seeded half (dev / test) of the questions, or all of them, in their original order."""
    if subset == "all":
        return list(questions)
    ids = sorted(q.qid for q in questions)
    random.Random(seed).shuffle(ids)
    half = set(ids[: len(ids) // 2]) if subset == "dev" else set(ids[len(ids) // 2 :])
    return [q for q in questions if q.qid in half]


# --- one answer and the figures --------------------------------------------------------------------
@dataclass
class Answer:
    qid: str
    query: str
    expected: str | None
    primary: str | None  # the returned primary's doc key; None = not found
    level: str | None
    ranked: list[str]  # the system's ranking of documents, best first
    ms: float
    similarity: float | None = None  # the primary's best similarity (or the top one when not found)
    kind: str = ""
    #: the lookup's L1 candidates as its retrieval details list them (doc key, similarity, key-term
    #: coverage, L1 level): in the --json output, to see why a question was missed
    candidates: list[dict] = field(default_factory=list)


def _share(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-q * len(ordered) // 100)))
    return ordered[int(rank) - 1]


def reciprocal_rank(ranked: list[str], expected: str, depth: int = RANK_DEPTH) -> float:
    for position, key in enumerate(ranked[:depth], start=1):
        if key == expected:
            return 1.0 / position
    return 0.0


def quality_metrics(answers: Iterable[Answer]) -> dict:
    """The figures of one system on one data set (see the module docstring)."""
    answers = list(answers)
    answerable = [a for a in answers if a.expected is not None]
    unanswerable = [a for a in answers if a.expected is None]
    levels = {}
    for level in LEVELS:
        at = [a for a in answers if a.primary is not None and a.level == level]
        right = sum(1 for a in at if a.primary == a.expected)
        levels[level] = {"answers": len(at), "right": right, "precision": _share(right, len(at))}
    found = [a for a in answers if a.primary is not None]
    ms = [a.ms for a in answers]
    return {
        "questions": len(answers),
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "hit@1": _share(sum(1 for a in answerable if a.primary == a.expected), len(answerable)),
        "recall@5": _share(
            sum(1 for a in answerable if a.expected in a.ranked[:RANK_DEPTH]), len(answerable)
        ),
        "mrr@5": (
            round(sum(reciprocal_rank(a.ranked, a.expected) for a in answerable) / len(answerable), 4)
            if answerable
            else None
        ),
        "found": _share(sum(1 for a in answerable if a.primary is not None), len(answerable)),
        "not_found": _share(sum(1 for a in unanswerable if a.primary is None), len(unanswerable)),
        "answer_precision": _share(sum(1 for a in found if a.primary == a.expected), len(found)),
        # answerable questions whose document the system ranked first yet did not return
        "withheld_first": _share(
            sum(1 for a in answerable if a.primary is None and a.ranked[:1] == [a.expected]), len(answerable)
        ),
        "levels": levels,
        "p50_ms": None if not ms else round(percentile(ms, 50), 1),
        "p95_ms": None if not ms else round(percentile(ms, 95), 1),
        "by_kind": _by_kind(answers),
    }


def _by_kind(answers: list[Answer]) -> dict:
    """Per kind of question: how many, and the share answered right (the expected document as
    primary; for a question expecting nothing, found: false)."""
    kinds: dict[str, list[Answer]] = {}
    for a in answers:
        kinds.setdefault(a.kind or "-", []).append(a)
    return {
        kind: {
            "questions": len(group),
            "right": _share(sum(1 for a in group if a.primary == a.expected), len(group)),
        }
        for kind, group in sorted(kinds.items())
    }


# --- the systems -----------------------------------------------------------------------------------
def ranked_from_lookup(body: dict, details: dict | None) -> list[str]:
    """The lookup's ranking: what it returned (primary, supplements), then the candidates it weighed
    and did not return, in the order the retrieval details list them."""
    keys = []
    if body.get("primary"):
        keys.append(body["primary"]["docKey"])
    keys += [item["docKey"] for item in body.get("supplement") or []]
    from observability.records import L0_DOC_KEYS, L1_CANDIDATES, WITHHELD_DOC_KEYS

    details = details or {}
    keys += list(details.get(WITHHELD_DOC_KEYS) or [])
    keys += [c["doc_key"] for c in details.get(L1_CANDIDATES) or [] if c.get("indexed", True)]
    keys += list(details.get(L0_DOC_KEYS) or [])
    return list(dict.fromkeys(keys))


def similarity_from_details(details: dict | None, doc_key: str | None) -> float | None:
    """The best similarity of ``doc_key``'s chunks, else the lookup's top similarity."""
    from observability.records import L1_CANDIDATES, L1_TOP_SIMILARITY

    details = details or {}
    if doc_key:
        for candidate in details.get(L1_CANDIDATES) or []:
            if candidate.get("doc_key") == doc_key and candidate.get("similarity") is not None:
                return round(float(candidate["similarity"]), 4)
    top = details.get(L1_TOP_SIMILARITY)
    return None if top is None else round(float(top), 4)


def candidates_from_details(details: dict | None) -> list[dict]:
    """One entry per document of the L1 candidates, best chunk first: what decided its level."""
    from observability.records import L1_CANDIDATES

    seen: dict[str, dict] = {}
    for candidate in (details or {}).get(L1_CANDIDATES) or []:
        key = candidate.get("doc_key")
        if key and key not in seen:
            seen[key] = {k: candidate.get(k) for k in ("doc_key", "similarity", "coverage", "l1_level")}
    return list(seen.values())


def tokens_jieba(text: str) -> list[str]:
    """jieba's tokens, lower-cased, without whitespace and punctuation."""
    import jieba

    jieba.setLogLevel(logging.WARNING)

    return [t for t in (w.strip().lower() for w in jieba.lcut(text)) if t and any(ch.isalnum() for ch in t)]


class Bm25Baseline:
    """Plain BM25 (bm25s, Lucene variant) over jieba tokens of each document's title and text."""

    def __init__(self, documents: list[Document]) -> None:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self.keys = [d.doc_key for d in documents]
        self.retriever = bm25s.BM25()
        self.retriever.index([tokens_jieba(f"{d.title}\n{d.text}") for d in documents], show_progress=False)
        self.vocab = self.retriever.vocab_dict

    def ask(self, question: Question) -> Answer:
        import numpy as np

        started = time.perf_counter()
        tokens = [t for t in tokens_jieba(question.query) if t in self.vocab]
        if tokens:
            scores = self.retriever.get_scores(tokens)
            order = [int(i) for i in np.argsort(-scores, kind="stable")[:RANK_DEPTH] if scores[i] > 0]
        else:
            order = []
        ranked = [self.keys[i] for i in order]
        ms = (time.perf_counter() - started) * 1000
        return Answer(
            question.qid,
            question.query,
            question.expected,
            primary=ranked[0] if ranked else None,
            level=None,
            ranked=ranked,
            ms=ms,
            kind=question.kind,
        )


def lookup_in_process(question: Question) -> Answer:
    from retrieval.services import lookup_knowledge

    started = time.perf_counter()
    outcome = lookup_knowledge(
        query=question.query, session_id=f"quality-{uuid.uuid4().hex}", dry_run=True, source="bench"
    )
    ms = (time.perf_counter() - started) * 1000
    body, details = outcome.body, outcome.details
    primary = body["primary"]["docKey"] if body.get("found") and body.get("primary") else None
    return Answer(
        question.qid,
        question.query,
        question.expected,
        primary=primary,
        level=body.get("relevanceLevel") if primary else None,
        ranked=ranked_from_lookup(body, details),
        ms=ms,
        similarity=similarity_from_details(details, primary),
        kind=question.kind,
        candidates=candidates_from_details(details),
    )


def lookup_over_http(url: str, token: str) -> Callable[[Question], Answer]:
    parts = urlsplit(url)
    connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    path = parts.path.rstrip("/") + "/api/tools/lookup_knowledge"

    def ask(question: Question) -> Answer:
        body = json.dumps({"query": question.query, "session_id": f"quality-{uuid.uuid4().hex}"})
        for _ in range(20):
            started = time.perf_counter()
            conn = connection_class(parts.netloc, timeout=120)
            conn.request(
                "POST",
                path,
                body=body,
                headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
            )
            response = conn.getresponse()
            payload = response.read()
            ms = (time.perf_counter() - started) * 1000
            conn.close()
            if response.status == 429:  # the tool throttle: wait as told, then ask again
                time.sleep(float(response.getheader("Retry-After") or 1))
                continue
            if response.status != 200:
                raise RuntimeError(f"{url}: HTTP {response.status}: {payload[:300]!r}")
            result = json.loads(payload)
            primary = result["primary"]["docKey"] if result.get("found") and result.get("primary") else None
            return Answer(
                question.qid,
                question.query,
                question.expected,
                primary=primary,
                level=result.get("relevanceLevel") if primary else None,
                ranked=ranked_from_lookup(result, None),
                ms=ms,
                kind=question.kind,
            )
        raise RuntimeError(f"{url}: still throttled after 20 tries")

    return ask


def _progress(items: list, label: str):
    from tqdm import tqdm

    return tqdm(items, desc=label, file=sys.stderr, leave=False, mininterval=1.0)


def run_system(label: str, ask: Callable[[Question], Answer], questions: list[Question]) -> list[Answer]:
    return [ask(q) for q in _progress(questions, label)]


# --- one data set, in a process of its own (Django settings are per process) -----------------------
def _prepare_environment(folder: Path) -> None:
    os.environ.update(
        AGENTKB_VAR_DIR=str(folder),
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=f"sqlite:///{folder / 'quality.sqlite3'}",
        MILVUS_URI=str(folder / "milvus.db"),
        MILVUS_COLLECTION="quality_chunks",
        CELERY_TASK_ALWAYS_EAGER="true",
        RETRIEVAL_TRACKER_BACKEND="memory",
        # Every system pays for its own embedding and search: no answer comes from a cache.
        RETRIEVAL_QUERY_CACHE_SIZE="0",
        LOG_LEVEL="WARNING",
    )
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)


def _lexical_engine() -> str | None:
    """The lexical engine in force and why (None in code from before the engine could be chosen)."""
    try:
        from knowledge.lexical import lexical_engine_choice
    except ImportError:
        return None
    choice = lexical_engine_choice()
    return f"{choice.name} ({choice.reason})"


def _ingest(dataset: Dataset) -> dict:
    from knowledge.models import ApiDocument, DocumentChunk
    from knowledge.services.documents import document_ingest

    started = time.perf_counter()
    for document in _progress(dataset.documents, f"{dataset.name}: ingest"):
        document_ingest(data=document.data, name=document.doc_key)  # indexing runs eagerly on commit
    indexed = ApiDocument.objects.filter(status=ApiDocument.Status.INDEXED).count()
    failed = list(
        ApiDocument.objects.exclude(status=ApiDocument.Status.INDEXED).values_list("doc_key", "error")
    )
    if failed:
        raise RuntimeError(f"{len(failed)} documents not indexed, e.g. {failed[:3]}")

    return {
        "documents": indexed,
        "chunks": DocumentChunk.objects.count(),
        "seconds": round(time.perf_counter() - started, 1),
    }


def _l1_caches_clear() -> None:
    """No cached L1 result may cross from one system to the next (the caches are off anyway)."""
    from retrieval.lookup import vector_search

    clear = getattr(vector_search, "l1_caches_clear", None)
    if clear is not None:
        clear()


def prepare_django(name: str = "run", keep: bool = False) -> None:
    """A throw-away agentkb in a temporary folder, migrated, for this process."""
    folder = Path(tempfile.mkdtemp(prefix=f"agentkb-quality-{name}-"))
    if keep:
        print(f"  keeping {folder}", file=sys.stderr)
    else:
        # Registered before embedded milvus-lite starts, so it runs after milvus-lite's own exit
        # handler has written its files (exit handlers run last-registered first).
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    _prepare_environment(folder)
    import django

    django.setup()
    from django.core.management import call_command

    # Noise on stderr, not failures: embedded milvus-lite answers an RPC pymilvus 3 sends on every
    # write with "not implemented" (logged as an error), and jieba logs its dictionary loading.
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    logging.getLogger("jieba").setLevel(logging.WARNING)
    call_command("migrate", verbosity=0)


def dataset_load(name: str, args: argparse.Namespace) -> Dataset:
    """A data set by name; the SQuAD-format files are read where they are, never copied."""
    if name == "cmrc":
        return cmrc_dataset(Path(args.cmrc), seed=args.seed, holdout=args.holdout)
    if name == "drcd":
        return cmrc_dataset(Path(args.drcd), seed=args.seed, holdout=args.holdout, name="drcd", domain="drcd")
    return demo_dataset()


def run_dataset(name: str, args: argparse.Namespace) -> dict:
    prepare_django(name, args.keep)
    from django.conf import settings
    from django.test import override_settings

    dataset = dataset_load(name, args)
    questions = subset_questions(dataset.questions, args.subset, seed=args.seed)
    if args.limit and args.limit < len(questions):
        # A seeded sample in the original order: answerable and unanswerable ones alike.
        keep = set(random.Random(args.seed).sample(range(len(questions)), args.limit))
        questions = [q for i, q in enumerate(questions) if i in keep]
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    result: dict = {"dataset": name, "subset": args.subset, "notes": list(dataset.notes), "systems": {}}

    has_mode = hasattr(settings, "RETRIEVAL_L1_MODE")
    if args.url:
        result["notes"].append(
            f"agentkb asked over HTTP at {args.url} (its own corpus and settings; its ranking is only "
            "what it returned, so recall@5 and MRR@5 see no withheld candidate)"
        )
        lookup_over_http(args.url, args.token)(Question("warm-up", "warm up 预热", None))
    else:
        from knowledge.embeddings import get_embedder

        embedder = get_embedder()
        result["embedding"] = f"{settings.EMBEDDING_BACKEND} ({embedder.model_name}, {embedder.dim}-d)"
        result["l1_mode"] = getattr(settings, "RETRIEVAL_L1_MODE", None)
        result["lexical_engine"] = _lexical_engine()
    if not args.url and {"agentkb", "dense"} & set(systems):
        result["ingest"] = _ingest(dataset)
        # Warm up (model, L0 index, collection load) on a question outside the measured ones.
        lookup_in_process(Question("warm-up", "warm up 预热", None))

    runs: dict[str, list[Answer]] = {}
    for system in systems:
        if system == "agentkb":
            ask = lookup_over_http(args.url, args.token) if args.url else lookup_in_process
            runs[system] = run_system(f"{name}: agentkb", ask, questions)
        elif system == "dense":
            if args.url:
                result["notes"].append("dense: not available over HTTP (a setting of the server)")
            elif not has_mode:
                result["notes"].append(
                    "dense: RETRIEVAL_L1_MODE does not exist in this code: the configured L1 is "
                    "dense-only, so 'agentkb' is the dense-only figure"
                )
            else:
                with override_settings(RETRIEVAL_L1_MODE="dense"):
                    _l1_caches_clear()
                    runs[system] = run_system(f"{name}: dense", lookup_in_process, questions)
                _l1_caches_clear()
        elif system == "bm25":
            baseline = Bm25Baseline(dataset.documents)
            runs[system] = run_system(f"{name}: bm25", baseline.ask, questions)

    for system, answers in runs.items():
        result["systems"][system] = {
            "metrics": quality_metrics(answers),
            "answers": [asdict(a) for a in answers],
        }
    if not args.url:
        try:
            from retrieval.lookup.thresholds import current_thresholds

            result["thresholds"] = current_thresholds().as_dict()
        except Exception as exc:  # reported, not fatal: the figures above stand
            result["thresholds"] = {"error": str(exc)}
    return result


# --- printing -------------------------------------------------------------------------------------
def _cell(value, width: int = 9, digits: int = 3) -> str:
    if value is None:
        return f"{'-':>{width}}"
    if isinstance(value, float):
        return f"{value:>{width}.{digits}f}"
    return f"{value!s:>{width}}"


def report_text(results: list[dict], *, failures: int = 0) -> str:
    lines = []
    for r in results:
        lines.append("")
        embedding = f": {r['embedding']}" if r.get("embedding") else ""
        lines.append(f"== {r['dataset']} (subset {r['subset']}){embedding}")
        for note in r["notes"]:
            lines.append(f"   {note}")
        if "ingest" in r:
            i = r["ingest"]
            lines.append(f"   indexed {i['documents']} documents, {i['chunks']} chunks in {i['seconds']} s")
        if "thresholds" in r:
            lines.append(
                f"   thresholds in force: {r['thresholds']}; RETRIEVAL_L1_MODE: {r.get('l1_mode')}; "
                f"lexical engine: {r.get('lexical_engine')}"
            )
        header = (
            f"   {'system':<9}{'hit@1':>9}{'recall@5':>9}{'MRR@5':>9}{'found':>9}{'not-found':>10}"
            f"{'P(PREC)':>13}{'P(HR)':>13}{'P(REF)':>13}{'p50 ms':>9}{'p95 ms':>9}"
        )
        lines.append(header)
        for system, run in r["systems"].items():
            m = run["metrics"]

            def level(name: str, m=m) -> str:
                cell = m["levels"][name]
                if not cell["answers"]:
                    return f"{'-':>13}"
                return f"{cell['precision']:>7.3f} {'(' + str(cell['answers']) + ')':<5}"

            lines.append(
                f"   {system:<9}{_cell(m['hit@1'])}{_cell(m['recall@5'])}{_cell(m['mrr@5'])}"
                f"{_cell(m['found'])}{_cell(m['not_found'], 10)}"
                f"{level('PRECISE')}{level('HIGHLY_RELEVANT')}{level('REFERENCE')}"
                f"{_cell(m['p50_ms'], 9, 1)}{_cell(m['p95_ms'], 9, 1)}"
            )
        for system, run in r["systems"].items():
            m = run["metrics"]
            lines.append(
                f"   {system:<9}answers right (any level) {_cell(m['answer_precision'], 0)}; answerable "
                f"questions whose document was ranked first but not returned {_cell(m['withheld_first'], 0)}"
            )
        if r["dataset"] == "demo":
            for system, run in r["systems"].items():
                kinds = ", ".join(
                    f"{kind} {cell['right']:.2f} ({cell['questions']})"
                    for kind, cell in run["metrics"]["by_kind"].items()
                )
                lines.append(f"   {system:<9}right by kind: {kinds}")
        for system, run in r["systems"].items():
            wrong = [a for a in run["answers"] if a["primary"] != a["expected"]][:failures]
            for a in wrong:
                similarity = "-" if a["similarity"] is None else f"{a['similarity']:.3f}"
                lines.append(
                    f"   {system:<9}failed: {a['query'][:50]!r} expected {a['expected'] or 'nothing'}, got "
                    f"{a['primary'] or 'not found'} ({a['level'] or '-'}, similarity {similarity}, "
                    f"ranked {a['ranked'][:3]})"
                )
        any_m = next(iter(r["systems"].values()), {}).get("metrics", {})
        lines.append(
            f"   {any_m.get('answerable', 0)} answerable, {any_m.get('unanswerable', 0)} unanswerable questions; "
            "P(level) = precision of the answers at that level (their count)"
        )
    return "\n".join(lines)


def write_corpus(name: str, args: argparse.Namespace, folder: Path) -> None:
    dataset = (
        cmrc_dataset(Path(args.cmrc), seed=args.seed, holdout=args.holdout)
        if name == "cmrc"
        else demo_dataset()
    )
    for document in dataset.documents:
        target = folder / document.doc_key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(document.data)
    print(f"wrote {len(dataset.documents)} {name} documents under {folder}", file=sys.stderr)


def write_questions(names: list[str], args: argparse.Namespace, path: Path) -> None:
    """The (subset of the) questions as ``manage.py calibrate_thresholds --queries`` reads them."""
    rows = []
    for name in names:
        dataset = (
            cmrc_dataset(Path(args.cmrc), seed=args.seed, holdout=args.holdout)
            if name == "cmrc"
            else demo_dataset()
        )
        for q in subset_questions(dataset.questions, args.subset, seed=args.seed):
            rows.append({"id": q.qid, "query": q.query, "expected": q.expected, "kind": q.kind})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} questions to {path}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", choices=(*DATASETS, "all"), default=None)
    parser.add_argument("--fit-on", choices=DATASETS, help="fit the level model on this set only")
    parser.add_argument("--report-on", choices=DATASETS, help="and report its figures on this one")
    parser.add_argument(
        "--write-profile",
        action="store_true",
        help="write the --fit-on model as the embedding model's level profile (with the figures)",
    )
    parser.add_argument(
        "--verify", action="store_true", help="ask the report set again end-to-end with the fit"
    )
    parser.add_argument("--drcd", default=str(cmrc_default_path(DRCD_RELATIVE)), help="path of DRCD_dev.json")
    parser.add_argument(
        "--pooled",
        action="store_true",
        help="fit on CMRC and DRCD together, report on the half of each set's articles each fit did not see",
    )
    parser.add_argument(
        "--draws",
        metavar="SEEDS",
        help="the cross table over several draws of the held-out paragraphs, e.g. 11,12,13: each "
        "set collected once per seed, each draw's fit reported on every draw of the other set",
    )
    parser.add_argument("--save-collected", metavar="FILE", help="keep each question's evidence as JSON")
    parser.add_argument(
        "--from-collected", metavar="FILE", help="fit and report from a --save-collected file"
    )
    parser.add_argument("--collect", choices=DATASETS, help=argparse.SUPPRESS)
    parser.add_argument("--collect-out", help=argparse.SUPPRESS)
    parser.add_argument("--with-profile", help=argparse.SUPPRESS)
    parser.add_argument(
        "--systems", default=",".join(SYSTEMS), help=f"comma-separated, of {', '.join(SYSTEMS)}"
    )
    parser.add_argument("--subset", choices=("dev", "test", "all"), default="all")
    parser.add_argument(
        "--limit", type=int, default=0, help="ask a seeded sample of N questions of each data set"
    )
    parser.add_argument("--cmrc", default=str(cmrc_default_path()), help="path of cmrc2018_trial.json")
    parser.add_argument(
        "--seed",
        type=int,
        default=11,
        help="seed of the hold-out, of the dev/test halves and of --pooled's article halves",
    )
    parser.add_argument("--holdout", type=float, default=0.10, help="share of CMRC paragraphs held out")
    parser.add_argument("--url", help="ask a running agentkb over HTTP (base URL)")
    parser.add_argument("--token", help="its tool token (with --url)")
    parser.add_argument("--json", metavar="FILE", help="write the figures and every answer as JSON")
    parser.add_argument(
        "--write-corpus", metavar="DIR", help="write the data sets' documents as files, then stop"
    )
    parser.add_argument(
        "--write-questions",
        metavar="FILE",
        help="write the (--subset of the) questions as JSON lines for manage.py calibrate_thresholds, then stop",
    )
    parser.add_argument(
        "--failures",
        type=int,
        default=0,
        metavar="N",
        help="also list each system's first N failed questions",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    parser.add_argument("--one-dataset", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.url and not args.token:
        parser.error("--url needs --token")
    unknown = [s for s in args.systems.split(",") if s.strip() and s.strip() not in SYSTEMS]
    if unknown:
        parser.error(f"--systems: unknown {', '.join(unknown)} (choose from {', '.join(SYSTEMS)})")
    from bench import levels_fit

    if args.collect:
        levels_fit.collect_main(args.collect, args)
        return
    if args.one_dataset:  # the child process of a --dataset run (it has no --dataset of its own)
        print("RESULT " + json.dumps(run_dataset(args.one_dataset, args), ensure_ascii=False), flush=True)
        return
    if args.draws and (args.dataset or args.pooled or args.verify or args.write_profile):
        parser.error(
            "--draws reports fits of several draws: it takes no --dataset, --pooled, --verify or --write-profile"
        )
    if args.dataset is None and args.pooled:
        if args.fit_on or args.report_on:
            parser.error("--pooled fits on both sets: it takes no --fit-on or --report-on")
        for flag in ("cmrc", "drcd"):
            if not Path(getattr(args, flag)).exists():
                parser.error(f"--{flag}: {getattr(args, flag)} does not exist")
        print(levels_fit.pooled_main(args))
        return
    if args.dataset is None:
        if bool(args.fit_on) != bool(args.report_on):
            parser.error("--fit-on and --report-on go together")
        for name in {args.fit_on or "cmrc", args.report_on or "drcd"}:
            path = {"cmrc": args.cmrc, "drcd": args.drcd}.get(name)
            if path and not Path(path).exists():
                parser.error(f"--{name}: {path} does not exist")
        if args.draws:
            if not re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", args.draws):
                parser.error(f"--draws: comma-separated seeds, e.g. 11,12,13; got {args.draws!r}")
            print(levels_fit.draws_main(args))
            return
        print(levels_fit.cross_main(args))
        return
    names = [n for n in DATASETS if n != "drcd"] if args.dataset == "all" else [args.dataset]
    if "cmrc" in names and not Path(args.cmrc).exists():
        parser.error(f"--cmrc: {args.cmrc} does not exist")

    if args.write_corpus or args.write_questions:
        scratch = Path(tempfile.mkdtemp(prefix="agentkb-quality-corpus-"))
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        _prepare_environment(scratch)
        import django

        django.setup()
        for name in names:
            if args.write_corpus:
                write_corpus(name, args, Path(args.write_corpus))
        if args.write_questions:
            write_questions(names, args, Path(args.write_questions))
        return
    results = []
    for name in names:
        command = [sys.executable, __file__, "--one-dataset", name]
        for flag in ("systems", "subset", "limit", "cmrc", "drcd", "seed", "holdout", "url", "token"):
            value = getattr(args, flag)
            if value not in (None, "", 0):
                command += [f"--{flag}", str(value)]
        if args.keep:
            command.append("--keep")
        started = time.perf_counter()
        out = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
        lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
        if out.returncode != 0 or not lines:
            sys.exit(f"the {name} run failed (exit {out.returncode})")
        result = json.loads(lines[-1][len("RESULT ") :])
        result["wall_seconds"] = round(time.perf_counter() - started, 1)
        results.append(result)
    print(report_text(results, failures=args.failures))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
