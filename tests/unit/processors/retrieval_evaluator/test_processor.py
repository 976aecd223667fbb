"""``retrieval_evaluator`` (CRAG) in process: verdicts, refinement into strips, the corrective
search within the caller's scope, rerank and drop, and how it degrades. The evaluator scores
by a table of the words a passage holds, the keyword rewrite is a scripted LLM, the
corrective search a backend answering with given hits, time a fake clock."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from answerbox.core.contract import CorrectiveReport, HitScore, KnowledgeStrip, RetrievalReport
from answerbox.core.errors import ConfigError, LLMError, ModelError, UpstreamError
from answerbox.opensearch import JSON, Caller
from answerbox.pipeline.base import PipelineContext, Planning, SearchRequest
from answerbox.pipeline.caller_scope.scope import ScopedSearch, SearchScope
from answerbox.pipeline.limits.request_limits import ConfigContext
from answerbox.pipeline.run.deadline import Deadline
from answerbox.processors.registry import default_registry
from answerbox.processors.retrieval_evaluator import RetrievalEvaluator
from answerbox.processors.retrieval_evaluator.keywords import KEYWORDS_SCHEMA
from answerbox.processors.retrieval_evaluator.processor import EvaluatorPlan

from tests.unit.fake_services import FakeEvaluator, FakeServices, LLMCall, Reply, Slow, by_words, fake_models
from tests.unit.fakes import (
    BackendCall,
    FakeClock,
    RecordingBackend,
    ScriptedBackend,
    pipeline_context,
    responded,
    response_of,
    run_on,
)

EIFFEL = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
    "It is named after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889. "
    'Locally nicknamed "La dame de fer" (French for "Iron Lady"), it was the centrepiece of the 1889 World\'s Fair. '
    "The tower is 330 m tall, about the same height as an 81-storey building. "
    "It was the tallest man-made structure in the world until the Chrysler Building in New York was finished in 1930."
)
EVEREST = (
    "Mount Everest is Earth's highest mountain above sea level, in the Mahalangur Himal sub-range of the Himalayas. "
    "The China-Nepal border runs across its summit point. "
    "Its elevation of 8,848.86 m was most recently established in 2020 by the Chinese and Nepali authorities. "
    "The first recorded ascent was made by Edmund Hillary and Tenzing Norgay in 1953."
)
PHOTOSYNTHESIS = (
    "Photosynthesis is the process by which plants and algae convert light energy into chemical energy. "
    "It takes place mostly in the chloroplasts of leaf cells."
)
NILE = (
    "The Nile is a major north-flowing river in northeastern Africa. "
    "It flows into the Mediterranean Sea after crossing eleven countries."
)
NEWS = {
    "budget": "The city council approved a new budget for road repairs on Tuesday. The vote was seven to two.",
    "football": "The local team won the regional football championship after a penalty shoot-out on Saturday.",
}
TEXTS = {"eiffel": EIFFEL, "everest": EVEREST, "photosynthesis": PHOTOSYNTHESIS, "nile": NILE, **NEWS}
CORRECT_Q = "Which engineer's company designed and built the Eiffel Tower?"
EVEREST_Q = "When was the first recorded ascent of Mount Everest?"
# What the evaluator makes of a passage or strip, by the words it holds; anything else: -0.95.
SCORES = by_words({"Gustave Eiffel": 0.8, "Chrysler": 0.1, "1953": 0.7, "Everest": -0.6, "eleven countries": 0.3})
VERDICT_THRESHOLDS = {"upper": 0.4, "lower": -0.7}
ALICE = Caller(headers=(("authorization", "Basic YWxpY2U6czNjcjN0"),))
KEYWORDS = "Mount Everest, first recorded ascent"


def hit(doc_id: str, score: float = 1.0, index: str | None = None) -> JSON:
    index = index or ("news" if doc_id in NEWS else "wiki")
    return {"_index": index, "_id": doc_id, "_score": score, "_source": {"title": doc_id, "text": TEXTS[doc_id]}}


def strip(doc_id: str, first: str, last: str, score: float, index: str = "wiki") -> KnowledgeStrip:
    """The strip of ``doc_id``'s text from the sentence starting ``first`` to the one ending ``last``."""
    text = TEXTS[doc_id]
    start, end = text.index(first), text.index(last) + len(last)
    return KnowledgeStrip(index=index, id=doc_id, field="text", start=start, end=end, text=text[start:end], score=score)


def _evaluator(services: FakeServices, context: ConfigContext | None = None, **config: Any) -> RetrievalEvaluator:
    processor = RetrievalEvaluator.from_dict(
        {"text_fields": ["text"], **VERDICT_THRESHOLDS, **config}, services, context or ConfigContext()
    )
    assert isinstance(processor, RetrievalEvaluator)
    return processor


