"""Every text agents read, in each agent-facing language (``retrieval.agents.language``): lookup messages,
completeness hints, the tool description, the MCP server's tool and prompt descriptions, and which
prompt template to render. The Chinese texts are the seeds'; the English ones say the same.

``text(key, language=None, **fields)`` formats one entry (None: the global AGENT_LANGUAGE);
``titles``/``listing``/``joined`` put names and sentences together the way each language does;
``echoed`` quotes what a client sent, briefly, in an error.
"""

from __future__ import annotations

from django.conf import settings

from observability.records import RelevanceLevel
from retrieval.agents.language import default_language, language_normalise

# The levels a completeness hint speaks for: none for DEDUPED and not found.
HINTED_LEVELS = frozenset({RelevanceLevel.PRECISE, RelevanceLevel.HIGHLY_RELEVANT, RelevanceLevel.REFERENCE})

TEXTS: dict[str, dict[str, str]] = {
    "zh": {
        # lookup messages (retrieval.lookup.results.message_build)
        "blocked_domain": (
            "本会话已检索过域「{domain}」（已获取：{held}），本次检索被拦截。"
            "请直接使用已获取的内容作答，禁止换关键词重新检索；如确有缺失，请先指出缺少的具体维度。"
        ),
        "held_fallback": "相关文档",
        "all_deduped": (
            "与该查询相关的文档本会话均已获取：{titles}（域：{domains}）。"
            "请直接使用已获取的内容作答，禁止换关键词重新检索。"
        ),
        "not_found": "知识库中没有与该查询相关的文档。",
        "found": "找到 {count} 篇文档，主结果{title}（域：{domain}）",
        "found_supplements": "，另有 {count} 篇补充",
        "found_end": "。",
        "withheld": "已省略本会话已获取的文档：{titles}，请直接使用之前的结果。",
        "domain_repeated": (
            "注意：域「{domains}」本会话此前已检索过，请先判断已有信息是否足够，禁止换关键词重新检索。"
        ),
        "vector_search_down": (
            "（部分检索暂不可用：语义检索（semantic search，向量库）暂不可用，"
            "本次结果仅来自关键词匹配，可能不完整。）"
        ),
        "degraded": "（部分检索暂不可用，本次结果可能不完整。）",
        "title": "《{title}》",
        "titles_more": " 等 {count} 篇",
        # the lookup_knowledge tool (retrieval.selectors.lookup_tool_definition)
        "tool_description": (
            "在知识库中检索文档（关键词精确匹配 + 语义检索）。返回 primary / supplement 文档内容、"
            "relevanceLevel（PRECISE / HIGHLY_RELEVANT / REFERENCE / DEDUPED，未找到为 null）、"
            "completenessHint（继续检索是否还有意义）和 retrievedDomainsThisSession（本会话已检索过的域）。"
            "同一会话已获取的文档不会重复返回；禁止换关键词重新检索同一内容。"
        ),
        "tool_query": "要检索的问题或关键词，例如 “数据库连接池配置” 或 “ERR_TIMEOUT”。",
        "tool_top_k": "可选：语义检索取回的文本块数量。",
        "tool_domains": "可选：只在这些知识域中检索（域 ID，见知识地图）；不填则检索全部可用的域。",
        "tool_metadata_condition": (
            "可选：只检索元数据满足这些条件的文档（Dify 的 metadata_condition 格式）。name 可以是 domain、title、"
            "keywords、doc_key、document_name、upload_date、last_update_date，或文档 front matter 中的字段"
            "（如 version）；日期用 before / after 比较，数字用 = ≠ > < ≥ ≤。例如："
            '{"logical_operator": "and", "conditions": [{"name": "version", "comparison_operator": "≥", "value": 3}]}'
        ),
        "mcp_session_id": (
            "可选，默认是本次 MCP 会话。分开的多次客户端运行传入同一个值，才能保留行动记忆（已获取的文档不再返回）。"
        ),
        # the MCP server (retrieval.entrypoints.mcp_server)
        "mcp_instructions": (
            "agentkb：知识检索。每个信息需求调用一次 lookup_knowledge；本会话已获取的文档不会再次返回。"
            "get_knowledge_map 列出知识域，供规划使用。"
        ),
        "mcp_knowledge_map": (
            "知识域地图：每个知识域的 domain_id、description、when_to_retrieve 及其文档（title、covers）。"
            "规划检索时先看它，再按域调用 lookup_knowledge。"
        ),
        "strict_length": "（{min} 到 {max} 个字符）",
        "strict_range": "（{min} 到 {max}）",
        "strict_nullable": "可为 null，表示使用默认值。",
        "mcp_executor_prompt": "Executor 提示词，含检索约束。",
        "mcp_planner_prompt": "Planner 提示词，含当前的知识域地图。",
    },
    "en": {
        "blocked_domain": (
            "This session already retrieved the domain '{domain}' (already fetched: {held}), so this "
            "lookup was blocked. Answer from the content you already have; do not retry with other "
            "keywords. If something is really missing, first name the specific aspect that is missing."
        ),
        "held_fallback": "related documents",
        "all_deduped": (
            "Every document related to this query was already fetched in this session: {titles} "
            "(domains: {domains}). Answer from the content you already have; do not retry with other keywords."
        ),
        "not_found": "The knowledge base has no document related to this query.",
        "found": "Found {count} document(s); primary result {title} (domain: {domain})",
        "found_supplements": ", plus {count} supplement(s)",
        "found_end": ".",
        "withheld": "Left out documents this session already has: {titles}; use the earlier results.",
        "domain_repeated": (
            "Note: the domain(s) '{domains}' were already retrieved earlier in this session. First judge "
            "whether what you have is enough; do not retry with other keywords."
        ),
        "vector_search_down": (
            "(Part of the search is unavailable: semantic search (the vector store) is down, so these "
            "results come from keyword matching only and may be incomplete.)"
        ),
        "degraded": "(Part of the search is unavailable; these results may be incomplete.)",
        "title": '"{title}"',
        "titles_more": " and others, {count} in all",
        "tool_description": (
            "Look up documents in the knowledge base (exact keyword match + semantic search). Returns the "
            "primary / supplement document content, relevanceLevel (PRECISE / HIGHLY_RELEVANT / REFERENCE "
            "/ DEDUPED; null when nothing is found), completenessHint (whether searching further is still "
            "worthwhile) and retrievedDomainsThisSession (the domains this session has already retrieved). "
            "Documents this session already has are not returned again; do not look the same thing up "
            "again with other keywords."
        ),
        "tool_query": (
            'The question or keywords to look up, e.g. "database connection pool configuration" or "ERR_TIMEOUT".'
        ),
        "tool_top_k": "Optional: how many text chunks semantic search fetches.",
        "tool_domains": (
            "Optional: search only these knowledge domains (domain ids, as the knowledge map lists "
            "them); leave it out to search every domain available."
        ),
        "tool_metadata_condition": (
            "Optional: search only documents whose metadata meet these conditions (Dify's "
            "metadata_condition). name is domain, title, keywords, doc_key, document_name, upload_date, "
            "last_update_date or a field of the document's front matter (e.g. version); dates compare "
            "with before / after, numbers with = ≠ > < ≥ ≤. Example: "
            '{"logical_operator": "and", "conditions": [{"name": "version", "comparison_operator": "≥", "value": 3}]}'
        ),
        "mcp_session_id": (
            "Optional; defaults to this MCP session. Pass the same value from separate client runs to keep "
            "action memory across them (documents already fetched are not returned again)."
        ),
        "mcp_instructions": (
            "agentkb: knowledge retrieval. Call lookup_knowledge once per information need; documents "
            "this session already has are not returned again. get_knowledge_map lists the knowledge "
            "domains for planning."
        ),
        "mcp_knowledge_map": (
            "The knowledge map: each knowledge domain's domain_id, description, when_to_retrieve and its "
            "documents (title, covers). Read it when planning lookups, then call lookup_knowledge per domain."
        ),
        "strict_length": " ({min} to {max} characters)",
        "strict_range": " ({min} to {max})",
        "strict_nullable": " Null for the default.",
        "mcp_executor_prompt": "The executor prompt with the retrieval constraints.",
        "mcp_planner_prompt": "The planner prompt with the current knowledge map.",
    },
}
#: Separators: between items of a list, and between the sentences of a message.
_LIST_SEPARATOR = {"zh": "、", "en": ", "}
_SENTENCE_SEPARATOR = {"zh": "", "en": " "}
#: Prompt templates (under templates/) per language.
PROMPT_TEMPLATES = {
    "executor": {"zh": "prompts/chat_executor_prompt.md", "en": "prompts/chat_executor_prompt.en.md"},
    "planner": {"zh": "prompts/chat_planner_prompt.md", "en": "prompts/chat_planner_prompt.en.md"},
}


