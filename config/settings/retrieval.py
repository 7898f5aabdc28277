"""The lookup: normalisation thresholds, supplements, action memory (seed 000, FS-1..FS-3)."""

from django.core.exceptions import ImproperlyConfigured

from config.env import env

RETRIEVAL_MAX_L2_DISTANCE = env.float("RETRIEVAL_MAX_L2_DISTANCE", default=2.0)


def _optional_float(name: str, raw: str) -> float | None:
    """Empty or unset: None (the embedding model's profile decides, retrieval/lookup/profiles.py)."""
    if not raw.strip():
        return None
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number or empty; got '{raw}'") from None


RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = _optional_float(
    "RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD", env.str("RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD", default="")
)
RETRIEVAL_REFERENCE_THRESHOLD = _optional_float(
    "RETRIEVAL_REFERENCE_THRESHOLD", env.str("RETRIEVAL_REFERENCE_THRESHOLD", default="")
)
# L1: "hybrid" (one Milvus hybrid_search over the dense vector and BM25 on the chunk text, fused)
# or "dense" (the vector alone, the behaviour before hybrid search; for comparison).
RETRIEVAL_L1_MODE = env.str("RETRIEVAL_L1_MODE", default="hybrid").strip().lower()
if RETRIEVAL_L1_MODE not in ("hybrid", "dense"):
    raise ImproperlyConfigured(f"RETRIEVAL_L1_MODE must be hybrid or dense; got '{RETRIEVAL_L1_MODE}'")
# How hybrid search fuses its two rankings: "rrf" (reciprocal rank fusion, k = RETRIEVAL_RRF_K)
# or "weighted" (Milvus's WeightedRanker); either weighs the dense side by RETRIEVAL_DENSE_WEIGHT
# (0.5: equal, Milvus's RRFRanker exactly).
RETRIEVAL_HYBRID_RANKER = env.str("RETRIEVAL_HYBRID_RANKER", default="rrf").strip().lower()
if RETRIEVAL_HYBRID_RANKER not in ("rrf", "weighted"):
    raise ImproperlyConfigured(
        f"RETRIEVAL_HYBRID_RANKER must be rrf or weighted; got '{RETRIEVAL_HYBRID_RANKER}'"
    )
# How a level is decided: "model" (the calibrated estimate of the embedding model's level profile,
# retrieval/lookup/level_model.py; the seeds' rule when the model has none) or "thresholds" (the
# seeds' FS-1/FS-2 similarity thresholds, exactly; the FS acceptance tests run with it).
RETRIEVAL_LEVELS = env.str("RETRIEVAL_LEVELS", default="model").strip().lower()
if RETRIEVAL_LEVELS not in ("model", "thresholds"):
    raise ImproperlyConfigured(f"RETRIEVAL_LEVELS must be model or thresholds; got '{RETRIEVAL_LEVELS}'")
RETRIEVAL_RRF_K = env.int("RETRIEVAL_RRF_K", default=60)
RETRIEVAL_DENSE_WEIGHT = env.float("RETRIEVAL_DENSE_WEIGHT", default=0.5)
if not 0.0 <= RETRIEVAL_DENSE_WEIGHT <= 1.0:
    raise ImproperlyConfigured(
        f"RETRIEVAL_DENSE_WEIGHT must be between 0 and 1; got {RETRIEVAL_DENSE_WEIGHT}"
    )