def _services(
    *replies: Reply, evaluator: FakeEvaluator | None = None, clock: FakeClock | None = None, **manifest: Any
) -> FakeServices:
    models = fake_models(evaluator=evaluator or FakeEvaluator(SCORES), **manifest)
    return FakeServices(replies=replies or (KEYWORDS,), models=models, clock=clock)


def _context(
    question: str,
    body: JSON | None = None,
    backend: RecordingBackend | None = None,
    clock: FakeClock | None = None,
    seconds: float = 60,
    index: str = "wiki",
) -> tuple[SearchRequest, PipelineContext]:
    request = SearchRequest(index=index, body=body or {"query": {"match": {"text": question}}}, params={}, caller=ALICE)
    scope = SearchScope.of(caller=ALICE, index=index, body=request.body, params={}, native=None, unscopable=None)
    ctx = pipeline_context(
        question=question,
        search=ScopedSearch(backend or RecordingBackend(), scope),
        deadline=Deadline(clock or FakeClock(), seconds=seconds),
    )
    return request, ctx


async def _judge(
    processor: RetrievalEvaluator, question: str, hits: list[JSON], **context: Any
) -> tuple[JSON, PipelineContext]:
    request, ctx = _context(question, **context)
    response = await responded(processor, request, response_of(hits), ctx)
    return response, ctx


def _retrieval(ctx: PipelineContext) -> RetrievalReport:
    assert ctx.report.retrieval is not None, ctx.report.warnings
    return ctx.report.retrieval


def _scores(*pairs: tuple[str, float], index: str = "wiki") -> list[HitScore]:
    return [HitScore(index=index, id=doc_id, score=score) for doc_id, score in pairs]


async def test_correct_verdict_refines_the_hits_into_cited_strips() -> None:
    services = _services()
    hits = [hit("eiffel", 3.0), hit("photosynthesis", 1.0)]
    response, ctx = await _judge(_evaluator(services, strips_top_k=2), CORRECT_Q, hits)
    # Kept strips come back in document order, with offsets that give back their exact text.
    assert ctx.report.retrieval == RetrievalReport(
        verdict="correct",
        upper=0.4,
        lower=-0.7,
        scores=_scores(("eiffel", 0.8), ("photosynthesis", -0.95)),
        action="refine",
        knowledge=[
            strip("eiffel", "The Eiffel Tower is", "World's Fair.", 0.8),
            strip("eiffel", "The tower is 330 m", "finished in 1930.", 0.1),
        ],
        corrective_query=None,
        corrective=None,
        reranked=False,
        dropped=0,
    )
    assert services.llm.calls == []
    assert response["hits"]["hits"] == hits  # refining changes no hit


async def test_incorrect_verdict_discards_hits_and_searches_elsewhere_as_the_caller() -> None:
    services = _services()
    backend = ScriptedBackend(lambda body: [hit("everest", 4.0), hit("photosynthesis", 1.0)])
    news = [hit("budget"), hit("football")]
    processor = _evaluator(services, corrective={"index": "wiki"})
    response, ctx = await _judge(processor, EVEREST_Q, news, body={"query": {"match_all": {}}}, backend=backend)
    assert ctx.report.retrieval == RetrievalReport(
        verdict="incorrect",
        upper=0.4,
        lower=-0.7,
        scores=_scores(("budget", -0.95), ("football", -0.95), index="news"),
        action="corrective_search",
        # Knowledge comes from the corrective hits only, refined as any hits are.
        knowledge=[strip("everest", "The first recorded", "in 1953.", 0.7)],
        corrective_query="Mount Everest first recorded ascent",
        corrective=CorrectiveReport(
            index="wiki",
            keywords=["Mount Everest", "first recorded ascent"],
            keywords_source="llm",
            scores=_scores(("everest", 0.7), ("photosynthesis", -0.95)),
        ),
        reranked=False,
        dropped=0,
    )
    (call,) = services.llm.calls
    assert call == LLMCall(
        messages=call.messages, max_tokens=32, stop=["\nquestion:"], model=None, timeout_s=20.0, schema=None
    )
    assert call.prompt.startswith("Extract at most three keywords separated by comma")
    assert call.prompt.endswith(f"question: {EVEREST_Q}\nquery:")
    # The discarded hits stay in the response untouched; the corrective search is the caller's.
    assert response["hits"]["hits"] == news
    corrective = {
        "multi_match": {
            "query": "Mount Everest first recorded ascent",
            "operator": "or",
            "fields": ["text"],
            "fuzziness": "AUTO",
            "prefix_length": 2,
        }
    }
    assert backend.calls == [
        BackendCall(
            "search",
            "wiki",
            {"size": 10, "query": {"bool": {"must": [corrective]}}, "_source": {"includes": ["text"], "excludes": []}},
            {},
            ALICE,
            None,
        )
    ]


