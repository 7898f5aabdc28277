"""Observability tests read documents (the admin home, hostile lookups): the corpus watcher
thread an earlier test may have left running must not hold SQLite's tables meanwhile."""

import pytest


@pytest.fixture(autouse=True)
def _no_corpus_watcher(settings):
    from retrieval.lookup.corpus import _watcher, corpus_signature_forget

    settings.RETRIEVAL_INDEX_REFRESH_MS = 0  # the watcher exits on its next tick; lookups read directly
    thread = _watcher.thread
    if thread is not None and thread.is_alive():
        thread.join(timeout=10)
    corpus_signature_forget()
    yield
