"""Seeds a fresh runlens server with runs in every state the API treats differently.

Usage: RUNLENS_FUZZ_KEY=rl_… python3 fuzz/seed.py BASE_URL OUT.json

Every request sends the instance-admin key RUNLENS_FUZZ_KEY (the server was started with
it as RUNLENS_BOOTSTRAP_API_KEY).

Creates (with fixed ids, so the fuzzer's `{id}` paths hit real runs):
  fuzz-done        finished (done), interactive: follow-ups and edits work on it
  fuzz-failed      failed: the scripted model fails
  fuzz-cancelled   cancelled while its `wait` call was running
  fuzz-running     running: a `wait` of an hour, so its event stream never ends
  fuzz-paused-N    paused, each with a `send_email` call awaiting approval
  (import)         a copy of fuzz-done made by POST /api/runs/import, whose result is a blob
  fuzz-parent      done, from the saved agent `fuzz-parent` (2 versions), whose agent call
                   started a child run of the agent `fuzz-helper`
  fuzz-hooked      done, with an on_status_change hook (its deliveries fail: no receiver)
and the project's run webhook secret (so runs may carry on_status_change) and a webhook
subscription (for the `/api/webhooks/{id}` paths),
  fuzz_lookup      an HTTP tool (registered only: its URL is never called while seeding)
and the price of `fuzz/model`. Writes the ids the fuzzer draws from (runs, their
tool calls, messages and steps, agents and their versions, blobs, priced models)
to OUT.json. Exits non-zero if a
run does not reach its state: the fuzz run would then test less than it says.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

BASE = sys.argv[1].rstrip("/")
OUT = sys.argv[2]
PAUSED = 3
KEY = os.environ["RUNLENS_FUZZ_KEY"]


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method)
    req.add_header("authorization", f"Bearer {KEY}")
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            text = res.read()
            return res.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def must(method, path, body=None, ok=(200, 201)):
    status, out = call(method, path, body)
    if status not in ok:
        sys.exit(f"seed: {method} {path} answered {status}: {out}")
    return out


def create(run_id, script, **extra):
    body = {"id": run_id, "initial_prompt": f"fuzz seed {run_id}", "model_settings": {"script": script}, **extra}
    return must("POST", "/api/runs", body)


def wait_for(run_id, statuses, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        run = must("GET", f"/api/runs/{run_id}")
        if run["status"] in statuses:
            return run
        if time.monotonic() > deadline:
            sys.exit(f"seed: run {run_id} is {run['status']}, expected one of {statuses}")
        time.sleep(0.05)


def calls_of(run_id):
    steps = must("GET", f"/api/runs/{run_id}/steps")["steps"]
    return [c["id"] for s in steps for c in s["tool_calls"]]


def messages_of(run_id):
    return [m["id"] for m in must("GET", f"/api/runs/{run_id}/messages")["messages"]]


email = {"to": "fuzz@example.com", "subject": "fuzz", "body": "seeded by fuzz/seed.py"}
wait_hour = [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 3600}}]}, {"text": "waited"}]

create("fuzz-done", [{"tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]}, {"text": "42"}],
       tools=["calculator"])
create("fuzz-failed", [{"error": "the provider is down"}])
create("fuzz-cancelled", wait_hour, tools=["wait"])
create("fuzz-running", wait_hour, tools=["wait"])
for i in range(PAUSED):
    create(f"fuzz-paused-{i}", [{"tool_calls": [{"name": "send_email", "arguments": email}]}, {"text": "sent"}],
           tools=["send_email"])

wait_for("fuzz-done", {"done"})
wait_for("fuzz-failed", {"failed"})
for run_id in ("fuzz-cancelled", "fuzz-running"):
    deadline = time.monotonic() + 30
    while not any(True for _ in calls_of(run_id)):
        if time.monotonic() > deadline:
            sys.exit(f"seed: run {run_id} never started its wait")
        time.sleep(0.05)
must("POST", "/api/runs/fuzz-cancelled/cancel")
wait_for("fuzz-cancelled", {"cancelled"})
wait_for("fuzz-running", {"running"})
for i in range(PAUSED):
    wait_for(f"fuzz-paused-{i}", {"paused"})

# An imported copy of the done run whose calculator result was stored as a blob, as a
# result over 500 kB is (no built-in tool returns one): the call's result names the blob.
doc = must("GET", "/api/runs/fuzz-done/state")
calc = doc["steps"][0]["tool_calls"][0]
blob_id = f"fuzz-done-{calc['id']}"
data = {"rows": list(range(100))}
calc["result"] = {"too_large": True, "note": "seeded", "size_bytes": len(json.dumps(data)), "preview": "{",
                  "blob_id": blob_id}
doc["blobs"] = [{"id": blob_id, "call_id": calc["id"], "content_type": "application/json", "data": data}]
status, imported = call("POST", "/api/runs/import", doc)
if status != 201:
    sys.exit(f"seed: importing a run with a blob answered {status}: {imported}")
state = must("GET", f"/api/runs/{imported['id']}/state")
blobs = [b["id"] for b in state.get("blobs", [])]
if not blobs:
    sys.exit("seed: the imported run has no blob")

must("PUT", "/api/prices/fuzz/model", {"input": 1, "output": 2})

# Saved agents: a helper with the calculator, and a parent that calls it as a tool (a
# child run) and has a second version.
must("POST", "/api/agents", {"id": "fuzz-helper", "name": "fuzz_helper", "description": "Does sums",
                             "tools": ["calculator"]})
parent = {"name": "fuzz_parent", "agents": ["fuzz-helper"], "tools": [], "model_settings": {"script": [
    {"tool_calls": [{"name": "fuzz_helper", "arguments": {"input": "2+3"}}]}, {"text": "done"}]}}
must("POST", "/api/agents", {"id": "fuzz-parent", **parent})
must("PUT", "/api/agents/fuzz-parent", {**parent, "description": "Asks the helper"})
must("POST", "/api/runs", {"id": "fuzz-parent", "agent_id": "fuzz-parent", "initial_prompt": "ask the helper",
                           "metadata": {"seed": "fuzz"}})
wait_for("fuzz-parent", {"done"})
children = must("GET", "/api/runs/fuzz-parent/children")["runs"]
if len(children) != 1:
    sys.exit(f"seed: fuzz-parent has {len(children)} child runs, expected 1")

# Status webhooks: the run webhook secret, a subscription, and a run with its own hook. The
# server allows no private address, so the hooks point at a name that never resolves here.
must("POST", "/api/webhooks/secret")
webhook = must("POST", "/api/webhooks", {"url": "https://hooks.invalid/runlens", "statuses": ["done", "failed"],
                                         "description": "seeded by fuzz/seed.py"})["webhook"]["id"]
create("fuzz-hooked", [{"text": "hooked"}], on_status_change={"url": "https://hooks.invalid/run"})
wait_for("fuzz-hooked", {"done"})
# An HTTP tool for the `/api/tools/http/{name}` operations. Its URL is public, so
# registration accepts it without `[http] allow_private_networks`; no seeded run calls it.
must("POST", "/api/tools/http", {
    "name": "fuzz_lookup", "description": "Looks an order up (fuzz seed)",
    "schema": {"type": "object", "properties": {"id": {"type": "string"}}},
    "url": "https://tools.example.com/fuzz-lookup", "headers": {"Authorization": "Bearer fuzz"},
    "idempotent": True, "requires_approval": False})

# A comparison group (`/api/compare/groups/{id}`): one scripted run on the models the server has.
group = must("POST", "/api/runs/batch", {"initial_prompt": "compare me", "models": ["builtin"],
                                         "model_settings": {"script": [{"text": "compared"}]}})["group_id"]

# An approval request and a question from an agent runlens does not run, both decided (a long-poll
# or an event stream on them answers at once; a decision on them is a 409 after its input checks).
asked = must("POST", "/api/approval-requests", {
    "tool": "send_email", "arguments": {"to": "a@example.com"}, "context": "fuzz seed",
    "run": {"external_id": "fuzz-conv", "name": "fuzz agent"}, "idempotency_key": "fuzz-seed-1"})["id"]
must("POST", f"/api/approval-requests/{asked}/approve", {"comment": "seeded"})
question = must("POST", "/api/questions", {"question": "Which?", "choices": ["a", "b"],
                                           "idempotency_key": "fuzz-seed-q"})["id"]
must("POST", f"/api/questions/{question}/answer", {"answer": "a"})

runs = ["fuzz-done", "fuzz-failed", "fuzz-cancelled", "fuzz-running", imported["id"], "fuzz-parent",
        children[0]["id"], "fuzz-hooked"] + [f"fuzz-paused-{i}" for i in range(PAUSED)]
me = must("GET", "/api/me")
seeds = {
    "key_id": me["actor"]["id"].removeprefix("key:"),
    "runs": runs,
    "calls": {r: calls_of(r) for r in runs},
    "messages": {r: messages_of(r) for r in runs},
    "steps": {r: [s["id"] for s in must("GET", f"/api/runs/{r}/outline")["steps"]] for r in runs},
    "agents": {"fuzz-helper": [1], "fuzz-parent": [1, 2]},
    "blobs": blobs,
    "models": ["fuzz/model", "builtin"],
    "webhooks": [webhook],
    "http_tools": ["fuzz_lookup"],
    "groups": [group],
    "approval_requests": [asked],
    "questions": [question],
}
with open(OUT, "w") as f:
    json.dump(seeds, f, indent=1)
print(f"seeded {len(runs)} runs ({', '.join(runs)}), {sum(map(len, seeds['calls'].values()))} tool calls, "
      f"{len(blobs)} blobs")
