from django.urls import path

from agents_mcp import views

urlpatterns = [
    path("mcp", views.mcp_endpoint, name="mcp"),
]
