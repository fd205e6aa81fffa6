"""The OpenAPI schema at /api/schema/ generates without errors or warnings and validates."""
from django.core.management import call_command


def test_openapi_schema_generates_without_warnings_and_validates(db, tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    assert "/api/v1/memory/forget" in (tmp_path / "schema.yml").read_text()


def test_schema_is_served(client, db):
    response = client.get("/api/schema/")
    assert response.status_code == 200 and b"openapi" in response.content


def served_schema(client) -> dict:
    return client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()


def operations(schema):
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield f"{method.upper()} {path}", operation


def test_every_operation_documents_its_errors_as_the_error_envelope(client, db):
    schema = served_schema(client)
    error = schema["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"code", "detail"} and error.get("additionalProperties", True) is not False
    for name, operation in operations(schema):
        public = operation.get("security") == [{}]
        expected = {"400", "404"} | ({"429"} if public else {"401", "403"})
        if "requestBody" in operation:
            expected |= {"413", "415"}
        assert expected <= set(operation["responses"]), name
        for status in expected:
            assert operation["responses"][status]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/Error"}, (name, status)


def test_request_bodies_that_refuse_unknown_fields_say_so(client, db):
    schema = served_schema(client)
    for name, operation in operations(schema):
        if "requestBody" in operation:
            ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            body = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
            assert body["additionalProperties"] is False, name


def test_lists_are_documented_in_their_results_envelope(client, db):
    schema = served_schema(client)
    lists = [(name, operation) for name, operation in operations(schema) if operation["operationId"].endswith("_list")]
    assert len(lists) == 7
    for name, operation in lists:
        ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        page = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
        assert page["type"] == "object" and page["properties"]["results"]["type"] == "array", name
