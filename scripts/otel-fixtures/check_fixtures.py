#!/usr/bin/env python3
"""Sanity checks on the decoded fixtures (expected.json written by make_expected.py).

Usage: check_fixtures.py OPENAI_AGENTS_DIR GENAI_CLIENT_DIR
Fails loudly if a recording no longer carries the facts the Rust tests rely on.
"""
import json
import os
import sys


def load(d):
    with open(os.path.join(d, "expected.json")) as f:
        return json.load(f)


def check_openai_agents(d):
    e = load(d)
    assert e["service_name"] == "support-bot", e["service_name"]
    spans = e["spans"]
    assert len(e["batch_files"]) == len(spans), "SimpleSpanProcessor: expected one span per batch"
    kinds = {}
    for s in spans:
        kinds.setdefault(s["attributes"].get("openinference.span.kind"), []).append(s)
    for k in ("AGENT", "LLM", "TOOL", "CHAIN"):
        assert kinds.get(k), f"no {k} span"
    llm = kinds["LLM"]
    assert all(
        isinstance(s["attributes"].get("llm.token_count.prompt"), int)
        and isinstance(s["attributes"].get("llm.token_count.completion"), int)
        and s["attributes"].get("llm.model_name")
        for s in llm
    ), "LLM spans without token counts / model"
    tool = [s for s in kinds["TOOL"] if s["attributes"].get("tool.name") == "get_order_status"]
    assert tool and "A-1001" in tool[0]["attributes"]["input.value"] and "shipped" in tool[0]["attributes"]["output.value"]
    assert any(s["name"] == "Support" for s in kinds["AGENT"]) and any(s["name"] == "Billing" for s in kinds["AGENT"])
    # children arrive before their parents
    seen = set()
    for s in spans:
        assert s["parent_span_id"] not in seen, f"parent of {s['name']} arrived before it"
        seen.add(s["span_id"])
    ids = {s["span_id"] for s in spans}
    assert all(s["parent_span_id"] is None or s["parent_span_id"] in ids for s in spans), "dangling parent"
    assert len(e["trace_ids"]) == 2
    print(f"{d}: OK ({len(spans)} spans, {len(e['trace_ids'])} traces)")


def check_genai_client(d):
    e = load(d)
    assert e["service_name"] == "genai-client", e["service_name"]
    spans = e["spans"]
    by_op = {}
    for s in spans:
        by_op.setdefault(s["attributes"].get("gen_ai.operation.name"), []).append(s)
    chats = by_op["chat"]
    assert len(chats) == 2 and len(by_op["execute_tool"]) == 1 and len(by_op["invoke_agent"]) == 1
    root = by_op["invoke_agent"][0]
    assert root["parent_span_id"] is None and root["name"] == "invoke_agent weather-agent"
    for s in chats:
        a = s["attributes"]
        assert s["kind"] == "SPAN_KIND_CLIENT" and s["parent_span_id"] == root["span_id"]
        for key in (
            "gen_ai.request.model",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.response.finish_reasons",
            "gen_ai.input.messages",
            "gen_ai.output.messages",
        ):
            assert key in a, f"{s['name']} lacks {key}"
    tool = by_op["execute_tool"][0]
    out = json.loads(chats[0]["attributes"]["gen_ai.output.messages"])
    assert out[0]["parts"][0]["id"] == tool["attributes"]["gen_ai.tool.call.id"]
    assert len(e["trace_ids"]) == 1
    print(f"{d}: OK ({len(spans)} spans, {len(e.get('log_records', []))} log records)")


if __name__ == "__main__":
    check_openai_agents(sys.argv[1])
    check_genai_client(sys.argv[2])
