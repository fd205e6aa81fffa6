from django.urls import path

from . import api, views

urlpatterns = [
    path(".well-known/tombstone-keys.json", api.KeySetView.as_view(), name="tombstone-keys"),
    path("api/v1/log/checkpoint", api.CheckpointView.as_view(), name="log-checkpoint"),
    path("api/v1/log/inclusion", api.InclusionView.as_view(), name="log-inclusion"),
    path("api/v1/log/consistency", api.ConsistencyView.as_view(), name="log-consistency"),
    path("api/v1/tombstones/<str:tombstone_id>", api.TombstoneView.as_view(), name="tombstone-detail"),
    path("verify/", views.verify_page, name="verify"),
    path("verify/verify.js", views.verify_script, name="verify-script"),
    path("verify/spec", views.verify_spec, name="verify-spec"),
]
