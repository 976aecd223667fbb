"""The rerank fusion's formula, and its weight's home in the model manifest."""

from __future__ import annotations

import json
import math
from itertools import pairwise
from pathlib import Path

import pytest
from answerbox.core.errors import ModelError
from answerbox.models.manifest import ModelManifest
from answerbox.processors.retrieval_evaluator.fusion import engine_term, fuse, scores_below


def test_fused_score_adds_the_weighted_share_of_the_best_engine_score() -> None:
    assert fuse([0.5, -0.2, 0.9], [8.0, 4.0, 2.0], 0.4) == pytest.approx([0.5 + 0.4, -0.2 + 0.2, 0.9 + 0.1])


def test_the_engine_term_ignores_the_engines_scale() -> None:
    assert engine_term([8.0, 4.0, 2.0]) == engine_term([0.8, 0.4, 0.2]) == pytest.approx([1.0, 0.5, 0.25])


def test_weight_zero_is_the_evaluator_alone_whatever_the_engine_scores() -> None:
    assert fuse([0.5, -0.2], [None, None], 0.0) == [0.5, -0.2]


@pytest.mark.parametrize("engine", [[None, 1.0], [2.0, -1.0], [0.0, 0.0], [1.0, math.inf], [True, 1.0], ["3", 1.0]])
def test_scores_that_cannot_share_one_scale_give_no_fusion(engine: list[object]) -> None:
    assert engine_term(engine) is None
    assert fuse([0.1, 0.2], engine, 0.3) is None


def test_unread_hits_score_under_the_lowest_read_one_in_the_engines_order() -> None:
    assert scores_below(0.5, [3.0, 1.0, 0.0]) == pytest.approx([0.5 - 1 + 3 / 4, 0.5 - 1 + 1 / 2, 0.5 - 1])


@pytest.mark.parametrize("floor", [0.9, 0.0, -0.95, -2.0, 1e-300])
@pytest.mark.parametrize(
    "engine",
    [[12.0, 12.0, 3.1, 0.5], [None, 4.0, None], [1e300, 1e300, 1e10], [2.0, -1.0, math.nan, True, 7.0], []],
    ids=["bm25", "nulls", "huge", "unusable", "none"],
)
def test_scores_below_stay_strictly_under_the_floor_and_never_rise(floor: float, engine: list[object]) -> None:
    """Whatever the sign of the lowest read score, whatever the engine gave (nulls, rounding to 1)."""
    mapped = scores_below(floor, engine)
    assert len(mapped) == len(engine)
    assert all(score < floor for score in mapped)
    assert all(a >= b for a, b in pairwise(mapped))


def test_a_manifest_without_the_weight_reranks_by_the_evaluator_alone(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"task": "reader-evaluator", "variants": {}}))
    assert ModelManifest.load(tmp_path).rerank_fusion_weight == 0.0


@pytest.mark.parametrize("weight", [-0.1, "0.3", None])
def test_a_manifest_weight_that_is_not_a_non_negative_number_is_refused(tmp_path: Path, weight: object) -> None:
    (tmp_path / "manifest.json").write_text(
        json.dumps({"task": "reader-evaluator", "variants": {}, "rerank_fusion_weight": weight})
    )
    with pytest.raises(ModelError, match="rerank_fusion_weight"):
        ModelManifest.load(tmp_path)
    with pytest.raises(ModelError, match="rerank_fusion_weight"):
        ModelManifest(task="reader-evaluator", variants={}).replace(rerank_fusion_weight=weight)
