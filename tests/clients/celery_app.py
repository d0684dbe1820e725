"""The Celery application of ``test_celery.py``: its worker runs this module in a process of its
own (``celery -A tests.clients.celery_app worker``), configured through the environment, so that
each test's worker reaches that test's server with queues and a container of its own."""

from __future__ import annotations

import os

from celery import Celery


def configure(broker: str, backend: str, prefix: str) -> Celery:
    """A Celery app whose broker is Azure Storage Queues (kombu's ``azurestoragequeues``) and whose
    results go to block blobs; ``prefix`` keeps one test's queues and results apart from
    another's. The worker polls an empty queue every half second rather than every second."""
    app = Celery("tabulae_clients", broker=broker, backend=backend)
    app.conf.update(
        broker_transport_options={"polling_interval": 0.5, "queue_name_prefix": f"{prefix}-"},
        azureblockblob_container_name=prefix,
        broker_connection_retry_on_startup=True,
        task_default_queue="work",
    )
    return app


app = configure(
    os.environ.get("TABULAE_CELERY_BROKER", "memory://"),
    os.environ.get("TABULAE_CELERY_BACKEND", "cache+memory://"),
    os.environ.get("TABULAE_CELERY_PREFIX", "celery"),
)


@app.task(name="tabulae.add")
def add(left: int, right: int) -> int:
    return left + right


@app.task(name="tabulae.fail")
def fail(reason: str) -> None:
    raise ValueError(reason)
