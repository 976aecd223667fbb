"""The answer box page is served by answerbox itself, with headers that keep it from being framed,
sniffed or made to load another site's scripts."""

from __future__ import annotations

import httpx
import pytest
from answerbox.ui import SECURITY_HEADERS, UI_PATH


@pytest.mark.parametrize(
    "path", [f"{UI_PATH}/", f"{UI_PATH}/index.html", f"{UI_PATH}/answerbox.js", f"{UI_PATH}/page.css"]
)
async def test_every_ui_file_carries_the_security_headers(app_client: httpx.AsyncClient, path: str) -> None:
    response = await app_client.get(path)
    assert response.status_code == 200
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value
    assert "frame-ancestors 'self'" in response.headers["content-security-policy"]
    assert "script-src 'self';" in response.headers["content-security-policy"]


async def test_the_page_is_html_and_its_modules_are_javascript(app_client: httpx.AsyncClient) -> None:
    page = await app_client.get(f"{UI_PATH}/")
    assert page.headers["content-type"].startswith("text/html")
    assert "<answer-box" in page.text
    script = await app_client.get(f"{UI_PATH}/answerbox.js")
    assert script.headers["content-type"].split(";")[0] in {"text/javascript", "application/javascript"}


async def test_the_bare_path_redirects_to_the_directory_keeping_the_query(app_client: httpx.AsyncClient) -> None:
    response = await app_client.get(UI_PATH, params={"index": "squad"})
    assert response.status_code == 308
    assert response.headers["location"] == "ui/?index=squad"


async def test_a_missing_ui_file_is_a_404_with_the_security_headers(app_client: httpx.AsyncClient) -> None:
    response = await app_client.get(f"{UI_PATH}/missing.js")
    assert response.status_code == 404
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value
