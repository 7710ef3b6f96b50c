#!/usr/bin/env python3
"""Record a Pydantic AI agent run with Pydantic AI's own OpenTelemetry instrumentation.

No network: the model is pydantic_ai.models.function.FunctionModel
(model_name "scripted-gpt") driven by `scripted_model`, which returns canned
ModelResponses. Pydantic AI's built-in instrumentation
(`Agent(..., capabilities=[Instrumentation(settings=InstrumentationSettings(...))])`) emits GenAI-semconv
spans itself: the agent run, each model request and each tool call. No logfire
SDK is involved (pydantic-ai-slim only depends on `logfire-api`, a no-op shim),
and nothing is sent anywhere but the local recorder.

One trace is produced:
  Agent "weather_agent" (system prompt "You are a weather assistant.", tool
  get_weather) runs "What is the weather in Paris?": model call 1 returns a
  tool call get_weather({"city": "Paris"}) id call_pyd_1 (12 in / 7 out,
  finish_reason tool_call), the tool runs and returns
  {"city": "Paris", "forecast": "sunny", "temperature_c": 21}, model call 2
  answers "It is sunny in Paris." (31 in / 9 out, finish_reason stop).

Instrumentation data format: version 6, the newest one (default is 5; 6 only
moves tool results from role "user" to role "tool" in the message attributes).

Spans are exported with SimpleSpanProcessor (one OTLP/HTTP POST per span,
children before parents) to $OTLP_RECORDER_ENDPOINT/v1/traces.
"""
import os
import time

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.usage import RequestUsage

ENDPOINT = os.environ.get("OTLP_RECORDER_ENDPOINT", "http://127.0.0.1:4318")
MODEL_NAME = "scripted-gpt"
INSTRUMENTATION_VERSION = 6

RESPONSES = [
    ModelResponse(
        parts=[ToolCallPart(tool_name="get_weather", args={"city": "Paris"}, tool_call_id="call_pyd_1")],
        usage=RequestUsage(input_tokens=12, output_tokens=7),
        finish_reason="tool_call",
        provider_response_id="resp-pyd-001",
    ),
    ModelResponse(
        parts=[TextPart("It is sunny in Paris.")],
        usage=RequestUsage(input_tokens=31, output_tokens=9),
        finish_reason="stop",
        provider_response_id="resp-pyd-002",
    ),
]


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Return the next canned response: call N of the run gets RESPONSES[N]."""
    time.sleep(0.01)  # pretend latency so durations are non-zero
    n_responses_so_far = sum(1 for m in messages if isinstance(m, ModelResponse))
    return RESPONSES[n_responses_so_far]


def main() -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "pydantic-ai-fixture"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{ENDPOINT}/v1/traces")))

    model = FunctionModel(scripted_model, model_name=MODEL_NAME)
    agent = Agent(
        model,
        system_prompt="You are a weather assistant.",
        name="weather_agent",
        # pydantic-ai 2.x has no `instrument=` argument on Agent any more; the
        # per-agent way is the Instrumentation capability (equivalently:
        # `agent.instrument = settings` or `Agent.instrument_all(settings)`).
        capabilities=[
            Instrumentation(
                settings=InstrumentationSettings(
                    tracer_provider=provider,
                    include_content=True,
                    version=INSTRUMENTATION_VERSION,
                )
            )
        ],
    )

    @agent.tool_plain
    def get_weather(city: str) -> dict:
        """Get the current weather forecast for a city."""
        time.sleep(0.005)
        return {"city": city, "forecast": "sunny", "temperature_c": 21}

    result = agent.run_sync("What is the weather in Paris?")
    print("final answer:", result.output)
    print("usage:", result.usage)

    provider.force_flush()
    provider.shutdown()


if __name__ == "__main__":
    main()
