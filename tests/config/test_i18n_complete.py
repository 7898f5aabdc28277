"""Chinese without gaps: every agentkb string the admin can show has a zh-hans translation.

``makemessages`` extracts every marked string of the project (Python and templates) and merges
them into the catalogue (restored afterwards); the test fails on any that the committed catalogue lacks, leaves
untranslated or marks fuzzy, naming them. Fix: run makemessages (see docs/integrations.md),
translate, recompile the .mo."""

from __future__ import annotations

import shutil

import polib
import pytest
from django.core.management import call_command

from tests.conftest import REPO

CATALOGUE = REPO / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"


def _gaps(po: polib.POFile) -> list[str]:
    return [
        entry.msgid
        for entry in po
        if not entry.obsolete
        and (
            "fuzzy" in entry.flags
            or (not entry.msgid_plural and not entry.msgstr)
            or (entry.msgid_plural and not all(entry.msgstr_plural.values()))
        )
    ]


def test_every_catalogue_entry_is_translated():
    assert _gaps(polib.pofile(str(CATALOGUE))) == []


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("xgettext") is None,
    reason="makemessages needs GNU gettext: apt-get install gettext (as .ci/run does)",
)
def test_every_marked_string_is_in_the_catalogue(monkeypatch):
    committed_text = CATALOGUE.read_bytes()
    committed = {entry.msgid for entry in polib.pofile(str(CATALOGUE))}
    monkeypatch.chdir(REPO)
    try:
        # makemessages merges into the catalogue in place: read the result, then put it back.
        call_command(
            "makemessages",
            locale=["zh_Hans"],
            no_obsolete=True,
            ignore_patterns=["var/*", "bench/*", "tests/*"],
            verbosity=0,
        )
        extracted = polib.pofile(str(CATALOGUE))
    finally:
        CATALOGUE.write_bytes(committed_text)
    assert sorted(e.msgid for e in extracted if e.msgid not in committed) == []
    assert _gaps(extracted) == []
