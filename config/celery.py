"""The Celery app. The beat schedule lives in the database (django-celery-beat), editable in the admin."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# config.tasks is not an app's module, so autodiscovery would not find it.
app = Celery("ledger", include=["config.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