# Characters of a client's value an error quotes back (Dify's knowledge_id and condition values,
# MCP's unknown tool or prompt names): the whole of it is in the recorded request, if anywhere.
MAX_ECHO_CHARS = 64


def echoed(value, limit: int = MAX_ECHO_CHARS) -> str:
    """A client's value as an error quotes it: a string's first ``limit`` characters (quoted), any
    other value's ``repr`` cut likewise, so a 100,000-character id is not sent back whole."""
    if isinstance(value, str):
        return repr(value[:limit]) + ("…" if len(value) > limit else "")
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def language_or_default(language: str | None) -> str:
    return language_normalise(language) or default_language()


def text(key: str, language: str | None = None, **fields) -> str:
    template = TEXTS[language_or_default(language)][key]
    return template.format(**fields) if fields else template


def listing(items, language: str | None = None) -> str:
    return _LIST_SEPARATOR[language_or_default(language)].join(items)


def joined(parts: list[str], language: str | None = None) -> str:
    return _SENTENCE_SEPARATOR[language_or_default(language)].join(parts)


def titles(names: list[str], language: str | None = None, *, limit: int = 5) -> str:
    """At most ``limit`` titles, quoted the language's way, and how many there are in all."""
    shown = listing([text("title", language, title=name) for name in names[:limit]], language)
    return shown + (text("titles_more", language, count=len(names)) if len(names) > limit else "")


def completeness_hint(level: str | None, language: str | None = None) -> str | None:
    """The seeds' 兜底信号 for a level in the agent's language; None for DEDUPED and not found.

    A RETRIEVAL_HINT_* setting is the hint of the global language; agents of the other language
    get its text from COMPLETENESS_HINTS.
    """
    if level not in HINTED_LEVELS:
        return None
    language = language_or_default(language)
    configured = getattr(settings, f"RETRIEVAL_HINT_{level}")
    built_in = {hints[level] for hints in settings.COMPLETENESS_HINTS.values()}
    if configured and configured not in built_in and language == default_language():
        return configured  # set explicitly, for the agents of the global language
    return settings.COMPLETENESS_HINTS[language][level]


def prompt_template(name: str, language: str | None = None) -> str:
    return PROMPT_TEMPLATES[name][language_or_default(language)]
