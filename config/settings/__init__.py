"""agentkb settings, split by concern. Every value comes from the environment (config.env).

The embedded default (no variables set) needs no server: SQLite, milvus-lite and a filesystem
Celery broker, all under ``var/``. Production sets DATABASE_URL, REDIS_URL and MILVUS_URI.
"""

from config.settings.api import *  # noqa: F403
from config.settings.core import *  # noqa: F403
from config.settings.database import *  # noqa: F403
from config.settings.knowledge import *  # noqa: F403
from config.settings.observability import *  # noqa: F403
from config.settings.retrieval import *  # noqa: F403
from config.settings.services import *  # noqa: F403

# Each app's settings module names its own beat entries; beat reads one schedule.
CELERY_BEAT_SCHEDULE = {**CELERY_BEAT_SCHEDULE, **KNOWLEDGE_BEAT_SCHEDULE}  # noqa: F405
