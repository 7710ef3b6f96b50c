#!/usr/bin/env python3
"""Record a LlamaIndex FunctionAgent run instrumented with OpenInference.

No network: the LLM is ScriptedFunctionCallingLLM, a
llama_index.core.llms.function_calling.FunctionCallingLLM subclass that
returns canned answers shaped like llama-index-llms-openai's (chat
completions API): the assistant message carries its tool calls both in
`additional_kwargs["tool_calls"]` (OpenAI `tool_calls` dicts, arguments a JSON
string) and as `ToolCallBlock`s in `blocks`; `raw` is an OpenAI-style
chat.completion(.chunk) dict with `usage`, and the ChatResponse's own
`additional_kwargs` hold prompt/completion/total token counts, as
`OpenAI._get_response_token_counts` does. OpenInference's
LlamaIndexInstrumentor turns every LlamaIndex dispatcher span (workflow run,
workflow steps, LLM calls, tool calls) into an OTel span.

One trace is produced:
  FunctionAgent(tools=[get_weather], llm=ScriptedFunctionCallingLLM(),
  system_prompt="You are a weather assistant.", name="weather_agent")
  run with user_msg "What is the weather in Paris?": model call 1 returns a
  tool call get_weather({"city": "Paris"}) id call_li_1 (12 in / 7 out,
  finish_reason tool_calls), the tool runs and returns a dict, model call 2
  answers "It is sunny in Paris." (31 in / 9 out, finish_reason stop).

FunctionAgent streams by default (streaming=True), so the model is called
through astream_chat_with_tools -> astream_chat; the scripted stream yields
content/tool-call chunks, a chunk with finish_reason, and a last chunk with
empty choices and `usage` (what OpenAI sends with
stream_options={"include_usage": True}). Set LLAMAINDEX_FIXTURE_STREAMING=0 to
run the agent with streaming=False (achat_with_tools -> achat) instead.

Spans are exported with SimpleSpanProcessor (one OTLP/HTTP POST per span,
children before parents) to $OTLP_RECORDER_ENDPOINT/v1/traces.
"""
import asyncio
import json
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Union

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.llms.utils import parse_partial_json
from llama_index.core.tools import FunctionTool

ENDPOINT = os.environ.get("OTLP_RECORDER_ENDPOINT", "http://127.0.0.1:4318")
MODEL_NAME = "scripted-gpt"
STREAMING = os.environ.get("LLAMAINDEX_FIXTURE_STREAMING", "1") != "0"

# The two scripted model turns. "content" is the assistant text, "tool_calls"
# OpenAI chat-completions tool calls (arguments a JSON string).
SCRIPT: List[Dict[str, Any]] = [
    {
        "id": "chatcmpl-li-001",
        "content": "",
        "tool_calls": [
            {
                "id": "call_li_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
            }
        ],
        "finish_reason": "tool_calls",
        "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
        "chunks": [],  # tool call arrives in one delta
    },
    {
        "id": "chatcmpl-li-002",
        "content": "It is sunny in Paris.",
        "tool_calls": [],
        "finish_reason": "stop",
        "usage": {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40},
        "chunks": ["It is sunny ", "in Paris."],
    },
]


def _token_counts(raw: Dict[str, Any]) -> Dict[str, int]:
    """Like llama-index-llms-openai's OpenAI._get_response_token_counts."""
    usage = raw.get("usage")
    if not usage:
        return {}
    return {
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "total_tokens": usage["total_tokens"],
    }


def _message(content: str, tool_calls: List[Dict[str, Any]]) -> ChatMessage:
    """Assistant message the way llama-index-llms-openai builds it."""
    blocks: List[Any] = [TextBlock(text=content)]
    additional_kwargs: Dict[str, Any] = {}
    if tool_calls:
        additional_kwargs["tool_calls"] = tool_calls
        for tc in tool_calls:
            blocks.append(
                ToolCallBlock(
                    tool_call_id=tc["id"],
                    tool_name=tc["function"]["name"],
                    tool_kwargs=tc["function"]["arguments"],
                )
            )
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks, additional_kwargs=additional_kwargs)


