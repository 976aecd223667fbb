"""Reading a chain of queries out of the LLM's reply: the paper's text format, leniently, and the
JSON a structured-output endpoint returns."""

from __future__ import annotations

import json

import pytest
from answerbox.processors.chain_of_query.parser import (
    CHAIN_SCHEMA,
    ChainNode,
    citation_markers,
    final_answer,
    parse_chain,
    read_chain,
)

from tests.support.chains import RIGHT_CHAIN, RIGHT_CHAIN_JSON


def test_parser_survives_missing_numbers_extra_text_and_no_final_content() -> None:
    text = (
        '[Question]: "echoed question"\nSure! Here is the chain.\n'
        "[Query]: Who wrote Dune?\nsome rambling\n[Answer]: Frank Herbert.\n"
        "[Query 7]: When was Dune published?\n"
        "[Query]: Where was Herbert born?\n[Answer 3]: Tacoma\n"
        "[Question]: an invented next example\n[Query 1]: ignored\n"
    )
    chain = parse_chain(text)
    assert [(n.query, n.answer) for n in chain.nodes] == [
        ("Who wrote Dune?", "Frank Herbert."),
        ("When was Dune published?", None),  # no answer: unsolved
        ("Where was Herbert born?", "Tacoma"),
    ]
    assert chain.final_content is None
    assert chain.nodes[1].unsolved


def test_parser_ends_the_chain_at_the_unsolved_query() -> None:
    chain = parse_chain(
        "[Query 1]: Who is the performer?\n[Answer 1]: Kevin Drew\n[Query 2]: Where born?\n"
        "[Unsolved Query]: Where was Kevin Drew born?\n[Answer 2]: made up\n[Final Content]: made up [1]."
    )
    assert [(n.query, n.answer) for n in chain.nodes] == [
        ("Who is the performer?", "Kevin Drew"),
        ("Where was Kevin Drew born?", None),
    ]
    assert chain.final_content is None
    assert parse_chain("no markers at all").empty


def test_final_answer_and_markers() -> None:
    content = (
        "Drew was born in Toronto [2]. Buses leave from Toronto Coach Terminal [3][2]. "
        "So the final answer is Toronto Coach Terminal [3]."
    )
    assert final_answer(content) == "Toronto Coach Terminal"
    assert citation_markers(content) == [2, 3]


def test_a_json_chain_reads_as_its_text_form_does() -> None:
    assert read_chain(RIGHT_CHAIN_JSON, structured=True) == parse_chain(RIGHT_CHAIN)


def test_an_empty_answer_is_an_unsolved_query_that_ends_the_chain() -> None:
    reply = json.dumps(
        {
            "nodes": [
                {"query": "Who is the performer?", "answer": "Kevin Drew"},
                {"query": "Where was Kevin Drew born?", "answer": " "},
                {"query": "made up", "answer": "made up"},
            ],
            "final_content": "made up [1].",
        }
    )
    chain = read_chain(reply, structured=True)
    assert chain.nodes == (
        ChainNode("Who is the performer?", "Kevin Drew"),
        ChainNode("Where was Kevin Drew born?", None),
    )
    assert chain.final_content is None
    final = read_chain('{"final_content": "Drew was born in Toronto [1]."}', structured=True).final_content
    assert final == "Drew was born in Toronto [1]."


def test_a_json_chain_cut_off_by_max_tokens_keeps_its_nodes_and_a_cut_answer_is_unsolved() -> None:
    performer = 'Who is the "performer"?'  # escaped in the JSON
    nodes = [{"query": performer, "answer": "Kevin Drew"}, {"query": "Where was Kevin Drew born?", "answer": "Toronto"}]
    reply = json.dumps({"nodes": nodes, "final_content": "Drew was born in Toronto [2]."})
    whole = (ChainNode(performer, "Kevin Drew"), ChainNode("Where was Kevin Drew born?", "Toronto"))
    assert read_chain(reply[: reply.index("final_content")], structured=True).nodes == whole
    assert read_chain(reply[: reply.index("}")], structured=True).nodes == whole[:1]  # cut before the node's "}"
    # Cut inside the second answer: its query stands, unsolved, for IR to answer.
    chain = read_chain(reply[: reply.index("Toronto") + 3], structured=True)
    assert chain.nodes == (whole[0], ChainNode("Where was Kevin Drew born?", None))
    assert chain.final_content is None


def test_a_first_answer_that_runs_into_max_tokens_leaves_its_query_unsolved() -> None:
    # SmolLM2 with a schema: the query is written, then the answer repeats itself until max_tokens.
    reply = (
        '{\n  "nodes": [\n    {\n      "query": "What else did Pamela Jelimo win?",\n      "answer": "'
        + "The answer is: " * 40
    )
    assert read_chain(reply, structured=True).nodes == (ChainNode("What else did Pamela Jelimo win?", None),)
    assert read_chain(reply + "\\", structured=True).nodes == (
        ChainNode("What else did Pamela Jelimo win?", None),
    )  # inside an escape


def test_an_answer_that_fills_the_schemas_cap_is_unsolved() -> None:
    # With capped strings the grammar closes a looping answer at its cap: it never ended either.
    cap = CHAIN_SCHEMA.body["properties"]["nodes"]["items"]["properties"]["answer"]["maxLength"]
    looped = ("The answer is that " * 20)[:cap]
    nodes = [
        {"query": "Who is the performer?", "answer": looped[:-1]},
        {"query": "Where was he born?", "answer": looped},
    ]
    chain = read_chain(json.dumps({"nodes": nodes, "final_content": ""}), structured=True)
    assert chain.nodes == (
        ChainNode("Who is the performer?", " ".join(looped[:-1].split())),
        ChainNode("Where was he born?", None),
    )


@pytest.mark.parametrize(
    "reply",
    [RIGHT_CHAIN, '{"nodes": [{"query": "Who is', '{"nodes": "not a list"}'],
    ids=["text", "cut-off-before-a-node", "wrong-shape"],
)
def test_a_chain_reply_that_is_not_the_json_is_read_as_text(reply: str) -> None:
    assert read_chain(reply, structured=True) == parse_chain(reply)
