"""The lookup: normalisation thresholds, supplements, action memory (seed 000, FS-1..FS-3)."""

from config.env import env

RETRIEVAL_MAX_L2_DISTANCE = env.float("RETRIEVAL_MAX_L2_DISTANCE", default=2.0)
RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD = env.float("RETRIEVAL_HIGHLY_RELEVANT_THRESHOLD", default=0.75)
RETRIEVAL_REFERENCE_THRESHOLD = env.float("RETRIEVAL_REFERENCE_THRESHOLD", default=0.5)
RETRIEVAL_MAX_SUPPLEMENT = env.int("RETRIEVAL_MAX_SUPPLEMENT", default=3)
RETRIEVAL_TOP_K = env.int("RETRIEVAL_TOP_K", default=20)
RETRIEVAL_MAX_QUERY_CHARS = env.int("RETRIEVAL_MAX_QUERY_CHARS", default=2000)
# off | soft | hard (seed 000 Phase 2: hard blocks a lookup whose best result is in a retrieved domain)
RETRIEVAL_DOMAIN_DEDUP = env.str("RETRIEVAL_DOMAIN_DEDUP", default="soft")
RETRIEVAL_SESSION_TTL = env.int("RETRIEVAL_SESSION_TTL", default=24 * 60 * 60)
# memory | redis; empty = redis when REDIS_URL is set, else in-process.
RETRIEVAL_TRACKER_BACKEND = env.str("RETRIEVAL_TRACKER_BACKEND", default="")
