#!/usr/bin/env python3
"""Record the official `openai` client instrumented with opentelemetry-instrumentation-openai-v2.

No network: the script starts its own fake OpenAI-compatible
chat-completions server on 127.0.0.1 (non-streaming). The first
/v1/chat/completions request is answered with a `get_weather` tool call, the
second (which carries the tool result) with a final text answer; both
responses carry `usage`.

Span tree (one trace):
  invoke_agent weather-agent      hand-made (gen_ai.operation.name=invoke_agent)
    chat <model>                  from the real openai-v2 instrumentation
    execute_tool get_weather      hand-made (gen_ai.operation.name=execute_tool)
    chat <model>                  from the real openai-v2 instrumentation

Which semantic-convention flavour and where message content goes is decided
by the standard environment variables, which make.sh sets:
  OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental   (newer conventions)
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_and_event | span_only | event_only | true

Spans go through SimpleSpanProcessor (one POST per span, children first) to
$OTLP_RECORDER_ENDPOINT/v1/traces; log records (content events) through
SimpleLogRecordProcessor to $OTLP_RECORDER_ENDPOINT/v1/logs.
"""
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

ENDPOINT = os.environ.get("OTLP_RECORDER_ENDPOINT", "http://127.0.0.1:4318")
REQUEST_MODEL = "gpt-4o-mini"
RESPONSE_MODEL = "gpt-4o-mini-2024-07-18"
TOOL_CALL_ID = "call_wx_9f3a1c"
TOOL_ARGS = '{"city": "Paris", "unit": "celsius"}'


# ---------------------------------------------------------------- fake server
class FakeOpenAI(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"unknown path {self.path}"}})
            return
        time.sleep(0.02)  # pretend latency
        has_tool_result = any(m.get("role") == "tool" for m in body["messages"])
        if not has_tool_result:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": TOOL_CALL_ID,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": TOOL_ARGS},
                    }
                ],
            }
            finish, usage, rid = "tool_calls", (84, 21), "chatcmpl-fixture-001"
        else:
            message = {
                "role": "assistant",
                "content": "It's 18°C and partly cloudy in Paris right now.",
            }
            finish, usage, rid = "stop", (131, 15), "chatcmpl-fixture-002"
        self._send(
            200,
            {
                "id": rid,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": RESPONSE_MODEL,
                "system_fingerprint": "fp_fixture",
                "service_tier": "default",
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": {
                    "prompt_tokens": usage[0],
                    "completion_tokens": usage[1],
                    "total_tokens": usage[0] + usage[1],
                },
            },
        )

    def _send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", "req_fixture")
        # One request per connection, so a keep-alive connection can never
        # hold the single server thread (and block server.shutdown()).
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        pass


# ---------------------------------------------------------------- the "agent"
def get_weather(city: str, unit: str = "celsius") -> str:
    return json.dumps({"city": city, "temperature": 18, "unit": unit, "conditions": "partly cloudy"})


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    }
]


def main() -> None:
    resource = Resource.create({"service.name": "genai-client"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{ENDPOINT}/v1/traces")))
    trace.set_tracer_provider(tracer_provider)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{ENDPOINT}/v1/logs")))
    set_logger_provider(logger_provider)

    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    import openai  # noqa: E402  (after instrumenting, as in the package docs)

    server = HTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = openai.OpenAI(
        api_key="sk-fixture-not-a-real-key",
        base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
        max_retries=0,
    )

    tracer = trace.get_tracer("runlens.fixture.genai-client")
    messages = [
        {"role": "system", "content": "You are a weather assistant. Use tools when needed."},
        {"role": "user", "content": "What's the weather in Paris?"},
    ]
    with tracer.start_as_current_span(
        "invoke_agent weather-agent",
        kind=trace.SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather-agent",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": REQUEST_MODEL,
        },
    ):
        first = client.chat.completions.create(
            model=REQUEST_MODEL, messages=messages, tools=TOOLS, temperature=0.2
        )
        call = first.choices[0].message.tool_calls[0]
        messages.append(first.choices[0].message.model_dump(exclude_none=True))

        with tracer.start_as_current_span(
            f"execute_tool {call.function.name}",
            kind=trace.SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.function.name,
                "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": call.function.arguments,
            },
        ) as tool_span:
            time.sleep(0.005)
            result = get_weather(**json.loads(call.function.arguments))
            tool_span.set_attribute("gen_ai.tool.call.result", result)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

        second = client.chat.completions.create(
            model=REQUEST_MODEL, messages=messages, tools=TOOLS, temperature=0.2
        )
        print("final answer:", second.choices[0].message.content)

    client.close()
    server.shutdown()
    server.server_close()
    tracer_provider.shutdown()
    logger_provider.shutdown()


if __name__ == "__main__":
    main()