@pytest.mark.parametrize(
    ("reply", "failure"),
    [
        (LLMError("the LLM answered 500"), "the LLM answered 500"),
        # Slower than half the processor's time left: the rewrite gives up, the processor does not time out.
        (Slow(10, KEYWORDS), "the LLM did not answer within 8s"),
        ("Paris", "the LLM gave no keywords from the question: 'Paris'"),
    ],
    ids=["llm-error", "llm-too-slow", "no-keywords"],
)
def test_llm_down_during_rewrite_still_runs_the_corrective_search(reply: Reply, failure: str) -> None:
    clock = FakeClock()
    services = _services(reply, clock=clock)
    backend = ScriptedBackend(lambda body: [hit("everest")])
    processor = _evaluator(services, corrective={"index": "wiki", "fuzziness": None})
    request, ctx = _context(EVEREST_Q, backend=backend, clock=clock, seconds=16, index="news")
    run_on(clock, responded(processor, request, response_of([hit("budget")]), ctx))
    retrieval = _retrieval(ctx)
    assert services.llm.calls[0].timeout_s == 8.0  # half the processor's 16 s
    assert retrieval.verdict == "incorrect"
    assert retrieval.corrective_query == "first recorded ascent Mount Everest"
    assert retrieval.corrective is not None
    assert retrieval.corrective.keywords_source == "fallback"
    assert retrieval.knowledge == [strip("everest", "The first recorded", "in 1953.", 0.7)]
    assert ctx.report.warnings == [f"[retrieval_evaluator] keyword rewrite used the question's own words: {failure}"]
    assert backend.calls[0].body["query"]["bool"]["must"] == [
        {"multi_match": {"query": "first recorded ascent Mount Everest", "operator": "or", "fields": ["text"]}}
    ]


def test_keywords_from_the_question_ask_the_llm_nothing() -> None:
    clock = FakeClock()
    services = _services(KEYWORDS, clock=clock)
    backend = ScriptedBackend(lambda body: [hit("everest")])
    processor = _evaluator(services, corrective={"index": "wiki", "fuzziness": None, "keywords": "question"})
    request, ctx = _context(EVEREST_Q, backend=backend, clock=clock, seconds=16, index="news")
    run_on(clock, responded(processor, request, response_of([hit("budget")]), ctx))
    retrieval = _retrieval(ctx)
    assert services.llm.calls == []
    assert retrieval.corrective is not None
    assert retrieval.corrective.keywords_source == "question"
    assert retrieval.corrective_query == "first recorded ascent Mount Everest"
    assert retrieval.knowledge == [strip("everest", "The first recorded", "in 1953.", 0.7)]
    assert ctx.report.warnings == []


async def test_ambiguous_verdict_keeps_both_sets_without_duplicates() -> None:
    services = _services("Nile, countries, cross")
    # The corrective search on the same index finds the Nile again (left out) and Everest.
    backend = ScriptedBackend(lambda body: [hit("nile"), hit("everest")])
    processor = _evaluator(services, top_n=1, strip_threshold=-1.0, strips_top_k=20, upper=0.95, lower=-1.0)
    question = "How many countries does the Nile cross?"
    _, ctx = await _judge(processor, question, [hit("nile"), hit("eiffel")], backend=backend)
    retrieval = _retrieval(ctx)
    assert (retrieval.verdict, retrieval.action) == ("ambiguous", "refine+corrective_search")
    assert retrieval.scores == _scores(("nile", 0.3))
    assert retrieval.corrective_query == "Nile countries cross"
    assert retrieval.corrective is not None
    assert retrieval.corrective.scores == _scores(("everest", 0.7))
    # Every strip is kept, so the knowledge shows both sets whole: the hits' first, then the corrective ones.
    assert retrieval.knowledge == [
        strip("nile", "The Nile", "eleven countries.", 0.3),
        strip("everest", "Mount Everest is", "Nepali authorities.", -0.6),
        strip("everest", "The first recorded", "in 1953.", 0.7),
    ]


async def test_an_ambiguous_search_set_to_refine_keeps_the_refined_hits_alone_and_an_incorrect_one_still_searches() -> (
    None
):
    backend = ScriptedBackend(lambda body: [hit("everest")])
    processor = _evaluator(_services(), ambiguous="refine", top_n=1, strip_threshold=-1.0, upper=0.95, lower=-1.0)
    _, ctx = await _judge(processor, "How many countries does the Nile cross?", [hit("nile")], backend=backend)
    retrieval = _retrieval(ctx)
    assert (retrieval.verdict, retrieval.action) == ("ambiguous", "refine")
    assert (retrieval.corrective_query, retrieval.corrective, backend.calls) == (None, None, [])
    assert retrieval.knowledge == [strip("nile", "The Nile", "eleven countries.", 0.3)]
    incorrect = _evaluator(_services(), ambiguous="refine", corrective={"index": "wiki"})
    _, ctx = await _judge(incorrect, EVEREST_Q, [hit("budget")], body={"query": {"match_all": {}}}, backend=backend)
    assert (_retrieval(ctx).verdict, _retrieval(ctx).action) == ("incorrect", "corrective_search")
    assert len(backend.calls) == 1


