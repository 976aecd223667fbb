"""The copy-paste requests of deploy/ADMIN.md, read back as (method, path, body)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tests.support.repo import REPO_ROOT

__all__ = ["GUIDE", "AdminRequest", "admin_requests"]

GUIDE = REPO_ROOT / "deploy" / "ADMIN.md"
_SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
_CURL = re.compile(
    r"""curl -sS(?: -N)?(?: -X(?P<method>[A-Z]+))? "\$ANSWERBOX(?P<path>[^"]+)"""
    r""""(?: -H '[^']*')?(?: -d '(?P<body>[^']*)')?"""
)


@dataclass(frozen=True)
class AdminRequest:
    method: str
    path: str
    body: dict[str, Any] | None


def admin_requests() -> list[AdminRequest]:
    """Every curl of the guide's shell blocks, in order; a body that is not JSON raises."""
    found = []
    for block in _SHELL_BLOCK.findall(GUIDE.read_text()):
        for curl in _CURL.finditer(block):
            body = json.loads(curl["body"]) if curl["body"] else None
            found.append(AdminRequest(curl["method"] or "GET", curl["path"], body))
    return found
