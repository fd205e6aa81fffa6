from django.apps import AppConfig


class DrpConfig(AppConfig):
    name = "drp"
    verbose_name = "Authorized agents (Data Rights Protocol)"
