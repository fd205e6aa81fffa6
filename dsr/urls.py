from django.urls import path

from dsr import api

urlpatterns = [
    path("requests", api.RequestsView.as_view(), name="requests"),
    path("requests/<int:request_id>", api.RequestView.as_view(), name="request"),
    path("requests/<int:request_id>/verify-identity", api.VerifyIdentityView.as_view(), name="request-verify-identity"),
    path("requests/<int:request_id>/reject-identity", api.RejectIdentityView.as_view(), name="request-reject-identity"),
    path("requests/<int:request_id>/start", api.StartView.as_view(), name="request-start"),
    path("requests/<int:request_id>/export", api.ExportView.as_view(), name="request-export"),
    path("requests/<int:request_id>/extend", api.ExtendView.as_view(), name="request-extend"),
]
