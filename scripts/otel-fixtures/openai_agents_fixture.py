#!/usr/bin/env python3
"""Record an OpenAI Agents SDK run instrumented with OpenInference.

No network: the agents use ScriptedModel, a `Model` subclass that returns
canned Responses-API outputs (with token usage) and wraps each call in the
SDK's `response_span`, exactly like the SDK's own OpenAIResponsesModel does,
so OpenInference turns every model call into an LLM span.

Two traces are produced, in this order:
  1. "Support" agent: model calls the function tool get_order_status with JSON
     arguments, the tool runs, the model answers with text.
  2. "Support" agent hands off to "Billing" agent (transfer_to_billing),
     Billing answers with text.

Spans are exported with SimpleSpanProcessor (one OTLP/HTTP POST per span,
children before parents) to $OTLP_RECORDER_ENDPOINT/v1/traces.
"""
import asyncio
import itertools
import os
import time

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

from agents import Agent, Runner, function_tool, handoff
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.tracing import response_span
from agents.usage import InputTokensDetails, OutputTokensDetails, Usage, model_usage_to_span_usage
from openai.types.responses import Response

ENDPOINT = os.environ.get("OTLP_RECORDER_ENDPOINT", "http://127.0.0.1:4318")
MODEL_NAME = "gpt-4o-mini-2024-07-18"

_ids = itertools.count(1)


def _response(output: list[dict], input_tokens: int, output_tokens: int, instructions, tools) -> Response:
    n = next(_ids)
    return Response.model_validate(
        {
            "id": f"resp_fixture_{n:03d}",
            "object": "response",
            "created_at": int(time.time()),
            "model": MODEL_NAME,
            "status": "completed",
            "instructions": instructions,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": tools,
            "temperature": 1.0,
            "top_p": 1.0,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
    )


def tool_call(name: str, arguments: str, call_id: str) -> dict:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def text(msg: str) -> dict:
    return {
        "type": "message",
        "id": f"msg_fixture_{next(_ids):03d}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": msg, "annotations": []}],
    }


class ScriptedModel(Model):
    """Returns the next scripted (output_items, input_tokens, output_tokens) per call."""

    def __init__(self, script):
        self._script = list(script)

    async def get_response(
        self,
        system_instructions,
        input,
        model_settings,
        tools,
        output_schema,
        handoffs,
        tracing,
        *,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
    ) -> ModelResponse:
        output, in_tok, out_tok = self._script.pop(0)
        tool_params = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.params_json_schema,
                "strict": t.strict_json_schema,
            }
            for t in tools
        ] + [
            {
                "type": "function",
                "name": h.tool_name,
                "description": h.tool_description,
                "parameters": h.input_json_schema,
                "strict": h.strict_json_schema,
            }
            for h in handoffs
        ]
        with response_span(disabled=tracing.is_disabled()) as span:
            await asyncio.sleep(0.01)  # pretend latency so durations are non-zero
            resp = _response(output, in_tok, out_tok, system_instructions, tool_params)
            usage = Usage(
                requests=1,
                input_tokens=in_tok,
                output_tokens=out_tok,
                total_tokens=in_tok + out_tok,
                input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
            )
            span.span_data.usage = model_usage_to_span_usage(usage)
            if tracing.include_data():
                span.span_data.response = resp
                span.span_data.input = input
            return ModelResponse(output=resp.output, usage=usage, response_id=resp.id)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("streaming is not scripted")


@function_tool
def get_order_status(order_id: str) -> str:
    """Look up the shipping status of an order."""
    time.sleep(0.005)
    return f"Order {order_id} shipped on 2024-05-02 via UPS, tracking 1Z999AA10123456784."


async def main() -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "support-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{ENDPOINT}/v1/traces")))
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)

    # --- trace 1: function tool ---
    support_model = ScriptedModel(
        [
            ([tool_call("get_order_status", '{"order_id":"A-1001"}', "call_order_1")], 112, 19),
            (
                [text("Your order A-1001 shipped on 2024-05-02 via UPS (tracking 1Z999AA10123456784).")],
                171,
                28,
            ),
        ]
    )
    support = Agent(
        name="Support",
        instructions="You are a helpful customer support agent. Use tools to look up orders.",
        tools=[get_order_status],
        model=support_model,
    )
    result = await Runner.run(support, "Where is my order A-1001?")
    print("trace 1 final output:", result.final_output)

    # --- trace 2: handoff to a second agent ---
    billing = Agent(
        name="Billing",
        instructions="You handle billing and refund questions.",
        model=ScriptedModel(
            [([text("I've opened refund request R-77 for order A-1001; expect it within 5 days.")], 140, 22)]
        ),
    )
    triage = Agent(
        name="Support",
        instructions="You are a helpful customer support agent. Hand billing questions to Billing.",
        tools=[get_order_status],
        handoffs=[handoff(billing)],
        model=ScriptedModel([([tool_call("transfer_to_billing", "{}", "call_handoff_1")], 98, 11)]),
    )
    result = await Runner.run(triage, "I was charged twice for order A-1001, please refund one.")
    print("trace 2 final output:", result.final_output, "(last agent:", result.last_agent.name + ")")

    provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
