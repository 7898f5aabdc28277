"""RETRIEVAL_HINT_LANGUAGE: the seeds' Chinese completeness hints by default, English on request."""

import os
import subprocess
import sys

import pytest

from retrieval.services import lookup_knowledge
from tests.conftest import REPO

PRINT_HINTS = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.RETRIEVAL_HINT_PRECISE); print(s.RETRIEVAL_HINT_HIGHLY_RELEVANT); print(s.RETRIEVAL_HINT_REFERENCE)"
)


def _hints(**env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RETRIEVAL_HINT")}
    return subprocess.run(
        [sys.executable, "-c", PRINT_HINTS],
        cwd=REPO,
        env={**clean, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_by_default_the_hints_are_the_seeds_chinese():
    result = _hints()
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "知识库中不存在比上述结果更精准的文档"


def test_english_hints_on_request_and_an_explicit_hint_still_wins():
    result = _hints(RETRIEVAL_HINT_LANGUAGE="en", RETRIEVAL_HINT_REFERENCE="Custom reference hint")
    assert result.returncode == 0, result.stderr
    precise, highly, reference = result.stdout.splitlines()
    assert precise == "The knowledge base holds no document more precise than the results above."
    assert highly.startswith("These results are highly relevant")
    assert reference == "Custom reference hint"


def test_an_unknown_hint_language_stops_start_up_naming_the_variable():
    result = _hints(RETRIEVAL_HINT_LANGUAGE="fr")
    assert result.returncode != 0
    assert "RETRIEVAL_HINT_LANGUAGE must be one of zh-hans, en; got 'fr'" in result.stderr


@pytest.mark.django_db
def test_an_english_speaking_agent_gets_the_english_hint(seeded_corpus, settings, session_id):
    english = settings.COMPLETENESS_HINTS["en"]
    settings.RETRIEVAL_HINT_HIGHLY_RELEVANT = english["HIGHLY_RELEVANT"]
    outcome = lookup_knowledge(query="数据库连接池配置", session_id=session_id)
    assert outcome.body["relevanceLevel"] == "HIGHLY_RELEVANT"
    assert outcome.body["completenessHint"] == english["HIGHLY_RELEVANT"]
