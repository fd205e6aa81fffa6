"""System checks of the memory app (`manage.py check`, and before `migrate`, `runserver`, `serve_embedded`): a
misconfigured embedder stops the service at start, not at the first write that embeds; and, where the database
is checked too (`manage.py check --database default`, `migrate`), vectors that another embedder made are told."""
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection

from memory.embedding import IDENTITY_MAX, embedder, identity_of
from memory.selectors import HNSW_DIM, _hnsw_index


@register()
def embedder_check(app_configs=None, **kwargs) -> list:
    try:
        model = embedder()
    except Exception as error:  # noqa: BLE001 - any failure to load is the finding
        return [Error(f"LEDGER_EMBEDDER {settings.LEDGER_EMBEDDER!r} cannot be loaded: {error!r}",
                      hint="a dotted path to an importable class; memory.embedding.WordLlamaEmbedder needs the "
                           "`wordllama` package (a dependency of this project: pip install -e .)",
                      id="memory.E001")]
    dim = getattr(model, "dim", None)
    if not isinstance(dim, int) or dim < 1 or not callable(getattr(model, "embed", None)):
        return [Error(f"LEDGER_EMBEDDER {settings.LEDGER_EMBEDDER!r} has no whole `dim` and `embed()`",
                      id="memory.E002")]
    ef_search = getattr(model, "hnsw_ef_search", None)
    if ef_search is not None and not (isinstance(ef_search, int) and 1 <= ef_search <= 1000):
        return [Error(f"LEDGER_EMBEDDER {settings.LEDGER_EMBEDDER!r} has an hnsw_ef_search of {ef_search!r}; "
                      "pgvector takes a whole number from 1 to 1000", id="memory.E003")]
    identity = identity_of(model)
    if not isinstance(identity, str) or len(identity) > IDENTITY_MAX:
        return [Error(f"LEDGER_EMBEDDER {settings.LEDGER_EMBEDDER!r} has an identity that is not a string of at most "
                      f"{IDENTITY_MAX} characters: {identity!r}", id="memory.E004")]
    if dim != HNSW_DIM:
        return [Warning(f"LEDGER_EMBEDDER makes {dim}-dimensional vectors; the similarity index holds "
                        f"{HNSW_DIM}: every similarity search scans exactly (README, 'Similarity search')",
                        id="memory.W001")]
    return []


@register(Tags.database)
def embeddings_check(app_configs=None, databases=None, **kwargs) -> list:
    """Live embeddings that the configured embedder did not make (LEDGER_EMBEDDER changed, or memory 0018 could
    not tell their maker): the similarity search passes over them until `manage.py reembed`."""
    from memory.services.reembed import embeddings_stale

    found = []
    for alias in databases or ():
        try:
            stale = embeddings_stale().using(alias).count()
        except DatabaseError:  # not migrated yet (`migrate` checks before it migrates)
            continue
        if stale:
            some = f"{stale} live embeddings were" if stale != 1 else "1 live embedding was"
            found.append(Warning(f"{some} made by another embedder than LEDGER_EMBEDDER's, in database {alias!r}: "
                                 "the similarity search does not find them until they are made again",
                                 hint="manage.py reembed (README, 'Changing the embedder')", id="memory.W002"))
    if DEFAULT_DB_ALIAS in (databases or ()) and _similarity_index_missing():
        found.append(Warning("the similarity index (memory 0016) is missing or invalid: every similarity search "
                             "scans exactly", hint="manage.py reembed --rebuild-index builds it (CONCURRENTLY)",
                             id="memory.W003"))
    return found


def _similarity_index_missing() -> bool:
    """Whether the store has the similarity index's column but not a valid index on it (a `reembed
    --rebuild-index` or a build of memory 0016 cut short)."""
    from memory.services.reembed import similarity_index

    try:
        return _hnsw_index() and similarity_index().index_valid(connection) is not True
    except DatabaseError:
        return False
