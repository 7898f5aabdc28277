"""The examples talk to a real agentkb: the lookup's fixtures (a corpus on a fresh collection, a
fresh action memory and caches per test)."""

from tests.retrieval.conftest import _fresh_retrieval_state, corpus  # noqa: F401
