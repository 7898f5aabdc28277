"""Ingestion: upload limits and chunking; upkeep of the index (pending sweep, nightly check)."""

from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from config.env import VAR_DIR, env

INGEST_MAX_FILE_BYTES = env.int("INGEST_MAX_FILE_BYTES", default=5 * 1024 * 1024)
INGEST_MAX_FILES_PER_UPLOAD = env.int("INGEST_MAX_FILES_PER_UPLOAD", default=200)
INGEST_MAX_UNZIPPED_BYTES = env.int("INGEST_MAX_UNZIPPED_BYTES", default=50 * 1024 * 1024)
# Converted formats (PDF, DOCX, PPTX, XLSX, CSV, HTML; knowledge/converters): the conversion runs
# in a child process of the worker with this memory ceiling and time limit, so a hostile file
# costs that child, not the worker. Past INGEST_MAX_PDF_PAGES pages (or slides) or
# INGEST_MAX_CONVERTED_CHARS characters of text a file is refused.
INGEST_CONVERT_TIMEOUT_SECONDS = env.float("INGEST_CONVERT_TIMEOUT_SECONDS", default=120.0)
INGEST_CONVERT_MEMORY_MB = env.int("INGEST_CONVERT_MEMORY_MB", default=1024)
INGEST_MAX_PDF_PAGES = env.int("INGEST_MAX_PDF_PAGES", default=2000)
INGEST_MAX_CONVERTED_CHARS = env.int("INGEST_MAX_CONVERTED_CHARS", default=5_000_000)
# The bulk paths (bulk upload, zips, import_documents, sync_documents, reindex) queue indexing
# tasks of this many documents: their chunks fill embedding batches and one Milvus upsert.
INGEST_INDEX_BATCH_DOCUMENTS = env.int("INGEST_INDEX_BATCH_DOCUMENTS", default=32)
CHUNK_TARGET_CHARS = env.int("CHUNK_TARGET_CHARS", default=800)
CHUNK_OVERLAP_CHARS = env.int("CHUNK_OVERLAP_CHARS", default=100)
# Django refuses requests with more than 100 files before any view runs (a bare 400); let one
# over the ingestion limit through so the bulk page can say which limit was broken.
DATA_UPLOAD_MAX_NUMBER_FILES = max(100, INGEST_MAX_FILES_PER_UPLOAD + 1)

# --- Lexical index (knowledge/lexical) -----------------------------------------------------------
# Where BM25 over the chunk text lives. auto: a tantivy index in LEXICAL_INDEX_DIR when the vector
# store is milvus-lite (a file or a milvus-lite server) or a Milvus server without the BM25
# function (before 2.5); Milvus's own BM25 in the collection on a Milvus >= 2.5 server.
# tantivy / milvus force one. Decided at start and logged.
LEXICAL_ENGINE = env.str("LEXICAL_ENGINE", default="auto")
# The tantivy index folder: one writer at a time (a file lock), every process on this machine reads.
LEXICAL_INDEX_DIR = env.str("LEXICAL_INDEX_DIR", default=str(VAR_DIR / "lexical"))
# Memory of the tantivy writer (one thread; tantivy's floor is 15 MB): it flushes a segment when full.
LEXICAL_WRITER_HEAP_MB = env.int("LEXICAL_WRITER_HEAP_MB", default=50)

# --- Knowledge domain map (seed 004 Part B) ------------------------------------------------------
# A domain's when_to_retrieve is regenerated this many seconds after the last change to its
# documents: a burst of uploads inside the window costs one LLM call.
DOMAIN_SUMMARY_DEBOUNCE_SECONDS = env.float("DOMAIN_SUMMARY_DEBOUNCE_SECONDS", default=10.0)
# ... but never later than this after the first change still waiting for one: steady uploads
# into a domain cannot postpone its summary forever.
DOMAIN_SUMMARY_MAX_DELAY_SECONDS = env.float("DOMAIN_SUMMARY_MAX_DELAY_SECONDS", default=300.0)
# The planner's knowledge map (YAML) is kept within this many characters: above it each domain
# lists its most useful documents and a count of the rest (0 = no budget).
PLANNER_MAP_MAX_CHARS = env.int("PLANNER_MAP_MAX_CHARS", default=24_000)

# --- Upkeep (knowledge/services/maintenance.py) ---------------------------------------------------
# A document PENDING this long is queued again by the sweep (its message was lost or the broker
# was down at upload); younger ones are most likely still in the queue.
INGEST_REQUEUE_AFTER_SECONDS = env.int("INGEST_REQUEUE_AFTER_SECONDS", default=300)
# An indexing run holds a lease on its documents, renewed every INDEX_LEASE_RENEW_SECONDS and
# good for INDEX_LEASE_SECONDS (several renewals, so a busy machine does not lose it); a lease
# that lapsed means the run died, and the sweep, run every INGEST_SWEEP_INTERVAL_SECONDS, queues
# the document again at once: a killed worker costs about INDEX_LEASE_SECONDS + the interval.
INDEX_LEASE_SECONDS = env.float("INDEX_LEASE_SECONDS", default=45.0)
INDEX_LEASE_RENEW_SECONDS = env.float("INDEX_LEASE_RENEW_SECONDS", default=10.0)
INGEST_SWEEP_INTERVAL_SECONDS = env.float("INGEST_SWEEP_INTERVAL_SECONDS", default=30.0)
if INDEX_LEASE_RENEW_SECONDS * 2 > INDEX_LEASE_SECONDS:
    raise ImproperlyConfigured(
        "INDEX_LEASE_RENEW_SECONDS must be at most half of INDEX_LEASE_SECONDS "
        f"({INDEX_LEASE_RENEW_SECONDS} and {INDEX_LEASE_SECONDS} given): a lease renewed less often "
        "lapses while its run is still alive"
    )
# Hour (UTC) of the nightly `check_index --repair` run by beat.
INDEX_CHECK_HOUR = env.int("INDEX_CHECK_HOUR", default=3)
# Folders beat mirrors (`sync_documents` on a schedule): "path=domain,other/path=" (an empty
# domain: from the subfolders / frontmatter), every SYNC_INTERVAL_SECONDS; SYNC_PRUNE deletes
# documents whose file is gone.
SYNC_SOURCES = env.dict("SYNC_SOURCES", default={})
SYNC_INTERVAL_SECONDS = env.int("SYNC_INTERVAL_SECONDS", default=15 * 60)
SYNC_PRUNE = env.bool("SYNC_PRUNE", default=False)
KNOWLEDGE_BEAT_SCHEDULE = {
    "knowledge-pending-requeue": {
        "task": "knowledge.pending_documents_requeue",
        "schedule": INGEST_SWEEP_INTERVAL_SECONDS,
    },
    "knowledge-index-check": {
        "task": "knowledge.index_check",
        "schedule": crontab(hour=INDEX_CHECK_HOUR, minute=17),
    },
}
if SYNC_SOURCES:
    KNOWLEDGE_BEAT_SCHEDULE["knowledge-sync-sources"] = {
        "task": "knowledge.sync_sources",
        "schedule": SYNC_INTERVAL_SECONDS,
    }
