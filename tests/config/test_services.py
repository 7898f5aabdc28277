"""The service-backed run really reaches MariaDB, Redis and a Celery worker process."""

import uuid

import pytest
from django.core.cache import cache
from django.db import connection

pytestmark = pytest.mark.services


@pytest.mark.django_db
def test_database_is_mariadb_with_utf8mb4():
    assert connection.vendor == "mysql"
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@character_set_database")
        assert cursor.fetchone()[0] == "utf8mb4"


def test_cache_is_redis():
    key = f"probe-{uuid.uuid4().hex}"
    cache.set(key, "值", 30)
    assert cache.get(key) == "值"
    from django_redis import get_redis_connection

    assert get_redis_connection("default").ping()


def test_a_real_worker_process_answers_on_the_redis_broker(celery_worker):
    from config.celery import app

    assert app.conf.broker_url.startswith("redis://")
    replies = app.control.ping(timeout=5.0)
    assert replies, "no worker answered the broadcast ping"
    assert celery_worker.poll() is None
