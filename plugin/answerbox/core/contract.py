"""The response contract: what answerbox adds to a search response, in one place.

A search run through a pipeline with answerbox processors comes back as a normal
OpenSearch response plus::

    "ext": {
      "answerbox": {
        "answer":          null | Answer        # cited_answer
        "citations":       [Citation]           # the answer's checked citations, flattened
        "query_expansion": null | {...}          # llm_query_expansion
        "retrieval":       null | {...}          # retrieval_evaluator (CRAG)
        "chain":           null | {...}          # chain_of_query (SearChain)
        "conversation":    null | {...}          # with memory_id: the standalone question, message_id
        "timings_ms":      {"<processor>": ms, "search": ms, "total": ms}
        "llm_skipped":     ["chain_of_query"]   # processors the reader's confidence spared the LLM
        "warnings":        ["..."]              # degradations: LLM down, model failure, ...
        "plan":            RunPlan              # only with verbose_pipeline=true: what the run was set to
      },
      "retrieval_augmented_generation": {"answer": "...", "message_id": "..."}   # for OpenSearch RAG clients
    }

Each processor publishes its own typed section into ``PipelineContext.report``; a later
processor reads an earlier one's result through these types (``AnswerboxReport.kept_passages``
for the answer's evidence), and the engine renders the report once, at the end.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

# The version of this contract, for a client to check what it talks to (in
# GET /_answerbox/stats/search_pipeline): the minor grows with what is added, the major with
# what a client could break on. CHANGELOG.md says what each brought.
CONTRACT_VERSION = "1.3"

__all__ = [
    "CONTRACT_VERSION",
    "Answer",
    "AnswerMode",
    "AnswerReason",
    "AnswerboxReport",
    "BranchFeedback",
    "BranchParent",
    "BranchReport",
    "Candidate",
    "ChainCitation",
    "ChainNodeReport",
    "ChainReport",
    "ChainSource",
    "CheckedSentence",
    "Citation",
    "ConversationReport",
    "CorrectiveReport",
    "DraftNode",
    "ExpansionMethod",
    "ExpansionMode",
    "FlagReason",
    "FlaggedClaim",
    "GenerativeQAParameters",
    "HitScore",
    "KnowledgeStrip",
    "LLMUsageReport",
    "LLMUse",
    "PassagePiece",
    "PlanSource",
    "Planned",
    "PlannedStep",
    "QueryExpansionReport",
    "RetrievalAction",
    "RetrievalReport",
    "RunPlan",
    "TextSpan",
    "Verdict",
]


class TextSpan(BaseModel):
    """Characters ``start:end`` of one field of one hit."""

    index: str = Field(serialization_alias="_index")
    id: str = Field(serialization_alias="_id")
    field: str
    start: int
    end: int


class PassagePiece(TextSpan):
    """A piece of a hit a processor kept as evidence, with its text."""

    text: str


class KnowledgeStrip(PassagePiece):
    """A CRAG knowledge strip and the evaluator's score of it."""

    score: float


class HitScore(BaseModel):
    index: str = Field(serialization_alias="_index")
    id: str = Field(serialization_alias="_id")
    score: float


# What the LLM writes for the query (a passage, keywords, a rationale), and from what.
ExpansionMethod = Literal["q2d", "q2e", "cot"]
ExpansionMode = Literal["zs", "fs", "prf"]
# What CRAG did with the hits, by verdict and whether a corrective search is configured.
RetrievalAction = Literal["refine", "refine+corrective_search", "corrective_search", "discard"]
# How a chain node's answer was judged against what IR read, and where the kept answer came from.
ChainAction = Literal["pass", "correct", "complete", "not_found"]
ChainSource = Literal["llm", "corrected", "completed"]
# Why a chain ended: a chain passed / r_max rounds / the budget ran out / the LLM, reader or a search failed.
ChainStop = Literal["finished", "rounds", "budget", "failed"]


class QueryExpansionReport(BaseModel):
    """``llm_query_expansion``'s section."""

    method: ExpansionMethod
    mode: ExpansionMode
    prompt: str
    expansion: str = ""
    cached: bool = False
    cache: Literal["memory", "index", "in_flight"] | None = None
    fallback: bool = False
    llm_ms: float | None = None


class CorrectiveReport(BaseModel):
    index: str | None
    keywords: list[str]
    keywords_source: Literal["llm", "fallback", "question"]
    scores: list[HitScore] = []


class RetrievalReport(BaseModel):
    """``retrieval_evaluator``'s section (CRAG)."""

    verdict: Literal["correct", "incorrect", "ambiguous"]
    upper: float
    lower: float
    scores: list[HitScore]
    action: RetrievalAction
    knowledge: list[KnowledgeStrip]  # refined strips, in document order
    corrective_query: str | None
    corrective: CorrectiveReport | None
    reranked: bool
    dropped: int


