"""The tantivy lexical index at size: build time, size on disk, top-20 BM25 search latency.

Real Chinese text: the paragraphs of the CMRC 2018 trial split (Simplified) and the DRCD dev set
(Traditional) are cut into sentences, and chunks of about 136 characters (two to four sentences)
are drawn from them, seeded, until the size asked for is reached. Eight chunks make a document;
documents fall into eight domains, so a one-domain filter keeps an eighth of the corpus.

Each sentence is analysed once (``knowledge.lexical.analyser``: NFKC, casefold, jieba) and a chunk's
tokens are its sentences' tokens: analysing every recombined chunk again would time jieba, not
the index. The analyser's own rate is printed apart (ms per chunk, on the original paragraphs).

Questions: 200 real questions of the two files (seeded), asked as all their tokens and as the
retrieval side's key terms (``retrieval.lookup.query_terms.bm25_query_text``: question words out), top 20,
without a filter and with a one-domain filter. Each question is asked once to warm the index
up, then timed. Also timed: one indexing run's write at that size (a document of 8 chunks
replaced, committed, merges waited for), a reader's first search after opening, and the full
scan ``check_index`` makes (every entry's chunk id, doc key and domain).

    .venv/bin/python bench/lexical.py --sizes 100000 1000000
    .venv/bin/python bench/lexical.py --sizes 20000 --no-text     # without the stored text

Data (read where it lies, never copied into the repository): ``../shared/data`` beside the
repository (``--data`` elsewhere): ``cmrc2018/cmrc2018_trial.json`` (CMRC 2018, Cui et al. 2019,
github.com/ymcui/cmrc2018, CC BY-SA 4.0) and ``drcd/DRCD_dev.json`` (DRCD, Delta Research
Center, github.com/DRCKnowledgeTeam/DRCD, compiled from Wikipedia, CC BY-SA 3.0). Nothing is
asserted: the figures are printed (``--json`` writes them too).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DATA = REPO.parent / "shared" / "data"
SOURCES = {
    "cmrc2018": (
        Path("cmrc2018") / "cmrc2018_trial.json",
        "CMRC 2018 trial split, Cui et al. 2019, github.com/ymcui/cmrc2018, CC BY-SA 4.0",
    ),
    "drcd": (
        Path("drcd") / "DRCD_dev.json",
        "DRCD dev set, Delta Research Center, github.com/DRCKnowledgeTeam/DRCD, from Wikipedia, CC BY-SA 3.0",
    ),
}
CHUNK_CHARS = 136
CHUNKS_PER_DOCUMENT = 8
DOMAINS = 8
QUESTIONS = 200
TOP_K = 20
_SENTENCE_END = re.compile(r"(?<=[。！？；!?;])")


@dataclass(frozen=True)
class Corpus:
    paragraphs: list[str]
    #: sentences with their tokens, analysed once
    sentences: list[tuple[str, tuple[str, ...]]]
    questions: list[str]


def load(data: Path, *, seed: int) -> Corpus:
    from knowledge.lexical import analyse

    paragraphs: list[str] = []
    questions: list[str] = []
    for name, (relative, _licence) in SOURCES.items():
        path = data / relative
        if not path.exists():
            raise SystemExit(
                f"bench/lexical.py: {name} not found at {path}. Put the data set there (see its README "
                "in shared/data) or pass --data FOLDER holding cmrc2018/ and drcd/."
            )
        for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
            for paragraph in article["paragraphs"]:
                paragraphs.append(paragraph["context"])
                questions.extend(qa["question"] for qa in paragraph["qas"])
    sentences = []
    for paragraph in paragraphs:
        for sentence in _SENTENCE_END.split(paragraph):
            sentence = sentence.strip()
            if len(sentence) >= 8:
                sentences.append((sentence, tuple(analyse(sentence))))
    rng = random.Random(seed)
    return Corpus(paragraphs, sentences, rng.sample(questions, min(QUESTIONS, len(questions))))


def chunks(corpus: Corpus, size: int, *, seed: int) -> Iterator:
    """``size`` chunks of about CHUNK_CHARS characters, two to four sentences each."""
    from knowledge.lexical import LexicalChunk

    rng = random.Random(seed)
    pool = corpus.sentences
    domains = [f"domain-{d}" for d in range(DOMAINS)]
    for i in range(size):
        doc, index = divmod(i, CHUNKS_PER_DOCUMENT)
        texts: list[str] = []
        tokens: list[str] = []
        while len(texts) < 2 or (len(texts) < 4 and sum(map(len, texts)) < CHUNK_CHARS):
            text, words = pool[rng.randrange(len(pool))]
            texts.append(text)
            tokens.extend(words)
        key = f"doc-{doc}.md"
        yield LexicalChunk(
            f"{key}#{index}", key, domains[doc % DOMAINS], index, tuple(tokens), "".join(texts)
        )


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def analyser_rate(corpus: Corpus) -> dict:
    from knowledge.lexical import analyse

    text = corpus.paragraphs[:300]
    started = time.perf_counter()
    for paragraph in text:
        analyse(paragraph)
    seconds = time.perf_counter() - started
    chars = sum(map(len, text))
    return {"chars_per_s": chars / seconds, "ms_per_chunk": CHUNK_CHARS / (chars / seconds) * 1000}


def key_terms(questions: list[str]) -> list[tuple[str, ...]] | None:
    """The retrieval side's key terms of each question, when it can be imported (Django set up
    in a throw-away folder: nothing is read or written there)."""
    try:
        os.environ.setdefault("AGENTKB_VAR_DIR", tempfile.mkdtemp(prefix="agentkb-bench-lexical-"))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
        from retrieval.lookup.query_terms import bm25_query_text
    except Exception as exc:  # the figures with all tokens still stand
        print(f"(key terms skipped: {exc})")
        return None
    from knowledge.lexical import query_tokens

    return [query_tokens(bm25_query_text(q)) for q in questions]


def timed_searches(index, queries: list[tuple[str, ...]], *, domain) -> dict:
    for tokens in queries:  # warm-up: the first touch of each posting list reads the disk
        index.search(tokens, top_k=TOP_K, domain=domain)
    times, found = [], 0
    for tokens in queries:
        started = time.perf_counter()
        hits = index.search(tokens, top_k=TOP_K, domain=domain)
        times.append((time.perf_counter() - started) * 1000)
        found += bool(hits)
    p50, p95 = percentiles(times)
    return {"p50_ms": p50, "p95_ms": p95, "answered": found, "questions": len(queries)}


def run_size(
    corpus: Corpus, size: int, *, folder: Path, seed: int, heap_mb: int, store_text: bool, terms
) -> dict:
    from knowledge.lexical import query_tokens
    from knowledge.lexical.tantivy_index import TantivyLexicalIndex

    path = folder / f"lexical-{size}"
    index = TantivyLexicalIndex(path=path, heap_bytes=heap_mb * 1_000_000, store_text=store_text)
    started = time.perf_counter()
    with index.writing(fresh=True) as write:
        added = write.add(chunks(corpus, size, seed=seed))
    build_s = time.perf_counter() - started
    size_mb = folder_bytes(path) / 1e6

    reader = TantivyLexicalIndex(path=path)  # as a web process opening it
    started = time.perf_counter()
    reader.search(query_tokens(corpus.questions[0]), top_k=TOP_K)
    first_search_ms = (time.perf_counter() - started) * 1000

    all_tokens = [query_tokens(q) for q in corpus.questions]
    searches = {
        "all tokens": timed_searches(reader, all_tokens, domain=None),
        "all tokens, one domain": timed_searches(reader, all_tokens, domain="domain-3"),
    }
    if terms is not None:
        searches["key terms"] = timed_searches(reader, terms, domain=None)
        searches["key terms, one domain"] = timed_searches(reader, terms, domain="domain-3")

    # One indexing run's write at this size: a document's 8 chunks replaced in one commit.
    replacement = list(chunks(corpus, CHUNKS_PER_DOCUMENT, seed=seed + 1))
    key = "doc-0.md"
    replacement = [
        c.__class__(f"{key}#{c.chunk_index}", key, "domain-0", c.chunk_index, c.tokens, c.text)
        for c in replacement
    ]
    writes = []
    for _ in range(5):
        started = time.perf_counter()
        index.documents_replace({key: replacement})
        writes.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    entries = len(reader.entries())
    scan_s = time.perf_counter() - started
    return {
        "chunks": added,
        "build_s": build_s,
        "size_mb": size_mb,
        "first_search_ms": first_search_ms,
        "searches": searches,
        "one_document_write_ms": statistics.median(writes),
        "entries_scan_s": scan_s,
        "entries": entries,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--data", type=Path, default=DATA, help="folder holding cmrc2018/ and drcd/")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--heap-mb", type=int, default=50, help="the writer's memory (LEXICAL_WRITER_HEAP_MB)"
    )
    parser.add_argument("--no-text", action="store_true", help="do not store each chunk's text in the index")
    parser.add_argument("--keep", type=Path, help="build the indexes in this folder and keep them")
    parser.add_argument("--json", type=Path, help="write the figures to this file too")
    args = parser.parse_args(argv)

    for _name, (_relative, licence) in SOURCES.items():
        print(f"data: {licence}")
    started = time.perf_counter()
    corpus = load(args.data, seed=args.seed)
    print(
        f"{len(corpus.paragraphs)} paragraphs, {len(corpus.sentences)} sentences analysed in "
        f"{time.perf_counter() - started:.1f} s, {len(corpus.questions)} questions"
    )
    rate = analyser_rate(corpus)
    print(
        f"analyser: {rate['chars_per_s']:,.0f} characters/s, {rate['ms_per_chunk']:.2f} ms per {CHUNK_CHARS}-char chunk"
    )
    terms = key_terms(corpus.questions)

    folder = args.keep or Path(tempfile.mkdtemp(prefix="agentkb-bench-lexical-"))
    folder.mkdir(parents=True, exist_ok=True)
    results = {"analyser": rate, "sizes": {}}
    try:
        for size in args.sizes:
            figures = run_size(
                corpus,
                size,
                folder=folder,
                seed=args.seed,
                heap_mb=args.heap_mb,
                store_text=not args.no_text,
                terms=terms,
            )
            results["sizes"][size] = figures
            print(
                f"\n{size:,} chunks: built in {figures['build_s']:.1f} s (one writer thread, "
                f"{args.heap_mb} MB), {figures['size_mb']:.0f} MB on disk"
                f"{' without the text' if args.no_text else ' with the text stored'}; first search after "
                f"opening {figures['first_search_ms']:.1f} ms; one document's write "
                f"{figures['one_document_write_ms']:.0f} ms; full entry scan {figures['entries_scan_s']:.1f} s"
            )
            for name, s in figures["searches"].items():
                print(
                    f"  top-{TOP_K} {name:<24} p50 {s['p50_ms']:6.2f} ms  p95 {s['p95_ms']:6.2f} ms  "
                    f"({s['answered']}/{s['questions']} answered)"
                )
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
