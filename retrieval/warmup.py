"""Warm a process before its first request: the embedding model, the analyser (jieba and its
dictionary), the IDF table, the lexical index and the vector store connection.

The first lookup in a cold process loaded all of them itself (11.6 s for one process, about 40 s
for four starting at once on a loaded machine), so gunicorn's timeout killed new workers under
load. Called once per process at start: ``config.asgi``'s lifespan, gunicorn's ``post_fork``
(``config/gunicorn_conf.py``) and Celery's ``worker_process_init`` (``config.celery``). A part
that fails here (Milvus not up yet) is logged and loaded by the first request instead: a start
never fails for it.
"""

from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)


def _embedder() -> None:
    from knowledge.embeddings import get_embedder

    get_embedder().encode_one("warm-up 预热")


def _analyser() -> None:
    from knowledge.lexical.analyser import analyse

    analyse("数据库连接池 warm-up")


def _query_terms() -> None:
    from retrieval.lookup.query_terms import query_terms

    # "timeout", a plain English word, loads wordfreq's table (about 0.1-0.2 s), which the first
    # query with an English word paid before.
    query_terms("数据库连接池 warm-up timeout")


def _lexical_index() -> None:
    from knowledge.lexical import get_lexical_engine

    get_lexical_engine().count()


STEPS = {
    "embedder": _embedder,
    "analyser": _analyser,
    "query_terms": _query_terms,
    "lexical_index": _lexical_index,
}


def process_warm_up() -> dict[str, float | str]:
    """Load every part; return each one's seconds, or its error (never raises)."""
    took: dict[str, float | str] = {}
    for name, step in STEPS.items():
        started = time.perf_counter()
        try:
            step()
            took[name] = round(time.perf_counter() - started, 3)
        except Exception as exc:  # a part that cannot load now loads on the first request
            took[name] = f"{type(exc).__name__}: {exc}"[:200]
            logger.warning("warm-up: %s not loaded at start: %s", name, exc)
    logger.info("process warmed up: %s", took)
    return took
