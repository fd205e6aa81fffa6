"""README.md opens with the two commands, and .ci/run runs exactly those (it reads them from README.md)."""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(the line before the fence, the block's content) for every fenced block."""
    return [(m.group(1), m.group(2).strip()) for m in re.finditer(r"([^\n]*)\n```[a-z]*\n(.*?)\n```", text, re.S)]


def test_readme_opens_with_the_run_command_then_the_test_command():
    # Given the README up to its first section
    opening = README.split("\n## ", 1)[0]
    blocks = _fenced_blocks(opening)
    # Then its first two code blocks are the two marked commands, one line each
    assert [marker for marker, _ in blocks[:2]] == ["<!-- run-command -->", "<!-- test-command -->"]
    run, test = blocks[0][1], blocks[1][1]
    assert "\n" not in run and "\n" not in test
    assert run.startswith("python3.11 -m venv .venv && ") and run.endswith("manage.py serve_embedded")
    assert test.startswith("python3.11 -m venv .venv && ") and test.endswith(".venv/bin/pytest")
    # and nothing but a title and a line of explanation comes before them
    before = opening.split("<!-- run-command -->", 1)[0]
    assert "```" not in before


def test_ci_runs_the_commands_written_in_the_readme():
    blocks = dict(_fenced_blocks(README))
    printed = subprocess.run([str(ROOT / ".ci" / "run"), "--print-commands"], capture_output=True, text=True,
                             check=True, timeout=30).stdout.splitlines()
    assert printed == [blocks["<!-- run-command -->"], blocks["<!-- test-command -->"]]


# --- the subject-request example (issue 21, item 6): run as written, so that the README cannot drift ------

def marked_block(marker: str) -> str:
    """The fenced block that follows `<!-- marker -->` in the README."""
    return dict(_fenced_blocks(README))[f"<!-- {marker} -->"]


def curl_parts(argv: list[str], *, files: Path | None = None) -> tuple[str, str, dict, str | None]:
    """(method, url, headers, body) of one `curl` command line as the README writes them (-s, -X, -H, -d BODY,
    --data-binary @FILE read from `files`)."""
    assert argv[0] == "curl", argv
    method, url, headers, body, args = "GET", None, {}, None, iter(argv[1:])
    for arg in args:
        if arg == "-s":
            continue
        if arg == "-X":
            method = next(args)
        elif arg == "-H":
            name, value = next(args).split(":", 1)
            headers[name.strip()] = value.strip()
        elif arg == "-d":
            body = next(args)
        elif arg == "--data-binary" and files is not None:
            source = next(args)
            assert source.startswith("@"), source
            body = (files / source[1:]).read_text()
        else:
            assert url is None and not arg.startswith("-"), f"an option the test does not know: {arg}"
            url = arg
    return method, url, headers, body


def test_readme_subject_request_example_runs_as_written(db):
    import json

    from rest_framework.test import APIClient

    from memory.services.tokens import token_issue

    # Given an operator token of the demo tenant, and the README's commands
    _, key = token_issue(tenant_name="demo", role="operator")
    commands = [shlex.split(line) for line in marked_block("request-example").replace("\\\n", " ").splitlines()]
    assert [c[0] for c in commands] == ["curl"] * 4
    client, answers, request_id = APIClient(), [], None
    # When each runs, in order ($ID: the first answer's id)
    for argv in commands:
        method, url, headers, body = curl_parts(argv)
        url = url.replace("$BASE", "").replace("$ID", str(request_id))
        assert url.startswith("/api/v1/requests"), url
        auth = headers.pop("Authorization").replace("$OPERATOR_TOKEN", key)
        response = getattr(client, method.lower())(url, data=body, content_type=headers.get("Content-Type"),
                                                   HTTP_AUTHORIZATION=auth)
        assert response.status_code in (200, 201), (argv, response.content)
        answers.append(response.json())
        request_id = request_id or answers[0]["id"]
    # Then the request was received, verified and started, as the README says
    assert answers[0]["status"] == "received" and answers[1]["status"] == "verified"
    assert [h["action"] for h in answers[-1]["history"]] == ["received", "verify_identity", "workflow_started"]
    # and the answer the README shows has the shape and the values of the real first answer
    shown = json.loads(marked_block("request-answer"))
    actual = answers[0]
    assert list(shown) == list(actual), json.dumps(actual, indent=2)
    for name in ("type", "regulation", "channel", "contact_email", "status", "subject", "open_conflicts",
                 "progress", "extension", "closing_reason", "tombstone_ids"):
        assert shown[name] == actual[name], name
    assert list(shown["identity_verification"]) == list(actual["identity_verification"])
    assert [list(h) for h in shown["history"]] == [list(h) for h in actual["history"]]
