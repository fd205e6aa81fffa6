from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory store"

    def ready(self) -> None:
        from memory import lookups  # noqa: F401  (registers the `any_of` lookup)
