"""The embedded default under test: answerbox in front of osmem-server holding the sample
corpus, and a scripted LLM that answers the way a model that read the evidence would."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from answerbox.app import create_app
from answerbox.core.config import Settings
from answerbox.ops.embedded import SAMPLE_INDEX

from tests.support.repo import REPO_ROOT
from tests.support.scripted_llm import ScriptedLLM
from tests.support.servers import serve

__all__ = ["MODEL_READY", "QUESTION", "SAMPLE_INDEX", "Oracle", "Stack", "embedded_stack"]

QUESTION = "Where was Super Bowl 50 played?"
MODEL_READY = (REPO_ROOT / "onnx_models" / "default" / "manifest.json").is_file()
# The first snippet line's first sentence, or the whole line (a title strip has no stop).
_FIRST_SENTENCE = re.compile(r"^snippet: (.+?)(?:[.!?](?=\s|$)|$)", re.MULTILINE)


@dataclass
class Oracle:
    """A scripted LLM's replies. A FreshPrompt prompt (it ends in ``answer:``) gets the
    first sentence of evidence block [1], cited, when ``cite`` (a claim the evidence
    supports whatever the retrieval kept), else an answer with no citation, followed by
    ``stray`` (a sentence for the check to flag); any other prompt (expansion, keyword
    rewrite) gets ``keywords``."""

    cite: bool = True
    stray: str = ""
    keywords: str = "Super Bowl 50, stadium, venue"
    prompts: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)

    def __call__(self, messages: list[dict[str, str]]) -> str:
        prompt = messages[-1]["content"]
        self.prompts.append(prompt)
        if not prompt.rstrip().endswith("answer:"):
            return self.keywords
        # This question's evidence comes after the last "query:" (the demonstrations come first).
        first = _FIRST_SENTENCE.search(prompt.rsplit("\nquery: ", 1)[-1])
        answer = f"{first.group(1)} [1]." if self.cite and first else "The evidence does not say."
        answer = f"{answer} {self.stray}".strip()
        self.answers.append(answer)
        return answer


@dataclass(frozen=True)
class Stack:
    url: str
    opensearch_url: str
    llm: ScriptedLLM
    oracle: Oracle


@contextmanager
def embedded_stack(opensearch_url: str, oracle: Oracle | None = None) -> Iterator[Stack]:
    """answerbox in front of ``opensearch_url`` (holding the sample corpus), its LLM scripted by ``oracle``."""
    oracle = oracle or Oracle()
    llm = ScriptedLLM(replies=[oracle])
    with serve(llm.app()) as llm_url:
        settings = Settings.load(opensearch={"url": opensearch_url}, llm={"base_url": f"{llm_url}/v1"})
        with serve(create_app(settings)) as url:
            yield Stack(url=url, opensearch_url=opensearch_url, llm=llm, oracle=oracle)
