#!/usr/bin/env python3
"""An OpenAI Agents SDK agent whose send_email tool waits for a person's approval in runlens.

runlens does not run this agent: the tool asks for approval over the REST API
(POST /api/approval-requests), long-polls until someone approves or rejects it
in the /approvals inbox, then sends the email with the arguments the person
approved (they may have edited them), or tells the model why it was rejected.
Only the standard library talks to runlens.

The model is scripted (no network, no API key): turn 1 calls send_email, turn 2
answers "Done: <what the tool returned>". Swap in a real model and nothing
else changes.

Environment:
  RUNLENS_URL          e.g. http://127.0.0.1:3000
  RUNLENS_API_KEY      an API key (rl_…) of the project whose inbox gets the request
  RUNLENS_RUN_NAME     what the inbox calls this run (default "approval-agent")
  RUNLENS_EXTERNAL_ID  this run's own id (default: a random one)

Prints `REQUEST <id>` once the request exists, and `FINAL <final output>` at the end.
Needs `pip install openai-agents==0.24.0` (scripts/setup.sh installs it).
"""
import functools
import inspect
import json
import os
import urllib.error
import urllib.request
import uuid

from agents import Agent, RunConfig, Runner, Usage, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

RUNLENS_URL = os.environ["RUNLENS_URL"].rstrip("/")
RUNLENS_API_KEY = os.environ["RUNLENS_API_KEY"]
RUN = {
    "external_id": os.environ.get("RUNLENS_EXTERNAL_ID") or f"run-{uuid.uuid4().hex[:12]}",
    "name": os.environ.get("RUNLENS_RUN_NAME") or "approval-agent",
}


def runlens(method: str, path: str, body: dict | None = None) -> dict:
    """One call of the runlens API; an error answer raises with its message."""
    request = urllib.request.Request(
        RUNLENS_URL + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {RUNLENS_API_KEY}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:  # long polls answer within 30 s
            return json.load(reply)
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"runlens {method} {path}: {e.code} {e.read().decode(errors='replace')}") from None


def require_approval(tool):
    """Runs `tool` only once a person approves the call in runlens, with the arguments they approved.

    A rejection (or the request's timeout) becomes the tool's result, reason included,
    so the model can react to it.
    """

    @functools.wraps(tool)
    def wrapper(*args, **kwargs):
        arguments = inspect.signature(tool).bind(*args, **kwargs).arguments
        request = runlens("POST", "/api/approval-requests", {
            "tool": tool.__name__,
            "arguments": arguments,
            "context": "The support agent wants to send this email.",
            "run": RUN,
            "idempotency_key": uuid.uuid4().hex,  # one per call; resend it when retrying the POST
        })
        print(f"REQUEST {request['id']}", flush=True)
        while request["status"] == "pending":
            request = runlens("GET", f"/api/approval-requests/{request['id']}?wait=30")
        decision = request["decision"] or {}
        if request["status"] == "approved":
            return tool(**decision["arguments"])
        return f"{request['status']} by {decision.get('decided_by', 'runlens')}: {decision.get('reason')}"

    return wrapper


# failure_error_function=None: if runlens cannot be reached, the run stops with
# the error instead of the model being told the tool failed.
@function_tool(failure_error_function=None)
@require_approval
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}: {subject}"  # a real agent would send it here


class ScriptedModel(Model):
    """Turn 1: call send_email. Turn 2: answer with what the tool returned."""

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        results = [item["output"] for item in input if isinstance(item, dict)
                   and item.get("type") == "function_call_output"]
        if not results:
            arguments = {"to": "team@example.com", "subject": "Weekly report", "body": "All green."}
            item = ResponseFunctionToolCall(type="function_call", call_id="call_1", name="send_email",
                                            arguments=json.dumps(arguments))
        else:
            answer = ResponseOutputText(type="output_text", text=f"Done: {results[-1]}", annotations=[])
            item = ResponseOutputMessage(type="message", id="msg_1", role="assistant", status="completed",
                                         content=[answer])
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the scripted model does not stream")


agent = Agent(name="Support", instructions="Send the emails you are asked to.", tools=[send_email],
              model=ScriptedModel())

if __name__ == "__main__":
    result = Runner.run_sync(agent, "Email the weekly report to the team.",
                             run_config=RunConfig(tracing_disabled=True))
    print(f"FINAL {result.final_output}", flush=True)
