from django.urls import path

from memory import api

urlpatterns = [
    path("records", api.RecordsView.as_view(), name="memory-records"),
    path("records/<int:record_id>", api.RecordView.as_view(), name="memory-record"),
    path("records/<int:record_id>/artifacts", api.RecordArtifactsView.as_view(), name="memory-record-artifacts"),
    path("search", api.SearchView.as_view(), name="memory-search"),
    path("forget", api.ForgetView.as_view(), name="memory-forget"),
    path("fleet-notices", api.FleetNoticesView.as_view(), name="memory-fleet-notices"),
    path("fleet-notices/<int:notice_id>/ack", api.FleetNoticeAckView.as_view(), name="memory-fleet-notice-ack"),
    path("confirm-erasure", api.ConfirmErasureView.as_view(), name="memory-confirm-erasure"),
]