class ChainNodeReport(BaseModel):
    round: int
    query: str
    llm_answer: str | None
    reader_answer: str | None
    confidence: float | None
    answer: str | None
    source: ChainSource
    action: ChainAction
    verified: bool
    reference: TextSpan | None


class ChainCitation(TextSpan):
    marker: int
    by: Literal["marker", "answer"]  # how the final content was traced to the node
    query: str
    quote: str
    verified: bool


class DraftNode(BaseModel):
    query: str
    answer: str | None
    unsolved: bool


class BranchParent(BaseModel):
    round: int
    node: int


class BranchFeedback(BaseModel):
    node: int
    action: ChainAction


class BranchReport(BaseModel):
    """One chain of the Tree-of-Reasoning, as the LLM wrote it."""

    round: int
    parent: BranchParent | None
    nodes: list[DraftNode]
    final_content: str | None
    malformed: bool
    cut_off: bool  # the LLM's reply ran into max_tokens: what it finished is read
    feedback: BranchFeedback | None


class LLMUsageReport(BaseModel):
    """What a processor's LLM calls cost, summed as they are made."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    millis: float = 0.0

    def add(self, *, prompt_tokens: int, completion_tokens: int, millis: float) -> None:
        self.calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.millis = round(self.millis + millis, 1)


class ChainReport(BaseModel):
    """``chain_of_query``'s section (SearChain)."""

    question: str
    rounds: int
    stopped: ChainStop
    theta: float
    nodes: list[ChainNodeReport]
    path: list[int]
    final_content: str | None
    final_answer: str | None
    unverified_content: str | None
    citations: list[ChainCitation]
    references: list[PassagePiece]  # the passages IR verified nodes with, once each
    # Every path node verified, and the final content says what IR gave its cited nodes (with
    # the claim verifier: the verified references entail it).
    verified: bool
    abstained: bool
    tree: list[BranchReport]
    llm: LLMUsageReport


class Citation(TextSpan):
    """A checked citation: the span of a hit that the answer's ``[marker]`` rests on."""

    marker: int
    quote: str
    # The probability that the cited text entails the sentence (with the claim verifier, the
    # default); without one, the evaluator's score of the sentence against the block.
    support: float | None = None


# Why a citation was removed: the marker is out of range / the block addresses the model (a
# prompt injection) / the block does not support it (the evaluator's check, without a claim
# verifier) / no model could check it / the block says otherwise / the block does not say it.
FlagReason = Literal["no_evidence", "instructions", "unsupported", "unchecked", "contradicted", "not_found"]
# A checked sentence's verdict against a block: it says it (a citation) / it says otherwise /
# neither was shown (every other FlagReason).
Verdict = Literal["entailed", "contradicted", "unverified"]


class FlaggedClaim(BaseModel):
    """A sentence of the LLM's answer whose citation was removed by the check."""

    sentence: str
    marker: int
    reason: FlagReason
    # The probability that the block entails the sentence (with the claim verifier), else the
    # evaluator's score of the sentence against the block.
    support: float | None = None
    quote: str | None = None  # the block's sentence that contradicts it
    # In the answer's text all the same, not checked (``cited_answer.unverified: show``).
    shown: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> Verdict:
        """``contradicted`` where the block says otherwise, else ``unverified``: a flagged claim
        is never ``entailed``."""
        return "contradicted" if self.reason == "contradicted" else "unverified"


class CheckedSentence(BaseModel):
    """A sentence of the LLM's answer, streamed once its citations were checked (``event:
    sentence``): ``supported`` by its citations (entailed), ``unchecked`` where the pipeline checks
    none (``check_citations: false``), or ``unverified``: no citation held up or was contradicted,
    and the pipeline shows such a sentence (``cited_answer.unverified: show``). A contradicted
    sentence is never streamed."""

    text: str
    citations: list[Citation] = []
    verdict: Literal["supported", "unchecked", "unverified"]


AnswerMode = Literal["generative", "extractive", "chain"]
# Why an answer abstained: its confidence is below ``min_confidence`` (the best candidate is in
# ``candidate``) / the search found no evidence / CRAG judged the hits incorrect / no claim of
# the answer held up against its evidence (nor did the reader find a span) / the chain
# verified nothing / no reader or LLM could answer.
AnswerReason = Literal[
    "low_confidence", "no_evidence", "retrieval_incorrect", "unsupported", "chain_unverified", "unavailable"
]
# What the LLM did for the answer: it was not called, the reader being confident enough
# (``skip_llm_above``) / it was called / it was called and failed. None: no LLM in this answer.
LLMUse = Literal["skipped", "used", "failed"]


class Candidate(BaseModel):
    """An answer below ``min_confidence``: a page may show it as a possible answer, or not at all."""

    text: str
    citations: list[Citation] = []
    mode: AnswerMode
    confidence: float


