from django.apps import AppConfig


class DsrConfig(AppConfig):
    name = "dsr"
    verbose_name = "Subject requests"
