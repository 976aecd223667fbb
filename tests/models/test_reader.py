from __future__ import annotations

import asyncio
import math

import pytest
from answerbox.models import Models, Reader, ReaderSpan
from answerbox.models.manifest import ModelManifest
from answerbox.models.windows import WindowTokenizer, load_tokenizer

from onnx_models.calibrate.span_cover import read_at_margins
from onnx_models.data.squad import Paragraph, Question
from tests.support.repo import REPO_ROOT

QUESTION = "Which team won Super Bowl 50?"
GOLD = (
    "Super Bowl 50 was an American football game to determine the champion of the National Football League "
    "(NFL) for the 2015 season. The American Football Conference (AFC) champion Denver Broncos defeated the "
    "National Football Conference (NFC) champion Carolina Panthers 24–10 to earn their third Super Bowl title."
)
# Accents, odd spacing, non-ASCII punctuation and a passage long enough to need several windows.
PASSAGES = [
    GOLD,
    "  Café   Müller — “quoted”  text,\twith\ttabs\nand newlines.  ",
    " ".join(f"Sentence number {i} mentions the Broncos of Denver in passing." for i in range(40)),
    "",
]


async def test_spans_map_back_to_the_original_passage(reader_models: Models) -> None:
    spans = await reader_models.reader.read(QUESTION, PASSAGES)
    assert len(spans) == len(PASSAGES)
    for passage, span in zip(PASSAGES, spans, strict=True):
        assert isinstance(span, ReaderSpan)
        assert passage[span.start : span.end] == span.text
        assert math.isfinite(span.confidence)
    assert spans[-1].text == ""


async def test_reader_and_evaluator_share_one_forward_pass(reader_models: Models) -> None:
    question = "Who scored the winning goal?"
    await reader_models.reader.read(question, PASSAGES[:2])
    after_read = reader_models.encoder.batcher.stats.items
    scores = await reader_models.evaluator.score(question, PASSAGES[:2])
    assert reader_models.encoder.batcher.stats.items == after_read  # scoring reused the reader's pass
    assert all(-1.0 <= s <= 1.0 for s in scores)


async def test_concurrent_reads_keep_each_callers_order(reader_models: Models) -> None:
    questions = [f"question number {i}?" for i in range(8)]
    results = await asyncio.gather(*(reader_models.reader.read(q, PASSAGES[:3]) for q in questions))
    assert [len(r) for r in results] == [3] * 8
    alone = await reader_models.reader.read(questions[5], PASSAGES[:3])
    assert results[5] == alone


def test_long_passages_are_windowed_with_overlap(reader_models: Models) -> None:
    manifest: ModelManifest = reader_models.manifest
    tokenizer = WindowTokenizer(
        load_tokenizer(reader_models.directory / manifest.tokenizer),
        max_length=manifest.max_length,
        stride=manifest.stride,
    )
    windows = tokenizer.windows(QUESTION, [PASSAGES[2]])
    assert len(windows) > 1
    assert all(len(w) <= manifest.max_length for w in windows)
    first_end = windows[0].offsets[windows[0].context_end][1]
    second_start = windows[1].offsets[windows[1].context_start][0]
    assert second_start < first_end  # consecutive windows overlap by `stride` tokens


# Each question with the answers it accepts, as SQuAD lists several per question: a span that
# names the team without its city is as right as the full name.
EASY = [
    ("Which team did the Denver Broncos defeat?", ("Carolina Panthers", "Panthers")),
    ("Which NFL team represented the AFC at Super Bowl 50?", ("Denver Broncos",)),
    ("Who won Super Bowl 50?", ("Denver Broncos",)),
    ("What was the final score of Super Bowl 50?", ("24–10",)),
    ("Which season did Super Bowl 50 decide the champion of?", ("2015",)),
]


async def test_default_model_answers_easy_questions(reader_models: Models) -> None:
    """Every span holds an answer, inside the sentence that says it. The shown span covers the
    reader's near-best boundaries (``manifest.span_cover_margin``), so it may say more than the
    answer (for the AFC's team: "Denver Broncos defeated ... Carolina Panthers"); a span's edges
    are where a small reader errs, so no exact span is pinned."""
    if not reader_models.manifest.calibration:
        pytest.skip("onnx_models/default is not exported yet; the tiny random model cannot answer")
    spans = [(await reader_models.reader.read(question, [GOLD]))[0] for question, _ in EASY]
    pairs = list(zip(spans, EASY, strict=True))
    assert all(any(a in span.text for a in answers) for span, (_, answers) in pairs), [s.text for s in spans]
    assert all(any(span.text in sentence for sentence in GOLD.split(". ")) for span in spans), [s.text for s in spans]
    assert all(span.probability <= span.covered_probability for span in spans)
    assert spans[0].confidence > reader_models.manifest.theta  # the gate SearChain corrects by
    [gold_score, noise_score] = await reader_models.evaluator.score(QUESTION, [GOLD, PASSAGES[1]])
    assert gold_score > noise_score


def test_a_question_longer_than_the_window_is_clipped_not_a_crash() -> None:
    tokenizer = load_tokenizer(REPO_ROOT / "onnx_models" / "default" / "tokenizer.json")
    windows = WindowTokenizer(tokenizer, max_length=48, stride=16).windows(
        "what is the answer " * 100, ["a passage about many things " * 40]
    )
    assert len(windows) > 1
    assert all(len(w.ids) <= 48 for w in windows)


async def test_a_wider_cover_shows_the_best_span_and_more(reader_models: Models) -> None:
    margins = (0.0, 1.0, 3.0)
    questions = [
        (Paragraph("p", "a", GOLD, ()), Question(str(n), question, answers, ()))
        for n, (question, answers) in enumerate(EASY)
    ]
    shown = await read_at_margins(reader_models, questions, margins)
    for n in range(len(EASY)):
        texts = [shown[m][n] for m in margins]
        assert all(text in GOLD for text in texts)
        assert texts[0] in texts[1], texts
        assert texts[1] in texts[2], texts
    # The reader's own chance that the answer lies in what it shows grows with what it shows.
    readers = [Reader(reader_models.encoder, max_answer_tokens=30, cover_margin=m) for m in margins]
    spans = [(await r.read(EASY[0][0], [GOLD]))[0] for r in readers]
    assert spans[0].probability <= spans[0].covered_probability
    assert spans[0].covered_probability <= spans[1].covered_probability <= spans[2].covered_probability <= 1
    assert len({s.probability for s in spans}) == 1  # the best span's, whatever is shown
