"""SQuAD-format data from the BIG-bench tarball, SQuAD answer normalisation, and a small BM25.

Training reads ``squad_shifts/new_wiki_v1.0.json`` and ``nyt_v1.0.json``; calibration and
the benches read ``squaddev_v1.1.json`` (never trained on).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import math
import os
import random
import re
import tarfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from answerbox.processors.text.normalize import contains_gold, normalize_answer  # the one copy of each; re-exported

__all__ = [
    "BM25",
    "DEV_FILE",
    "TRAIN_FILES",
    "Paragraph",
    "Question",
    "contains_gold",
    "cut_short",
    "data_dir",
    "default_tarball",
    "exact_match",
    "f1_score",
    "held_out",
    "holdout_fraction",
    "in_holdout",
    "index_with_titles",
    "load_squad",
    "normalize_answer",
    "sample_questions",
]

_MEMBER_DIR = "bigbench-1.0.0/bigbench/benchmark_tasks/squad_shifts/"
TRAIN_FILES = ("new_wiki_v1.0.json", "nyt_v1.0.json")
DEV_FILE = "squaddev_v1.1.json"


def data_dir() -> Path:
    """Downloads, training runs and their checkpoints: outside the repository."""
    return Path(os.environ.get("ANSWERBOX_DATA_DIR", Path.home() / ".cache" / "answerbox" / "data"))


def default_tarball() -> Path:
    return data_dir() / "bigbench-1.0.0.tar.gz"


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str
    answers: tuple[str, ...]
    answer_starts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Paragraph:
    id: str  # "<file>/<article index>/<paragraph index>"
    article: str
    context: str
    questions: tuple[Question, ...]


def load_squad(names: Iterable[str], source: Path | None = None) -> list[Paragraph]:
    """Paragraphs of the named squad_shifts files, read straight from the bigbench tarball, or
    from a folder of those files gzipped (``onnx_models.train.travel data``: what a lent GPU gets)."""
    names = list(names)
    source = source or default_tarball()
    found = _from_folder(names, source) if source.is_dir() else read_tarball_files(names, source)
    if missing := [name for name in names if name not in found]:
        raise FileNotFoundError(f"not in {source}: {missing}")
    return [p for name in names for p in _paragraphs(name, found[name])]


def _from_folder(names: list[str], folder: Path) -> dict[str, dict[str, object]]:
    return {
        name: json.loads(gzip.decompress((folder / f"{name}.gz").read_bytes()))
        for name in names
        if (folder / f"{name}.gz").is_file()
    }


def read_tarball_files(names: list[str], tarball: Path) -> dict[str, dict[str, object]]:
    """The named squad_shifts files' JSON, those the bigbench tarball holds. The tarball is
    gzip, so finding a member means decompressing up to it: all are collected in one pass."""
    wanted = {_MEMBER_DIR + name: name for name in names}
    found: dict[str, dict[str, object]] = {}
    with tarfile.open(tarball, "r:gz") as archive:
        for member in archive:
            if member.name in wanted:
                handle = archive.extractfile(member)
                assert handle is not None, member.name
                found[wanted[member.name]] = json.load(handle)
                if len(found) == len(wanted):
                    break
    return found


def _paragraphs(name: str, data: dict[str, object]) -> Iterator[Paragraph]:
    articles = data["data"]
    assert isinstance(articles, list)
    for a_index, article in enumerate(articles):
        for p_index, paragraph in enumerate(article["paragraphs"]):
            questions = tuple(
                Question(
                    id=str(qa["id"]),
                    text=qa["question"],
                    answers=tuple(a["text"] for a in qa["answers"]),
                    answer_starts=tuple(int(a["answer_start"]) for a in qa["answers"]),
                )
                for qa in paragraph["qas"]
            )
            yield Paragraph(
                id=f"{name}/{a_index}/{p_index}",
                article=f"{name}/{article.get('title', a_index)}",
                context=paragraph["context"],
                questions=questions,
            )


def in_holdout(article: str, fraction: float) -> bool:
    """Whether an article is in the held-out split of ``fraction`` of the articles: a stable
    hash of its name, so every run on every machine holds out the same ones."""
    return zlib.crc32(article.encode()) < fraction * 2**32


def held_out(paragraphs: Iterable[Paragraph], fraction: float) -> list[Paragraph]:
    """The paragraphs of the held-out articles; refuses a fraction that holds out none."""
    if not (found := [p for p in paragraphs if in_holdout(p.article, fraction)]):
        raise SystemExit(f"--holdout {fraction} holds out no article")
    return found


def holdout_fraction(text: str) -> float:
    """``--holdout`` as argparse reads it: a fraction in [0, 1)."""
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), not {text}")
    return value


def sample_questions(paragraphs: Sequence[Paragraph], limit: int, seed: int) -> list[tuple[Paragraph, Question]]:
    """(gold paragraph, question) pairs: all of them in file order when ``limit`` is 0, else a seeded sample."""
    pairs = [(p, q) for p in paragraphs for q in p.questions]
    if not limit or limit >= len(pairs):
        return pairs
    return random.Random(seed).sample(pairs, limit)


# --- SQuAD v1.1 official normalisation and metrics ---------------------------------


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    return max(float(normalize_answer(prediction) == normalize_answer(g)) for g in golds)


def cut_short(prediction: str, golds: Sequence[str]) -> bool:
    """A right answer cut short: the prediction lies inside a gold answer but holds none."""
    said = normalize_answer(prediction)
    return bool(said) and not contains_gold(prediction, golds) and any(said in normalize_answer(g) for g in golds)


def f1_score(prediction: str, golds: Sequence[str]) -> float:
    return max(_f1(prediction, g) for g in golds)


def _f1(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


# --- an index of paragraphs ------------------------------------------------------


def index_with_titles(client: httpx.Client, url: str, paragraphs: Sequence[Paragraph], index: str) -> None:
    """``index`` on the engine at ``url``: every paragraph's ``text`` and its article's
    ``title``, ``_id`` = the paragraph id (so a cited hit names its paragraph)."""
    mappings = {"properties": {"text": {"type": "text"}, "title": {"type": "text"}}}
    client.put(f"{url}/{index}", json={"mappings": mappings}).raise_for_status()
    lines = []
    for p in paragraphs:
        title = p.article.split("/", 1)[-1].replace("_", " ")
        lines += [json.dumps({"index": {"_id": p.id}}), json.dumps({"text": p.context, "title": title})]
    headers = {"content-type": "application/x-ndjson"}
    response = client.post(f"{url}/{index}/_bulk?refresh=true", content="\n".join(lines) + "\n", headers=headers)
    response.raise_for_status()
    if response.json()["errors"]:
        raise RuntimeError("the engine refused some paragraphs")


# --- BM25 (Okapi, k1=0.9, b=0.4 as in Lucene/Anserini defaults for passages) ----------

_TOKEN = re.compile(r"\w+")


def _terms(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25:
    def __init__(self, documents: Sequence[str], *, k1: float = 0.9, b: float = 0.4) -> None:
        self._k1, self._b = k1, b
        self._docs = [collections.Counter(_terms(d)) for d in documents]
        self._lengths = [sum(c.values()) for c in self._docs]
        self._avg = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        df: collections.Counter[str] = collections.Counter()
        for counts in self._docs:
            df.update(counts.keys())
        n = len(self._docs)
        self._idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def scores(self, query: str) -> list[float]:
        terms = _terms(query)
        out = []
        for counts, length in zip(self._docs, self._lengths, strict=True):
            norm = self._k1 * (1 - self._b + self._b * length / self._avg)
            out.append(
                sum(
                    self._idf.get(t, 0.0) * counts[t] * (self._k1 + 1) / (counts[t] + norm)
                    for t in terms
                    if t in counts
                )
            )
        return out