class ScriptedFunctionCallingLLM(FunctionCallingLLM):
    """FunctionCallingLLM that pops scripted OpenAI-shaped answers."""

    turn: int = 0

    @classmethod
    def class_name(cls) -> str:
        return "ScriptedFunctionCallingLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=128000,
            num_output=-1,
            is_chat_model=True,
            is_function_calling_model=True,
            model_name=MODEL_NAME,
        )

    def _next(self) -> Dict[str, Any]:
        step = SCRIPT[self.turn]
        self.turn += 1
        time.sleep(0.01)  # pretend latency so durations are non-zero
        return step

    # --- non-streaming -------------------------------------------------
    def _response(self, step: Dict[str, Any]) -> ChatResponse:
        message = {"role": "assistant", "content": step["content"] or None}
        if step["tool_calls"]:
            message["tool_calls"] = step["tool_calls"]
        raw = {
            "id": step["id"],
            "object": "chat.completion",
            "created": 1760000000,
            "model": MODEL_NAME,
            "choices": [{"index": 0, "message": message, "finish_reason": step["finish_reason"]}],
            "usage": step["usage"],
        }
        return ChatResponse(
            message=_message(step["content"], step["tool_calls"]),
            raw=raw,
            additional_kwargs=_token_counts(raw),
        )

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._response(self._next())

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._response(self._next())

    # --- streaming -----------------------------------------------------
    def _stream(self, step: Dict[str, Any]) -> List[ChatResponse]:
        """The ChatResponses llama-index-llms-openai yields for a chunk stream."""

        def chunk(delta: Dict[str, Any], finish_reason: Optional[str], usage=None, choices=True):
            return {
                "id": step["id"],
                "object": "chat.completion.chunk",
                "created": 1760000000,
                "model": MODEL_NAME,
                "choices": (
                    [{"index": 0, "delta": delta, "finish_reason": finish_reason}] if choices else []
                ),
                "usage": usage,
            }

        raws = []
        if step["tool_calls"]:
            raws.append(
                (
                    chunk(
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [dict(tc, index=i) for i, tc in enumerate(step["tool_calls"])],
                        },
                        None,
                    ),
                    "",
                )
            )
        for i, piece in enumerate(step["chunks"]):
            delta = {"content": piece}
            if i == 0:
                delta["role"] = "assistant"
            raws.append((chunk(delta, None), piece))
        raws.append((chunk({}, step["finish_reason"]), ""))
        raws.append((chunk({}, None, usage=step["usage"], choices=False), ""))

        out, content = [], ""
        for raw, piece in raws:
            content += piece
            out.append(
                ChatResponse(
                    message=_message(content, step["tool_calls"]),
                    delta=piece,
                    raw=raw,
                    additional_kwargs=_token_counts(raw),
                )
            )
        return out

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        responses = self._stream(self._next())

        def gen() -> ChatResponseGen:
            yield from responses

        return gen()

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        responses = self._stream(self._next())

        async def gen() -> ChatResponseAsyncGen:
            for r in responses:
                await asyncio.sleep(0.002)
                yield r

        return gen()

    # --- completion API (unused by the agent; required by the base class) ---
    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError("chat model only")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        raise NotImplementedError("chat model only")

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError("chat model only")

    @llm_completion_callback()
    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError("chat model only")

    # --- function calling (as llama-index-llms-openai's OpenAI) ---------
    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: Optional[Union[str, ChatMessage]] = None,
        chat_history: Optional[List[ChatMessage]] = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        tool_choice: Optional[Union[str, dict]] = None,
        **kwargs: Any,
    ) -> Dict[str, Any]:
        tool_specs = [tool.metadata.to_openai_tool(skip_length_check=True) for tool in tools]
        if isinstance(user_msg, str):
            user_msg = ChatMessage(role=MessageRole.USER, content=user_msg)
        messages = chat_history or []
        if user_msg:
            messages.append(user_msg)
        out = {
            "messages": messages,
            "tools": tool_specs or None,
            "tool_choice": (tool_choice or ("required" if tool_required else "auto")) if tool_specs else None,
            **kwargs,
        }
        if tool_specs:
            out["parallel_tool_calls"] = allow_parallel_tool_calls
        return out

    def get_tool_calls_from_response(
        self,
        response: ChatResponse,
        error_on_no_tool_call: bool = True,
        **kwargs: Any,
    ) -> List[ToolSelection]:
        tool_calls = response.message.additional_kwargs.get("tool_calls", [])
        if len(tool_calls) < 1:
            if error_on_no_tool_call:
                raise ValueError(f"Expected at least one tool call, but got {len(tool_calls)} tool calls.")
            return []
        selections = []
        for tc in tool_calls:
            if tc["type"] != "function":
                raise ValueError("Invalid tool type.")
            try:
                args = parse_partial_json(tc["function"]["arguments"])
            except (ValueError, TypeError):
                args = {}
            selections.append(ToolSelection(tool_id=tc["id"], tool_name=tc["function"]["name"], tool_kwargs=args))
        return selections


def get_weather(city: str) -> dict:
    """Get the current weather forecast for a city."""
    time.sleep(0.005)
    return {"city": city, "forecast": "sunny", "temperature_c": 21}


async def run_agent() -> str:
    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(fn=get_weather)],
        llm=ScriptedFunctionCallingLLM(),
        system_prompt="You are a weather assistant.",
        name="weather_agent",
        streaming=STREAMING,
    )
    result = await agent.run(user_msg="What is the weather in Paris?")
    return str(result)


def main() -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "llamaindex-fixture"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{ENDPOINT}/v1/traces")))
    LlamaIndexInstrumentor().instrument(tracer_provider=provider)

    answer = asyncio.run(run_agent())
    print("final answer:", answer)

    provider.force_flush()
    provider.shutdown()


if __name__ == "__main__":
    main()
