"""The OpenAPI schema at /api/schema/ generates without errors or warnings and validates."""
from django.core.management import call_command


def test_openapi_schema_generates_without_warnings_and_validates(db, tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    assert "/api/v1/memory/forget" in (tmp_path / "schema.yml").read_text()


def test_schema_is_served(client, db):
    response = client.get("/api/schema/")
    assert response.status_code == 200 and b"openapi" in response.content
