"""Reads of the retrieval app: a session's action memory, the tool definition, the executor prompt."""

from __future__ import annotations

from django.conf import settings
from django.template.loader import get_template

from retrieval.services import MAX_SESSION_ID_CHARS, MAX_TOP_K, TOOL_NAME, session_id_clean
from retrieval.tracker import get_tracker

EXECUTOR_PROMPT_TEMPLATE = "prompts/chat_executor_prompt.md"


def session_retrievals_get(*, session_id: str) -> dict[str, list[str]]:
    """domain -> doc keys this session already has, domains in first-retrieved order."""
    return get_tracker().snapshot(session_id_clean(session_id)).domains


def lookup_tool_definition() -> dict:
    """lookup_knowledge in the OpenAI function-calling format (a ``tools`` entry)."""
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": (
                "在知识库中检索文档（关键词精确匹配 + 语义检索）。返回 primary / supplement 文档内容、"
                "relevanceLevel（PRECISE / HIGHLY_RELEVANT / REFERENCE / DEDUPED，未找到为 null）、"
                "completenessHint（继续检索是否还有意义）和 retrievedDomainsThisSession（本会话已检索过的域）。"
                "同一会话已获取的文档不会重复返回；禁止换关键词重新检索同一内容。"
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "要检索的问题或关键词，例如 “数据库连接池配置” 或 “ERR_TIMEOUT”。",
                        "minLength": 1,
                        "maxLength": settings.RETRIEVAL_MAX_QUERY_CHARS,
                    },
                    "session_id": {
                        "type": "string",
                        "description": "当前会话的 ID；同一会话的检索共享行动记忆。通常由智能体框架填写。",
                        "minLength": 1,
                        "maxLength": MAX_SESSION_ID_CHARS,
                    },
                    "top_k": {
                        "type": "integer",
                        "description": "可选：语义检索取回的文本块数量。",
                        "minimum": 1,
                        "maximum": MAX_TOP_K,
                    },
                },
                "required": ["query", "session_id"],
                "additionalProperties": False,
            },
        },
    }


def executor_prompt_get() -> str:
    """The executor prompt (seed 000 FS-5), from ``templates/prompts/chat_executor_prompt.md``."""
    return get_template(EXECUTOR_PROMPT_TEMPLATE).render({})
