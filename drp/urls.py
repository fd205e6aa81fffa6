"""The DRP endpoints, at the paths of DRP 0.9.4 (the exercise path also with the trailing slash of versions
before 0.9.3). Included at "" by config/urls.py: every path here is specific to the protocol."""
from django.urls import path, re_path

from drp import api

urlpatterns = [
    path(".well-known/data-rights.json", api.DiscoveryView.as_view(), name="drp-discovery"),
    re_path(r"^v1/data-rights-request/?$", api.ExerciseView.as_view(), name="drp-exercise"),
    path("v1/data-rights-request/<str:request_id>", api.RequestView.as_view(), name="drp-request"),
    path("v1/agent/<str:agent_id>", api.AgentView.as_view(), name="drp-agent"),
]