async def test_only_the_best_passages_at_or_above_lower_are_refined() -> None:
    # Strips of any score would be kept, but only the passages the evaluator did not rule out
    # are cut into strips (and scored), and at most strips_top_k of them.
    evaluator = FakeEvaluator(SCORES)
    hits = [hit("eiffel"), hit("everest"), hit("photosynthesis"), hit("nile")]
    processor = _evaluator(_services(evaluator=evaluator), strip_threshold=-1.0, strips_top_k=20, corrective=None)
    _, ctx = await _judge(processor, CORRECT_Q, hits)
    strips = [
        strip("eiffel", "The Eiffel Tower is", "World's Fair.", 0.8),
        strip("eiffel", "The tower is 330 m", "finished in 1930.", 0.1),
        strip("everest", "Mount Everest is", "Nepali authorities.", -0.6),
        strip("everest", "The first recorded", "in 1953.", 0.7),
        strip("nile", "The Nile", "eleven countries.", 0.3),
    ]
    assert _retrieval(ctx).knowledge == strips
    assert evaluator.calls == [
        (CORRECT_Q, [EIFFEL, EVEREST, PHOTOSYNTHESIS, NILE]),
        (CORRECT_Q, [s.text for s in strips]),  # photosynthesis (-0.95) is never cut up
    ]
    one = _evaluator(_services(), strip_threshold=-1.0, strips_top_k=1, lower=-1.0, corrective=None)
    _, ctx = await _judge(one, CORRECT_Q, hits)
    assert _retrieval(ctx).knowledge == strips[:1]


async def test_refined_into_passages_the_knowledge_is_each_passage_whole_with_no_more_model_calls() -> None:
    evaluator = FakeEvaluator(SCORES)
    hits = [hit("eiffel"), hit("everest"), hit("photosynthesis"), hit("nile")]
    processor = _evaluator(_services(evaluator=evaluator), refine="passages", strips_top_k=2, corrective=None)
    _, ctx = await _judge(processor, CORRECT_Q, hits)
    assert _retrieval(ctx).knowledge == [
        strip("eiffel", "The Eiffel Tower is", "finished in 1930.", 0.8),
        strip("everest", "Mount Everest is", "in 1953.", 0.7),  # the two best: nile (0.3) is third
    ]
    assert evaluator.calls == [(CORRECT_Q, [EIFFEL, EVEREST, PHOTOSYNTHESIS, NILE])]


TYPES = {cls.type_name: cls for cls in default_registry().types()}


BOTH = "refine+corrective_search"


@pytest.mark.parametrize(
    ("config", "later", "expected"),
    [
        ({}, [], ("strips", BOTH)),  # the knowledge goes to the caller as CRAG keeps it
        ({}, [{"cited_answer": {"mode": "extractive"}}], ("passages", "refine")),
        ({}, [{"cited_answer": {"mode": "generative"}}], ("strips", BOTH)),
        ({}, [{"cited_answer": {"mode": "auto"}}], ("strips", BOTH)),
        ({}, [{"chain_of_query": {}}, {"cited_answer": {"mode": "extractive"}}], ("passages", "refine")),
        ({}, [{"chain_of_query": {}}, {"cited_answer": {}}], ("strips", BOTH)),
        ({"refine": "strips", "ambiguous": BOTH}, [{"cited_answer": {"mode": "extractive"}}], ("strips", BOTH)),
        ({"refine": "passages", "ambiguous": "refine"}, [], ("passages", "refine")),
    ],
)
async def test_auto_keeps_crags_strips_and_ambiguous_search_unless_every_later_step_reads_passages(
    config: JSON, later: list[JSON], expected: tuple[str, str]
) -> None:
    services = _services()
    steps = [RetrievalEvaluator.from_dict(config, services, ConfigContext())] + [
        TYPES[name].from_dict(settings, services, ConfigContext()) for step in later for name, settings in step.items()
    ]
    plans = {step: await step.plan(Planning()) for step in steps[1:]}
    plan = await steps[0].plan(Planning(later=list(plans.items())))
    assert isinstance(plan, EvaluatorPlan)
    assert (plan.refine.value, plan.ambiguous.value) == expected


async def test_thresholds_default_to_the_manifest() -> None:
    services = _services(crag_upper=0.6, crag_lower=-0.8)
    processor = RetrievalEvaluator.from_dict(
        {"text_fields": ["text"], "upper": 0.99, "corrective": None}, services, ConfigContext()
    )
    assert isinstance(processor, RetrievalEvaluator)
    _, ctx = await _judge(processor, CORRECT_Q, [hit("eiffel"), hit("nile")])
    retrieval = _retrieval(ctx)
    assert (retrieval.upper, retrieval.lower, retrieval.verdict) == (0.99, -0.8, "ambiguous")


