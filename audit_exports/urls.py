from django.urls import path

from audit_exports import api

urlpatterns = [
    path("audit/exports/<str:name>", api.ExportView.as_view(), name="audit-export"),
]
