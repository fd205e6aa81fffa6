from django.urls import path

from retention import api

urlpatterns = [
    path("retention/classes", api.ContentClassesView.as_view(), name="retention-classes"),
    path("retention/rules", api.RulesView.as_view(), name="retention-rules"),
    path("retention/rules/<int:rule_id>", api.RuleView.as_view(), name="retention-rule"),
    path("retention/rules/<int:rule_id>/retire", api.RuleRetireView.as_view(), name="retention-rule-retire"),
    path("holds", api.HoldsView.as_view(), name="holds"),
    path("holds/<int:hold_id>/release", api.HoldReleaseView.as_view(), name="hold-release"),
]
