"""One hostile document must not break pipeline searches: text handling is linear (a run of
60,000 dots used to take the sentence and claim regexes minutes) and the model reads at most
``max_windows_per_passage`` windows of any passage, cut before it is tokenised. The shipped
tokenizer, no model; a pipeline search over such a document stays in
tests/reliability/test_pathological_documents.py."""

from __future__ import annotations

from answerbox.core.config import ModelSettings
from answerbox.models.manifest import ModelManifest
from answerbox.models.windows import WindowTokenizer, load_tokenizer
from answerbox.processors.text.claims import parse_claims
from answerbox.processors.text.sentences import sentence_spans

DOTS = "Spice is mined on Arrakis" + "." * 60_000


def test_text_handling_is_linear_on_runs_of_stops() -> None:
    assert sentence_spans("x" + "." * 60_000 + "y") == [(0, 60_002)]
    assert sentence_spans(DOTS + " Next one.") == [(0, len(DOTS)), (len(DOTS) + 1, len(DOTS) + 10)]
    assert [c.text for c in parse_claims("x" + "." * 60_000 + "y")] == ["x" + "." * 60_000 + "y"]


def test_a_passage_is_read_in_at_most_the_configured_windows() -> None:
    directory = ModelSettings().dir
    manifest = ModelManifest.load(directory)
    tokenizer = load_tokenizer(directory / manifest.tokenizer)
    capped = WindowTokenizer(tokenizer, max_length=manifest.max_length, stride=manifest.stride, max_windows=3)
    whole = WindowTokenizer(tokenizer, max_length=manifest.max_length, stride=manifest.stride)
    assert [w.passage_index for w in capped.windows("where is spice mined?", [DOTS, "short"])] == [0, 0, 0, 1]
    assert len(whole.windows("where is spice mined?", [DOTS])) > 100


class _Spy:
    """A tokenizer stand-in that records how much text it was asked to encode."""

    def __init__(self, real: object) -> None:
        self._real = real
        self.encoded: list[int] = []

    def encode_batch(self, pairs: list[tuple[str, str]]) -> object:
        self.encoded += [len(passage) for _, passage in pairs]
        return self._real.encode_batch(pairs)  # type: ignore[attr-defined]


def test_a_huge_document_is_cut_before_it_is_tokenised() -> None:
    """Tokenising all of a 10 MB text to keep its first 16 windows cost every search seconds."""
    directory = ModelSettings().dir
    manifest = ModelManifest.load(directory)
    capped = WindowTokenizer(
        load_tokenizer(directory / manifest.tokenizer),
        max_length=manifest.max_length,
        stride=manifest.stride,
        max_windows=16,
    )
    spy = _Spy(capped._tokenizer)
    capped._tokenizer = spy
    huge = "Spice is mined on Arrakis. " * 400_000  # 10.8 MB
    windows = capped.windows("where is spice mined?", [huge])
    assert len(windows) == 16
    assert windows[-1].passage_index == 0
    assert spy.encoded == [16 * manifest.max_length * 16]
    assert spy.encoded[0] < len(huge) / 100
