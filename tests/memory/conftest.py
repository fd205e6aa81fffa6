"""Fixtures of the memory tests that several files share."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memory import selectors
from memory.embedding import embedder


@pytest.fixture
def leaves():
    """The latest migrations, migrated back to at the end whatever the test left (the next tests need them), and
    what the selectors found out about the schema forgotten."""
    targets = MigrationExecutor(connection).loader.graph.leaf_nodes()
    yield targets
    MigrationExecutor(connection).migrate(targets)
    selectors._HNSW_PRESENT.clear()


@pytest.fixture
def embedder_as(settings):
    """`embedder_as(dotted)`: the service's embedder for the rest of the test (memory.embedding reads the setting
    once per process, so its cache is cleared here and at the end)."""
    def use(dotted: str):
        settings.LEDGER_EMBEDDER = dotted
        embedder.cache_clear()

    yield use
    embedder.cache_clear()