async def test_a_lower_above_the_manifests_upper_fails_the_processor() -> None:
    services = _services(crag_upper=0.2)
    processor = RetrievalEvaluator.from_dict({"lower": 0.5}, services, ConfigContext())
    assert isinstance(processor, RetrievalEvaluator)
    request, ctx = _context(CORRECT_Q)
    with pytest.raises(ConfigError) as raised:
        await responded(processor, request, response_of([hit("eiffel")]), ctx)
    assert raised.value.reason == (
        "processor [retrieval_evaluator]: lower (0.5) is above upper (0.2) once the model's thresholds fill in"
    )


def _passes(evaluator: FakeEvaluator) -> list[list[str]]:
    """The documents each evaluator call scored (a refinement's strips: the documents they were cut from)."""
    return [[next(d for d, text in TEXTS.items() if p in text) for p in passages] for _, passages in evaluator.calls]


async def test_a_first_pass_that_reaches_the_stop_leaves_the_rest_unscored_after_the_scored() -> None:
    evaluator = FakeEvaluator(SCORES)
    services = _services(evaluator=evaluator, crag_first_pass_stop=0.5)
    processor = _evaluator(services, corrective=None, first_pass=2, rerank=True, strips_top_k=1)
    hits = [hit("nile", 4.0), hit("eiffel", 3.0), hit("everest", 2.0), hit("photosynthesis", 1.0)]
    response, ctx = await _judge(processor, CORRECT_Q, hits)
    assert _passes(evaluator)[0] == ["nile", "eiffel"]  # then eiffel's strips: refinement
    assert len(evaluator.calls) == 2
    retrieval = _retrieval(ctx)
    assert [s.id for s in retrieval.scores] == ["nile", "eiffel"]
    assert retrieval.verdict == "correct"
    # The two scored reranked by the evaluator, the unscored after them in the engine's order, scored under
    # the lowest read one (nile's 0.3) so that _score descends; the engine's score is kept.
    found = response["hits"]["hits"]
    assert [h["_id"] for h in found] == ["eiffel", "nile", "everest", "photosynthesis"]
    assert [h["_score"] for h in found] == [0.8, 0.3, 0.3 - 1 + 2 / 3, 0.3 - 1 + 1 / 2]
    assert [h["_previous_score"] for h in found[2:]] == [2.0, 1.0]
    assert response["hits"]["max_score"] == 0.8


async def test_a_first_pass_short_of_the_stop_scores_the_rest_and_judges_them_all() -> None:
    evaluator = FakeEvaluator(SCORES)
    services = _services(evaluator=evaluator, crag_first_pass_stop=0.5)
    processor = _evaluator(services, corrective=None, first_pass=2)
    hits = [hit("nile"), hit("photosynthesis"), hit("eiffel"), hit("everest")]
    _, ctx = await _judge(processor, CORRECT_Q, hits)
    assert _passes(evaluator)[:2] == [["nile", "photosynthesis"], ["eiffel", "everest"]]
    retrieval = _retrieval(ctx)
    assert [s.id for s in retrieval.scores] == ["nile", "photosynthesis", "eiffel", "everest"]
    assert retrieval.verdict == "correct"


@pytest.mark.parametrize(
    ("config", "manifest", "passes"),
    [
        ({"first_pass": 2}, {}, 1),  # a manifest without a stop: one pass
        ({"first_pass": None}, {"crag_first_pass_stop": 0.0}, 1),
        ({"first_pass": 4}, {"crag_first_pass_stop": 0.0}, 1),  # the first pass is every hit
        ({"first_pass": 2, "first_pass_stop": 0.95}, {"crag_first_pass_stop": 0.0}, 2),  # the pipeline's stop
        # A stop below upper (0.4) stops at upper: nile's 0.3 is not Correct, so the rest is read.
        ({"first_pass": 2}, {"crag_first_pass_stop": -0.9}, 2),
    ],
    ids=["no-stop", "no-first-pass", "first-pass-is-all", "pipeline-stop", "stop-below-upper"],
)
async def test_when_the_hits_are_scored_in_two_passes(config: JSON, manifest: JSON, passes: int) -> None:
    evaluator = FakeEvaluator(by_words({"Nile": 0.3, "Gustave Eiffel": 0.8}))
    processor = _evaluator(_services(evaluator=evaluator, **manifest), corrective=None, strip_threshold=1.0, **config)
    _, ctx = await _judge(processor, CORRECT_Q, [hit("nile"), hit("everest"), hit("eiffel"), hit("photosynthesis")])
    assert len(_passes(evaluator)) == passes + 1  # and one refinement call
    assert len(_retrieval(ctx).scores) == 4


ELEVATION_Q = "What is the elevation of Mount Everest?"
STUFFED = "The Everest elevation club meets on Mondays; members of the Mount Everest elevation club like tea."
# The engine's ranking for ELEVATION_Q: a passage full of its words first, answering nothing.
ENGINE = [
    {"_index": "wiki", "_id": "stuffed", "_score": 8.0, "_source": {"text": STUFFED}},
    hit("everest", 6.0),
    hit("eiffel", 2.0),
]
RERANK_SCORES = by_words({"club": 0.1, "8,848.86": 0.6})  # eiffel: -0.95


