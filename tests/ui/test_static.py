"""The page and its scripts are answerbox's own: served at /_answerbox/ui/, never sent on to OpenSearch."""

from __future__ import annotations

import re

import httpx
from answerbox.ui import SECURITY_HEADERS, STATIC_DIR

from tests.conftest import RecordedFactory


def test_page_and_modules_are_served_by_answerbox(recorded_answerbox: RecordedFactory, client: httpx.Client) -> None:
    recorder, url = recorded_answerbox()
    redirect = client.get(f"{url}/_answerbox/ui?index=squad&q=x")
    page = client.get(f"{url}/_answerbox/ui/")
    modules = {
        name: client.get(f"{url}/_answerbox/ui/{name}")
        for name in ("answerbox.js", "page.js", "render.js", "check.js", "sse.js", "conversation.js")
    }
    missing = client.get(f"{url}/_answerbox/ui/nothing.js")
    # Relative, so it also works behind a proxy that mounts answerbox under a prefix.
    assert redirect.status_code == 308
    assert redirect.headers["location"] == "ui/?index=squad&q=x"
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    for response in (page, *modules.values()):
        assert {k: response.headers.get(k) for k in SECURITY_HEADERS} == SECURITY_HEADERS
    assert "frame-ancestors 'self'" in page.headers["content-security-policy"]
    assert '<answer-box id="box">' in page.text
    for name, response in modules.items():
        # Browsers refuse module scripts served with any other type.
        assert response.status_code == 200, name
        assert response.headers["content-type"].startswith("text/javascript"), name
        assert response.text == (STATIC_DIR / name).read_text()
    assert missing.status_code == 404
    assert not [r.path for r in recorder.requests if r.path.startswith("/_answerbox")]


def test_every_module_the_page_imports_is_shipped() -> None:
    for script in STATIC_DIR.glob("*.js"):
        for imported in re.findall(r'^import .*?"\./([\w.]+)";$', script.read_text(), re.MULTILINE):
            assert (STATIC_DIR / imported).is_file(), f"{script.name} imports missing {imported}"
