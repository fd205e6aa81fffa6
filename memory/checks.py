"""System checks of the memory app (`manage.py check`, and before `migrate`, `runserver`, `serve_embedded`): a
misconfigured embedder stops the service at start, not at the first write that embeds."""
from django.conf import settings
from django.core.checks import Error, Warning, register

from memory.embedding import embedder
from memory.selectors import HNSW_DIM


@register()
def embedder_check(app_configs=None, **kwargs) -> list:
    try:
        model = embedder()
    except Exception as error:  # noqa: BLE001 - any failure to load is the finding
        return [Error(f"LEDGER_EMBEDDER {settings.LEDGER_EMBEDDER!r} cannot be loaded: {error!r}",
                      hint="a dotted path to an importable class; memory.embedding.WordLlamaEmbedder needs "
                           "the `semantic` extra: pip install -e '.[semantic]'",
                      id="memory.E001")]
    dim = getattr(model, "dim", None)
    if not isinstance(dim, int) or dim < 1 or not callable(getattr(model, "embed", None)):
        return [Error(f"LEDGER_EMBEDDER {settings.LEDGER_EMBEDDER!r} has no whole `dim` and `embed()`",
                      id="memory.E002")]
    ef_search = getattr(model, "hnsw_ef_search", None)
    if ef_search is not None and not (isinstance(ef_search, int) and 1 <= ef_search <= 1000):
        return [Error(f"LEDGER_EMBEDDER {settings.LEDGER_EMBEDDER!r} has an hnsw_ef_search of {ef_search!r}; "
                      "pgvector takes a whole number from 1 to 1000", id="memory.E003")]
    if dim != HNSW_DIM:
        return [Warning(f"LEDGER_EMBEDDER makes {dim}-dimensional vectors; the similarity index holds "
                        f"{HNSW_DIM}: every similarity search scans exactly (README, 'Similarity search')",
                        id="memory.W001")]
    return []
