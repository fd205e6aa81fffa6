from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from config.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/v1/memory/", include("memory.urls")),
    path("api/v1/", include("retention.urls")),
    path("api/v1/", include("dsr.urls")),
    path("", include("drp.urls")),
    path("api/v1/", include("audit_exports.urls")),
    path("", include("agents_mcp.urls")),
    path("", include("tombstones.urls")),
]

handler404 = "config.errors.json_not_found"
handler500 = "config.errors.json_server_error"
