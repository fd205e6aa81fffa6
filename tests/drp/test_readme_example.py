"""The README's DRP example ("Authorized agents (Data Rights Protocol)") runs as written, so it cannot drift:
the signing tool and the register command as subprocess and command, the curl lines against the test server."""
import io
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from tests.drp.conftest import assert_valid
from tests.test_readme import curl_parts, marked_block

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_readme_drp_example_runs_as_written(tmp_path):
    lines = marked_block("drp-example").splitlines()
    commands = [shlex.split(line.split(" > ")[0]) for line in lines]
    assert [c[0] for c in commands] == [".venv/bin/python"] * 3 + ["curl"] * 2
    env = {"PYTHONPATH": str(ROOT)}

    def python(argv):  # the README's `.venv/bin/python -m drp.sign ...`, in a scratch directory
        done = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, check=True,
                              timeout=60, env=env)
        return done.stdout

    # When each runs, in order
    verify_key = python(commands[0]).strip()
    assert commands[1][1:3] == ["manage.py", "drp_agent_register"]
    out = io.StringIO()
    call_command(*[a.replace("$VERIFY_KEY", verify_key) for a in commands[1][2:]], stdout=out)
    token = out.getvalue().strip()
    assert lines[2].endswith(" > request.txt")
    (tmp_path / "request.txt").write_text(python(commands[2]))
    client, answers = APIClient(), []
    for argv in commands[3:]:
        method, url, headers, body = curl_parts(argv, files=tmp_path)
        url = url.replace("$BASE", "").replace("$REQUEST_ID", answers[0]["request_id"] if answers else "")
        auth = headers.pop("Authorization").replace("$AGENT_TOKEN", token)
        response = client.generic(method, url, body or "", content_type=headers.get("Content-Type"),
                                  HTTP_AUTHORIZATION=auth)
        assert response.status_code == 200, (argv, response.content)
        answers.append(response.json())
    # Then both answers are the same valid status, and the README shows its shape and values
    for answer in answers:
        assert_valid(answer, "exercise-status")
    assert answers[0] == answers[1]
    shown = json.loads(marked_block("drp-answer"))
    assert list(shown) == list(answers[0]), answers[0]
    assert (shown["status"], shown["processing_details"]) == (answers[0]["status"], answers[0]["processing_details"])
