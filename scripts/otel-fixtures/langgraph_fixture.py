#!/usr/bin/env python3
"""Record a LangGraph ReAct agent run instrumented with OpenInference.

No network: the chat model is ScriptedChatModel, a
langchain_core GenericFakeChatModel subclass that returns canned AIMessages
(with usage_metadata and response_metadata) and supports bind_tools, so it can
drive langgraph.prebuilt.create_react_agent. OpenInference's
LangChainInstrumentor turns every LangChain/LangGraph run (graph, nodes, chat
model call, tool call) into a span.

One trace is produced:
  create_react_agent(model, [get_weather], prompt="You are a weather assistant.")
  invoked with "What is the weather in Paris?": model call 1 returns a tool
  call get_weather({"city": "Paris"}) id call_weather_1 (12 in / 7 out), the
  tool runs, model call 2 answers "It is sunny in Paris." (20 in / 8 out).

Spans are exported with SimpleSpanProcessor (one OTLP/HTTP POST per span,
children before parents) to $OTLP_RECORDER_ENDPOINT/v1/traces.
"""
import json
import os
import time
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from openinference.instrumentation import using_session, using_user
from openinference.instrumentation.langchain import LangChainInstrumentor

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import create_react_agent

ENDPOINT = os.environ.get("OTLP_RECORDER_ENDPOINT", "http://127.0.0.1:4318")
MODEL_NAME = "fake-gpt"


class ScriptedChatModel(GenericFakeChatModel):
    """GenericFakeChatModel that accepts tools like a real provider model.

    `model_name` makes LangChain report `ls_model_name=fake-gpt` in the run
    metadata (BaseChatModel._get_ls_params), which OpenInference maps to
    `llm.model_name`. bind_tools binds the OpenAI-format tool schemas as the
    `tools` kwarg, as ChatOpenAI does (so they appear in the invocation
    parameters); _generate ignores them and just pops the next scripted message.
    """

    model_name: str = MODEL_NAME

    def bind_tools(self, tools, *, tool_choice=None, **kwargs: Any):
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        time.sleep(0.01)  # pretend latency so durations are non-zero
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


@tool
def get_weather(city: str) -> str:
    """Get the current weather forecast for a city."""
    time.sleep(0.005)
    return json.dumps({"city": city, "forecast": "sunny", "temperature_c": 21})


def main() -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "langgraph-fixture"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{ENDPOINT}/v1/traces")))
    LangChainInstrumentor().instrument(tracer_provider=provider)

    model = ScriptedChatModel(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[
                        {
                            "name": "get_weather",
                            "args": {"city": "Paris"},
                            "id": "call_weather_1",
                            "type": "tool_call",
                        }
                    ],
                    usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
                    response_metadata={"model_name": MODEL_NAME, "finish_reason": "tool_calls"},
                    id="run-fixture-001",
                ),
                AIMessage(
                    content="It is sunny in Paris.",
                    usage_metadata={"input_tokens": 20, "output_tokens": 8, "total_tokens": 28},
                    response_metadata={"model_name": MODEL_NAME, "finish_reason": "stop"},
                    id="run-fixture-002",
                ),
            ]
        )
    )
    agent = create_react_agent(model, [get_weather], prompt="You are a weather assistant.")

    with using_session("session-42"), using_user("user-7"):
        result = agent.invoke(
            {"messages": [("user", "What is the weather in Paris?")]},
            config={
                "configurable": {"thread_id": "thread-42"},
                "metadata": {"session_id": "session-42", "user_id": "user-7"},
            },
        )
    print("final answer:", result["messages"][-1].content)

    provider.force_flush()
    provider.shutdown()


if __name__ == "__main__":
    main()