RETRIEVAL_MAX_SUPPLEMENT = env.int("RETRIEVAL_MAX_SUPPLEMENT", default=3)
RETRIEVAL_TOP_K = env.int("RETRIEVAL_TOP_K", default=20)
RETRIEVAL_MAX_QUERY_CHARS = env.int("RETRIEVAL_MAX_QUERY_CHARS", default=2000)
# off | soft | hard (seed 000 Phase 2: hard blocks a lookup whose best result is in a retrieved domain)
RETRIEVAL_DOMAIN_DEDUP = env.str("RETRIEVAL_DOMAIN_DEDUP", default="soft")
RETRIEVAL_SESSION_TTL = env.int("RETRIEVAL_SESSION_TTL", default=24 * 60 * 60)
# Sessions one agent's action memory holds at once (Redis and in-process); past it its least
# recently used sessions are dropped (counted: retrieval.agents.tracker.sessions_evicted), so one
# agent minting a session per call cannot fill the store. 0 = no cap.
RETRIEVAL_MAX_SESSIONS_PER_AGENT = env.int("RETRIEVAL_MAX_SESSIONS_PER_AGENT", default=1000)
# memory | redis; empty = redis when REDIS_URL is set, else in-process.
RETRIEVAL_TRACKER_BACKEND = env.str("RETRIEVAL_TRACKER_BACKEND", default="")
# Each process re-reads the corpus signature (for the L0 index and cached L1 results) and the
# calibrated thresholds at most this often: uploads and deletes show up within it, no restart.
RETRIEVAL_INDEX_REFRESH_MS = env.int("RETRIEVAL_INDEX_REFRESH_MS", default=1000)
# Entries in each per-process LRU cache of query vectors and of L1 search hits (0 = off).
RETRIEVAL_QUERY_CACHE_SIZE = env.int("RETRIEVAL_QUERY_CACHE_SIZE", default=1024)
# The primary result carries its whole document up to this size, else the chunks around the match.
RETRIEVAL_CONTENT_MAX_CHARS = env.int("RETRIEVAL_CONTENT_MAX_CHARS", default=8000)
# The language agents are spoken to in: messages, completeness hints, the tool description, the
# executor and planner prompts, the MCP tool and prompt descriptions (retrieval/agents/texts.py).
# zh = the seeds' Chinese; en = English. An agent's profile (AgentProfile.language) may name the
# other one (retrieval.agents.language.agent_language). RETRIEVAL_HINT_LANGUAGE is its former name.
_AGENT_LANGUAGES = {"zh": "zh", "zh-hans": "zh", "en": "en"}
_agent_language = (
    env.str("AGENT_LANGUAGE", default="") or env.str("RETRIEVAL_HINT_LANGUAGE", default="") or "zh"
)
if _agent_language.strip().lower() not in _AGENT_LANGUAGES:
    raise ImproperlyConfigured(f"AGENT_LANGUAGE must be one of zh, en; got '{_agent_language}'")
AGENT_LANGUAGE = _AGENT_LANGUAGES[_agent_language.strip().lower()]
# The seeds' completeness hints (兜底信号) per relevance level and language. A RETRIEVAL_HINT_* set
# explicitly replaces the hint agents of AGENT_LANGUAGE get (an agent whose profile names the other
# language gets that language's text below).
COMPLETENESS_HINTS = {
    "zh": {
        "PRECISE": "知识库中不存在比上述结果更精准的文档",
        "HIGHLY_RELEVANT": "当前结果已高度相关，继续检索不太可能找到更精准的文档",
        "REFERENCE": "当前结果为相关参考，如需更精准信息请明确缺少的具体维度",
    },
    "en": {
        "PRECISE": "The knowledge base holds no document more precise than the results above.",
        "HIGHLY_RELEVANT": (
            "These results are highly relevant; searching again is unlikely to find a more precise document."
        ),
        "REFERENCE": (
            "These results are related references; for more precise information, first name the "
            "specific aspect that is missing."
        ),
    },
}
RETRIEVAL_HINT_LANGUAGE = AGENT_LANGUAGE
_hints = COMPLETENESS_HINTS[RETRIEVAL_HINT_LANGUAGE]
RETRIEVAL_HINT_PRECISE = env.str("RETRIEVAL_HINT_PRECISE", default="") or _hints["PRECISE"]
RETRIEVAL_HINT_HIGHLY_RELEVANT = (
    env.str("RETRIEVAL_HINT_HIGHLY_RELEVANT", default="") or _hints["HIGHLY_RELEVANT"]
)
RETRIEVAL_HINT_REFERENCE = env.str("RETRIEVAL_HINT_REFERENCE", default="") or _hints["REFERENCE"]

# MCP over streamable HTTP: open sessions one agent may hold at once, counted across every web
# worker (0 = no cap).
MCP_MAX_SESSIONS_PER_AGENT = env.int("MCP_MAX_SESSIONS_PER_AGENT", default=10)
# Seconds an MCP session lives without a request (every worker sees it: retrieval.entrypoints.mcp_sessions).
MCP_SESSION_IDLE_S = env.int("MCP_SESSION_IDLE_S", default=1800)