async def _rerank(**config: Any) -> tuple[JSON, PipelineContext]:
    """The engine's hits reranked for ELEVATION_Q."""
    services = _services(evaluator=FakeEvaluator(RERANK_SCORES), rerank_fusion_weight=config.pop("manifest", 0.0))
    processor = _evaluator(services, rerank=True, corrective=None, **config)
    return await _judge(processor, ELEVATION_Q, [dict(h) for h in ENGINE])


async def test_rerank_with_fusion_weight_0_orders_hits_by_evaluator_score_and_keeps_the_old_score() -> None:
    response, ctx = await _rerank(fusion_weight=0)
    hits = response["hits"]["hits"]
    assert [(h["_id"], h["_score"], h["_previous_score"]) for h in hits] == [
        ("everest", 0.6, 6.0),
        ("stuffed", 0.1, 8.0),
        ("eiffel", -0.95, 2.0),
    ]
    assert response["hits"]["max_score"] == 0.6
    assert "_previous_score" not in hits[0]["_source"]
    assert _retrieval(ctx).reranked is True


@pytest.mark.parametrize(
    ("config", "weight"),
    [({"fusion_weight": 2.5}, 2.5), ({"manifest": 0.25}, 0.25)],
    ids=["configured", "the-manifests"],
)
async def test_rerank_fuses_the_evaluator_score_with_the_engines_share_of_its_best_score(
    config: dict[str, Any], weight: float
) -> None:
    response, ctx = await _rerank(**config)
    fused = {"stuffed": 0.1 + weight * 8 / 8, "everest": 0.6 + weight * 6 / 8, "eiffel": -0.95 + weight * 2 / 8}
    expected = sorted(fused, key=lambda doc: -fused[doc])
    assert [(h["_id"], h["_score"]) for h in response["hits"]["hits"]] == [(doc, fused[doc]) for doc in expected]
    assert response["hits"]["max_score"] == fused[expected[0]]
    # The verdict and the reported scores stay the evaluator's.
    assert _retrieval(ctx).scores == _scores(("stuffed", 0.1), ("everest", 0.6), ("eiffel", -0.95))
    assert _retrieval(ctx).verdict == "correct"


async def test_enough_weight_puts_the_engines_favourite_first() -> None:
    heavy, _ = await _rerank(fusion_weight=2.5)
    light, _ = await _rerank(fusion_weight=0.1)
    assert [h["_id"] for h in heavy["hits"]["hits"]] == ["stuffed", "everest", "eiffel"]
    assert [h["_id"] for h in light["hits"]["hits"]] == ["everest", "stuffed", "eiffel"]


async def test_rerank_without_comparable_engine_scores_uses_the_evaluators_alone() -> None:
    processor = _evaluator(
        _services(evaluator=FakeEvaluator(RERANK_SCORES)), rerank=True, fusion_weight=1.0, corrective=None
    )
    sorted_by_field = [{**h, "_score": None} for h in ENGINE]
    response, ctx = await _judge(processor, ELEVATION_Q, sorted_by_field)
    assert [(h["_id"], h["_score"]) for h in response["hits"]["hits"]] == [
        ("everest", 0.6),
        ("stuffed", 0.1),
        ("eiffel", -0.95),
    ]
    assert ctx.report.warnings == [
        "[retrieval_evaluator] the hits have no comparable engine scores; reranked by the evaluator's score alone"
    ]


KEPT_ORDER = "its hits keep the caller's order, none reranked or dropped"


async def test_a_search_the_caller_sorted_keeps_its_order_and_is_still_judged() -> None:
    processor = _evaluator(
        _services(evaluator=FakeEvaluator(RERANK_SCORES)), rerank=True, fusion_weight=1.0, corrective=None
    )
    by_year = [{**h, "_score": None, "sort": [year]} for h, year in zip(ENGINE, (2024, 2019, 2001), strict=True)]
    body = {"query": {"match": {"text": ELEVATION_Q}}, "sort": [{"year": {"order": "desc"}}]}
    response, ctx = await _judge(processor, ELEVATION_Q, [dict(h) for h in by_year], body=body)
    assert response["hits"]["hits"] == by_year
    retrieval = _retrieval(ctx)
    assert (retrieval.reranked, retrieval.verdict) == (False, "correct")
    assert retrieval.scores == _scores(("stuffed", 0.1), ("everest", 0.6), ("eiffel", -0.95))
    assert ctx.report.warnings == [f"[retrieval_evaluator] the search is sorted by [year]: {KEPT_ORDER}"]


