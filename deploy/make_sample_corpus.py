"""Write the embedded default's sample corpus: whole articles of SQuAD v1.1 dev, in order,
until at least ``--paragraphs`` paragraphs. Run from the repository root:

    python -m deploy.make_sample_corpus

The text is Wikipedia's (CC BY-SA 4.0) as packaged by SQuAD v1.1 (CC BY-SA 4.0); see
deploy/embedded/ATTRIBUTION.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from onnx_models.data.squad import DEV_FILE, load_squad

HERE = Path(__file__).parent / "embedded"  # the wheel bundles this folder's data files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--paragraphs", type=int, default=300)
    args = parser.parse_args()
    docs: list[dict[str, object]] = []
    questions: list[dict[str, object]] = []
    articles: set[str] = set()
    for paragraph in load_squad([DEV_FILE]):
        if len(docs) >= args.paragraphs and paragraph.article not in articles:
            break
        articles.add(paragraph.article)
        article = paragraph.article.rsplit("/", 1)[-1]
        title = article.replace("_", " ")
        doc_id = f"{article}-{sum(1 for d in docs if d['title'] == title)}"
        docs.append({"_id": doc_id, "title": title, "text": paragraph.context, "source": "en.wikipedia.org"})
        questions += [{"question": q.text, "answers": list(q.answers), "doc": doc_id} for q in paragraph.questions]
    (HERE / "corpus.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs))
    (HERE / "questions.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions))
    print(f"{len(docs)} paragraphs from {len(articles)} articles, {len(questions)} questions")


if __name__ == "__main__":
    main()
