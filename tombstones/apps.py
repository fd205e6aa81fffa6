from django.apps import AppConfig


class TombstonesConfig(AppConfig):
    name = "tombstones"
    verbose_name = "Tombstones"