async def test_drop_removes_hits_below_the_lower_threshold_and_leaves_the_total() -> None:
    processor = _evaluator(_services(), corrective=None, drop_below_lower=True, top_n=3)
    hits = [hit("nile", 5.0), hit("photosynthesis", 4.0), hit("everest", 3.0), hit("eiffel", 2.0)]
    response, ctx = await _judge(processor, "How long is the Nile river in Africa?", hits)
    # photosynthesis (-0.95) is dropped; eiffel is past top_n, unjudged, and stays.
    assert [h["_id"] for h in response["hits"]["hits"]] == ["nile", "everest", "eiffel"]
    assert [h["_score"] for h in response["hits"]["hits"]] == [5.0, 3.0, 2.0]  # not reranked: the engine's
    assert response["hits"]["total"] == {"value": 4, "relation": "eq"}
    assert _retrieval(ctx).dropped == 1


async def test_a_dropped_first_hit_takes_max_score_with_it() -> None:
    processor = _evaluator(_services(), corrective=None, drop_below_lower=True, top_n=3)
    hits = [hit("photosynthesis", 5.0), hit("nile", 4.0), hit("eiffel", 2.0)]
    response, _ = await _judge(processor, "How long is the Nile river in Africa?", hits)
    assert [h["_id"] for h in response["hits"]["hits"]] == ["nile", "eiffel"]
    assert response["hits"]["max_score"] == 4.0


@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("weight", [0.0, 0.25])
async def test_after_a_rerank_score_descends_down_every_hit_and_max_score_is_the_first(
    drop: bool, weight: float
) -> None:
    """Read hits whose fused scores are negative, unread ones past top_n with BM25-sized scores."""
    processor = _evaluator(
        _services(), corrective=None, rerank=True, top_n=2, fusion_weight=weight, drop_below_lower=drop, lower=-0.99
    )
    hits = [hit("photosynthesis", 9.0), hit("football", 8.0), hit("nile", 7.5), hit("eiffel", 7.5), hit("budget", 1.0)]
    response, _ = await _judge(processor, "How long is the Nile river in Africa?", hits)
    found = response["hits"]["hits"]
    assert [h["_id"] for h in found] == ["photosynthesis", "football", "nile", "eiffel", "budget"]
    scores = [h["_score"] for h in found]
    assert all(a >= b for a, b in pairwise(scores))
    assert scores[1] > scores[2]
    assert scores[1] < 0  # the read hits' scores are the evaluator's, under 0
    assert response["hits"]["max_score"] == scores[0]


async def test_a_search_with_a_sort_of_its_own_keeps_every_hit() -> None:
    """A listing (a scroll's export sorts by ``_doc``) loses no hit to ``drop_below_lower``."""
    processor = _evaluator(_services(), corrective=None, drop_below_lower=True, top_n=3)
    hits = [hit("nile", 5.0), hit("photosynthesis", 4.0), hit("everest", 3.0)]
    body = {"query": {"match": {"text": "How long is the Nile river in Africa?"}}, "sort": ["_doc"]}
    response, ctx = await _judge(processor, "How long is the Nile river in Africa?", [dict(h) for h in hits], body=body)
    assert response["hits"]["hits"] == hits
    assert _retrieval(ctx).dropped == 0
    assert ctx.report.warnings == [f"[retrieval_evaluator] the search is sorted by [_doc]: {KEPT_ORDER}"]


async def test_corrective_search_keeps_the_callers_filters() -> None:
    backend = ScriptedBackend(lambda body: [hit("photosynthesis")])
    body = {"query": {"bool": {"must": [{"match": {"text": EVEREST_Q}}], "filter": [{"term": {"topic": "biology"}}]}}}
    # upper 1 and lower 1: no score reaches upper, every score is below lower.
    processor = _evaluator(_services(), upper=1.0, lower=1.0)
    _, ctx = await _judge(processor, EVEREST_Q, [hit("photosynthesis")], body=body, backend=backend)
    retrieval = _retrieval(ctx)
    assert (retrieval.verdict, retrieval.upper, retrieval.lower) == ("incorrect", 1.0, 1.0)
    (corrective,) = backend.calls
    assert corrective.body["query"]["bool"]["filter"] == [{"term": {"topic": "biology"}}]
    # The one hit the filter lets through was already judged: nothing new to score.
    assert retrieval.corrective is not None
    assert retrieval.corrective.scores == []


async def test_a_failed_corrective_search_leaves_the_refined_hits() -> None:
    def down(body: JSON) -> list[JSON]:
        raise UpstreamError(503, {"error": {"type": "unavailable", "reason": "the cluster is down"}, "status": 503})

    processor = _evaluator(_services("Eiffel Tower, company"), upper=0.95)
    _, ctx = await _judge(processor, CORRECT_Q, [hit("eiffel")], backend=ScriptedBackend(down))
    retrieval = _retrieval(ctx)
    assert (retrieval.verdict, retrieval.corrective_query) == ("ambiguous", "Eiffel Tower company")
    assert [s.id for s in retrieval.knowledge] == ["eiffel", "eiffel"]
    assert ctx.report.warnings == ["[retrieval_evaluator] the corrective search failed: the cluster is down"]


