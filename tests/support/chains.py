"""The chain the scripted LLM writes in the chain_of_query tests, in the paper's text format and as
the JSON a structured-output endpoint returns: shared by the parser's unit tests and the
integration tests that verify it against the index."""

from __future__ import annotations

import json

RIGHT_CHAIN = (
    "[Query 1]: Who is the performer of Spirit If... ?\n[Answer 1]: Kevin Drew\n"
    # Answers as long as the documents' own words: the reader's span has to stand in them to pass.
    "[Query 2]: Where was Kevin Drew born?\n[Answer 2]: Toronto, Ontario\n"
    "[Query 3]: Where do greyhound buses in Toronto leave from?\n"
    "[Answer 3]: Greyhound buses in Toronto leave from the Toronto Coach Terminal on Bay Street.\n"
    "[Final Content]: Spirit If... is by Kevin Drew [1]. Kevin Drew was born in Toronto [2]. "
    "Greyhound buses in Toronto leave from Toronto Coach Terminal [3]. So the final answer is Toronto Coach Terminal."
)
RIGHT_CHAIN_JSON = json.dumps(
    {
        "nodes": [
            {"query": "Who is the performer of Spirit If... ?", "answer": "Kevin Drew"},
            {"query": "Where was Kevin Drew born?", "answer": "Toronto, Ontario"},
            {
                "query": "Where do greyhound buses in Toronto leave from?",
                "answer": "Greyhound buses in Toronto leave from the Toronto Coach Terminal on Bay Street.",
            },
        ],
        "final_content": "Spirit If... is by Kevin Drew [1]. Kevin Drew was born in Toronto [2]. "
        "Greyhound buses in Toronto leave from Toronto Coach Terminal [3]. So the final answer is Toronto "
        "Coach Terminal.",
    }
)
