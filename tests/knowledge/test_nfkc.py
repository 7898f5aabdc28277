"""``knowledge.lexical.nfkc.nfkc`` is NFKC itself, only faster: any difference would change the
lexical index's tokens without changing its signature."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from knowledge.lexical.nfkc import nfkc

# Characters that take each of its paths, and their neighbours that interact with them: full-width
# forms and spaces (replaced first), combining marks that compose with what they replace into, other
# compatibility characters (the full path), CJK in both scripts, ASCII.
_ALPHABET = (
    "ＡＺａｚ０９＿，。（）：；！？／－～　\u00a0"
    "\u0301\u0308\u030a\u0327\u3099\u309a"
    "…℃²ﬁ①㎏Å\u212b\uff76\uff9e\u1100\u1161\u11a8"
    "漢字汉字體体臺台，、「」《》"
    "Az09_ .-/\x00\n\t"
)


def test_the_same_string_as_unicodedata_on_chinese_and_english_text():
    texts = [
        "Ｅｒｒｏｒ：ＥＲＲ＿ＴＩＭＥＯＵＴ（超时），请重试；　见第２章！",
        "臺北捷運（Taipei Metro）於１９９６年通車，營運路線：文湖線、淡水信義線。",
        "全角字母Ａ\u0301与组合音标、全角片假名ｶﾞ与温度３０℃、上标m²、连字ﬁ和圈码①。",
        "plain ASCII text with max_connections = 100",
        "",
        "\u00a0\u3000\uff01",
    ]
    for text in texts:
        assert nfkc(text) == unicodedata.normalize("NFKC", text), text


@hypothesis_settings(max_examples=500, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=40))
def test_the_same_string_as_unicodedata_on_any_mix(text):
    assert nfkc(text) == unicodedata.normalize("NFKC", text)


def test_a_full_width_character_followed_by_a_combining_mark_composes_as_nfkc_composes_it():
    # Ａ + combining acute is Á under NFKC: replacing Ａ by A alone must not stop there
    assert nfkc("Ａ\u0301") == "Á"