class Answer(BaseModel):
    text: str
    citations: list[Citation] = []
    mode: AnswerMode
    abstained: bool = False
    flagged: list[FlaggedClaim] = []
    # The probability that ``text`` is right (contains a right answer): calibrated on held-out
    # questions with the pipeline in the loop (``answerbox.models.confidence``). None when abstained.
    confidence: float | None = None
    reason: AnswerReason | None = None  # set exactly when abstained
    candidate: Candidate | None = None  # the answer held back by ``min_confidence``
    llm: LLMUse | None = None
    signals: dict[str, float] | None = None  # what ``confidence`` was computed from


class GenerativeQAParameters(BaseModel):
    """``ext.generative_qa_parameters``, accepted as OpenSearch's RAG processor accepts it."""

    model_config = ConfigDict(extra="forbid")

    llm_question: str | None = None
    llm_model: str | None = None
    context_size: int | None = Field(default=None, ge=1)
    timeout: float | None = Field(default=None, gt=0)
    system_prompt: str | None = None
    user_instructions: str | None = None
    message_size: int | None = Field(default=None, ge=1)
    memory_id: str | None = None
    llm_response_field: str | None = None


# How a follow-up became a standalone question: the LLM wrote it / the rules carried the earlier
# question's subject and entities into it / it needed nothing (no history, or it stands alone).
ConversationMethod = Literal["llm", "rules", "none"]


class ConversationReport(BaseModel):
    """A search's turn of a conversation (``generative_qa_parameters.memory_id``)."""

    memory_id: str
    question: str  # as the caller asked it
    standalone_question: str  # what the processors read
    method: ConversationMethod = "none"
    history: int = 0  # earlier interactions read
    message_id: str | None = None  # this interaction, stored; None when storing failed


# Where a value of the run plan came from: answerbox's default, its settings, the model's
# manifest (or the manifest's moved by the pipeline's ``calibration``), the pipeline, the search.
PlanSource = Literal["default", "settings", "manifest", "calibration", "pipeline", "request"]


class Planned(BaseModel):
    """One value a run goes by, and where it came from."""

    model_config = ConfigDict(frozen=True)

    value: Any
    source: PlanSource


class PlannedStep(BaseModel):
    model_config = ConfigDict(frozen=True)

    processor: str  # its name: type, or type:tag
    phase: Literal["request", "response"]
    # Its part of the budget when the run starts (its weight over all weights); what a step
    # leaves unused goes to the steps after it.
    share: float
    # Why a step the pipeline does not list runs: the search names a memory.
    added: str | None = None
    # Why the search makes the step pointless (a count, a scroll, no score read): it does not run.
    skipped: str | None = None
    # The values it runs with, each with its source.
    values: dict[str, Planned] = {}


class RunPlan(BaseModel):
    """What a search through a pipeline is set to do, resolved from the settings, the pipeline,
    ``generative_qa_parameters`` and the model's manifest (``pipeline/run/plan.py``)."""

    model_config = ConfigDict(frozen=True)

    pipeline: str
    budget_s: Planned
    processor_timeout_s: Planned
    # What the whole request (a _search, an _msearch with all its lines, a stream) may spend:
    # its LLM calls and its prompts' CPU seconds, which admission hands its tasks to share.
    llm_calls: Planned
    render_cpu_s: Planned
    steps: list[PlannedStep]
    answer: str | None = None  # the one step that writes the answer (its name), through the answer policy
    in_opensearch: list[str] = []  # OpenSearch's own processor types, run there


class AnswerboxReport(BaseModel):
    answer: Answer | None = None
    conversation: ConversationReport | None = None
    query_expansion: QueryExpansionReport | None = None
    retrieval: RetrievalReport | None = None
    chain: ChainReport | None = None
    timings_ms: dict[str, float] = {}
    # Processors that did not ask the LLM: the reader's own answer was confident enough (skip_llm_above).
    llm_skipped: list[str] = []
    warnings: list[str] = []
    plan: RunPlan | None = None

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def kept_passages(self) -> list[PassagePiece] | None:
        """What earlier processors kept as the answer's evidence, best first: the chain's verified
        references, else CRAG's strips by score; None when the answer must come from the hits.

        A chain that verified nothing (it abstained, or its budget ran out first) hands over to
        the strips or the hits: it found no chain, not that the hits are wrong. CRAG's
        "incorrect" keeps no strip: a judgment of the hits, so the answer has no evidence.
        """
        if self.chain is not None and self.chain.references:
            return list(self.chain.references)
        if self.retrieval is not None:
            ranked: list[KnowledgeStrip] = sorted(self.retrieval.knowledge, key=lambda strip: -strip.score)
            return list(ranked)
        return None

    def render(self) -> dict[str, Any]:
        body = self.model_dump(by_alias=True)
        body["citations"] = body["answer"]["citations"] if self.answer else []
        if self.plan is None:  # asked for (verbose_pipeline), not a field every response carries
            del body["plan"]
        return body