@pytest.mark.parametrize(
    ("services", "warning"),
    [
        (
            FakeServices(models=ModelError("no model here")),
            "the retrieval evaluator failed; hits are unchanged: no model here",
        ),
        (
            _services(evaluator=FakeEvaluator(failure=ModelError("the model is busy"))),
            "the retrieval evaluator failed; hits are unchanged: the model is busy",
        ),
    ],
    ids=["no-models", "evaluator-error"],
)
async def test_evaluator_failure_leaves_the_hits_as_opensearch_returned_them(
    services: FakeServices, warning: str
) -> None:
    processor = _evaluator(services, rerank=True, drop_below_lower=True)
    hits = [hit("everest", 2.0), hit("eiffel", 1.0)]
    response, ctx = await _judge(processor, EVEREST_Q, [dict(h) for h in hits])
    assert response == response_of(hits)
    assert ctx.report.retrieval is None
    assert ctx.report.warnings == [f"[retrieval_evaluator] {warning}"]


def test_an_evaluator_slower_than_its_share_leaves_the_hits() -> None:
    clock = FakeClock()
    services = _services(evaluator=FakeEvaluator(SCORES, clock=clock, latency_s=20))
    request, ctx = _context(EVEREST_Q, clock=clock, seconds=10)
    response = run_on(clock, responded(_evaluator(services), request, response_of([hit("everest")]), ctx))
    assert response == response_of([hit("everest")])
    assert ctx.report.retrieval is None
    assert ctx.report.warnings == [
        "[retrieval_evaluator] the evaluator did not finish in its share of the pipeline's time; hits are unchanged"
    ]


async def test_without_a_question_nothing_is_judged() -> None:
    services = _services()
    request, ctx = _context("")
    ctx.question = None
    assert await responded(_evaluator(services), request, response_of([hit("eiffel")]), ctx) == response_of(
        [hit("eiffel")]
    )
    assert ctx.report.warnings == ["[retrieval_evaluator] the search has no question text; retrieval was not evaluated"]


async def test_a_hit_without_text_scores_as_the_worst_passage() -> None:
    untitled = {"_index": "wiki", "_id": "blank", "_score": 1.0, "_source": {"text": "  ", "year": 2020}}
    _, ctx = await _judge(_evaluator(_services(), corrective=None), CORRECT_Q, [hit("eiffel"), untitled])
    assert _retrieval(ctx).scores == _scores(("eiffel", 0.8), ("blank", -1.0))


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"upper": 0.2, "lower": 0.5}, "lower (0.5) must not be above upper (0.2)"),
        ({"corrective": {"fuzziness": "lots"}}, "fuzziness must be AUTO, AUTO:low,high, 0, 1 or 2, got 'lots'"),
        ({"top_n": 0}, "top_n"),
        ({"fusion_weight": -0.5}, "fusion_weight"),
        ({"corrective": {"prompt": "{{ question "}}, "syntax error"),
        ({"corrective": {"max_tokens": 2000}}, "max_tokens"),
        ({"corrective": {"prefix_length": -1}}, "prefix_length"),
    ],
)
def test_invalid_config_is_rejected_when_the_pipeline_is_defined(config: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        RetrievalEvaluator.from_dict({"text_fields": ["text"], **config}, _services(), ConfigContext())
    assert problem in refused.value.reason


@pytest.mark.parametrize(
    ("structured", "reply"),
    [
        (True, '{"keywords": ["Mount Everest", "first recorded ascent"]}'),
        (False, KEYWORDS),
        (True, KEYWORDS),  # not JSON: read as text
    ],
    ids=["json", "text", "not-json"],
)
async def test_keyword_rewrite_reads_json_or_text_into_the_same_query(structured: bool, reply: str) -> None:
    services = FakeServices(replies=[reply], structured=structured, models=fake_models(evaluator=FakeEvaluator(SCORES)))
    backend = ScriptedBackend(lambda body: [])
    _, ctx = await _judge(
        _evaluator(services, corrective={"index": "wiki"}), EVEREST_Q, [hit("budget")], backend=backend
    )
    retrieval = _retrieval(ctx)
    assert retrieval.corrective_query == "Mount Everest first recorded ascent"
    assert retrieval.corrective is not None
    assert retrieval.corrective.keywords_source == "llm"
    (call,) = services.llm.calls
    example = 'question: In what city was Billy Carlson born?\nquery: {"keywords": ["city", "Billy Carlson", "born"]}\n'
    if structured:
        assert (call.schema, call.stop) == (KEYWORDS_SCHEMA, None)  # a JSON reply ends with its schema
        assert example in call.prompt
    else:
        assert (call.schema, call.stop) == (None, ["\nquestion:"])
        assert "JSON" not in call.prompt
        assert "question: In what city was Billy Carlson born?\nquery: city, Billy Carlson, born\n" in call.prompt
