"""Schemathesis hooks for scripts/fuzz-api.sh: aim `{id}` paths at real runs, and the
explicit list of rejections the OpenAPI document cannot express.

The document is generated from the server's own types and handlers (GET /api/openapi.json),
bounds and all, so nothing here corrects it; what is left is what JSON Schema cannot say.

1. Real ids. A drawn id almost never exists, so most requests would only test the 404
   path. `flatmap_path_parameters` lets Hypothesis choose, for every operation with path
   parameters, between the drawn values and the ids fuzz/seed.py created (runs in every
   state, their tool calls and messages, blobs, priced models), keeping pairs coherent
   (a run's own call, message or step; an agent's own version; an HTTP tool). Only the fuzzing phase
   draws through hooks; the
   examples and coverage phases keep their drawn values.

   The all-runs stream (GET /api/events) is live only: nothing happens on it unless a
   run changes while it is read, so `before_call` starts a run (which pauses on a
   send_email call) just after each request to it, and the stream carries run.status
   and approval tool_call.updated events for the document's schemas to check.

2. Semantic rejections. Some rules are not expressible in JSON Schema: a model must be
   configured on this server (configuration, not a type: the document cannot list it),
   edited arguments must fit the call's own tool, an `mcp:NAME` tool source must be a
   configured MCP server, a result schema must compile, `tail`
   excludes `from`/`limit`, `max_tokens` is bounded by `context_window`, a state document
   must be consistent, only human messages can be edited, a date-time must lie within
   years 1970-9999, an instance-admin key (project null) has the admin role; and integers are written without a fraction (JSON Schema's `integer`
   takes 1000.0, serde's integers do not). A schema-valid request refused with a 400 for
   one of these (matched on the error message, which names the rule) is not a "valid
   data rejected" failure. One schema-violating value is accepted by a documented rule:
   GET /api/runs/{id}/events does not read `after` when Last-Event-ID is given (the
   header wins). And a method a path does not serve answers 404 instead of 405 when the
   request names a project (X-Runlens-Project) the caller may not see: that is decided
   for the whole request, before its route. Everything else still fails the run; nothing else is filtered.

   A long-poll's `wait` (up to 30 s) over a second is cut to one second by `before_call`:
   a pending request answers the same after one second as after thirty.

3. Credentials. Schemathesis sends the instance-admin key (RUNLENS_FUZZ_KEY, the server's
   RUNLENS_BOOTSTRAP_API_KEY) with every operation that requires the document's `bearer`
   scheme (`[auth.openapi.bearer]` in fuzz/schemathesis.toml), and its
   `ignored_auth` check sends cases without it, expecting 401. The key must survive the
   run: `before_call` points a DELETE /api/keys/{id} that drew the key's own id at an id
   that does not exist (revoking it would turn every later answer into a 401).
"""

import json
import os
import re
import threading
import urllib.error
import urllib.parse
import urllib.request

import schemathesis
from hypothesis import strategies as st

with open(os.environ["RUNLENS_FUZZ_SEEDS"]) as f:
    SEEDS = json.load(f)

# (error message pattern, why the document cannot say it)
SEMANTIC_400 = [
    (r"^unknown model `", "models are server configuration (GET /api/models)"),
    (r"^invalid arguments for `", "edited arguments are checked against the call's own tool schema"),
    (r"result_schema is not a valid JSON Schema", "a result schema must compile"),
    (r"^`tail` cannot be combined", "tail excludes from and limit"),
    (r"^model_settings\.max_tokens must be an integer from 1 to the context window", "bounded by context_window"),
    (r"^only human messages can be edited", "the message's kind, not its id, decides"),
    (r"must lie between 1970-01-01 and 9999-12-31", "a date-time string's range is not a JSON Schema keyword"),
    (r"^role must be `admin` for an instance-admin key", "a rule across two fields (role and a null project)"),
    (r"^offset and (cursor|before) cannot be combined", "a rule across two parameters"),
    # GET /api/approvals: the filters are the pending calls' and `offset` the decisions', and a
    # cursor pages the list (status) that made it: rules across two parameters.
    (r"^`(offset|tool|run|older_than_s|newer_than_s)` is for status=(pending|decided) only",
     "a rule across two parameters"),
    (r"^cursor must be the `next_cursor` of a previous page of this list", "a cursor pages the list that made it"),
    (r"^from must be a step index or an id of a step of this run", "a step id must name a step of the path's run"),
    # Agents: what an agent links to must exist in the project and be usable as a tool.
    (r"^(agents|handoffs|agent_id): no agent `", "agent ids must name saved agents of the project"),
    (r"^(agents|handoffs): `.*` is listed twice", "uniqueItems is not stated (ids are compared as agents)"),
    (r"^(agents|handoffs): the tool name `", "an agent's tool names (its tools and linked agents') are unique"),
    (r"^handoffs: an agent cannot hand over to itself", "the path's agent against the body"),
    (r"^name `[^`]*` is taken by a tool", "an agent's name must not be a registered tool's"),
    (r"^input_schema is not a valid JSON Schema", "an input schema must compile"),
    (r"^agent_version(: agent `| needs agent_id)", "a saved agent's versions; a rule across two fields"),
    (r"^input(/\S*)?: ", "a run's input must match its agent's input_schema"),
    (r"^input_items(\[\d+\])?: ", "input items must pair every invocation with one result, in order"),
    # Status webhooks: where requests may go is the operator's address policy (no private
    # addresses here), and a URL must parse with a host; a run's hook needs its project's
    # run webhook secret (POST /api/webhooks/secret), state no schema can say.
    (r"^(url|on_status_change\.url): ", "a webhook URL must parse and may not name a private address"),
    (r"^on_status_change: project `[^`]*` has no run webhook secret", "a run's hook needs its project's secret"),
    # HTTP tools: where calls may go is the operator's policy, a schema must compile, and
    # header names are compared case-insensitively against those runlens sets itself.
    (r"^url: ", "an HTTP tool's URL must parse, and a literal private address needs allow_private_networks"),
    (r"^schema is not a valid JSON Schema", "an HTTP tool's schema must compile"),
    (r"^headers: `[^`]*` is (set by runlens itself|given twice)", "reserved and repeated header names ignore case"),
    # Tools: an `mcp:NAME` source must name a server of the config file, and a tool name
    # one the project can call (GET /api/tools): HTTP tools are registered and MCP tools
    # listed while the server runs, so the document gives their names' pattern, not a list.
    (r"^(tools: )?unknown tool source `", "MCP servers are server configuration (GET /api/mcp/servers)"),
    (r"^((tools|approval): )?unknown tools? `", "tool names are registered at run time (GET /api/tools)"),
    # AG-UI (POST /api/agui): a thread is answered only when its last message is the user's
    # (not blank, within the prompt's byte bound), a new thread's earlier messages make at
    # most 200 transcript items and a bounded system prompt, each call is decided once (a
    # reason only with a rejection, edited arguments within their byte bound and the call's
    # tool schema), and context and state fit the run's context: rules across items and
    # byte sizes the document cannot state.
    (r"^messages(\[\d+\](\.content)?)?[: ]", "the thread's last message must be the user's, within its bounds"),
    (r"^resume\[\d+\](\.interruptId: `[^`]*` is answered twice|\.payload[.:]|: invalid arguments for `)",
     "each call decided once, decision fields by kind, edited arguments bounded and checked against the tool"),
    (r"^context and state together are over", "a new run's context is bounded in bytes of JSON"),
    # Requests from other agents: a callback needs the project's run webhook secret and a public
    # address (the operator's policy); "always" applies to an agent run, which the request must
    # name (a rule across the request and the decision); an answer must be one of the question's
    # own choices.
    (r"^callback_url: ", "a callback URL must parse, be public, and the project must have a run webhook secret"),
    (r"^`always` needs the request's run to have an external_id", "a rule across the request and the decision"),
    (r"^answer must be one of the choices", "the question's own choices, not a type"),
    # Forks and replays: a step index, a call id and an answer to replace must be the run's own,
    # the step completed; a recorded replay plays a run of one agent whose model is configured.
    (r"^from_step: run `", "a run's steps are its state, not a type"),
    (r"^tool_results and model_output cannot be combined", "a rule across two fields"),
    (r"^model_output needs text or tool_calls", "a rule across two fields (text not blank, or a call)"),
    (r"^tool_results: step \d+ (has no call|made no tool calls)", "a step's own call ids"),
    (r"^model_output: step \d+ has no model answer", "the step's kind, not its index, decides"),
    (r"^run `[^`]*` (changed agents at step|has no (first message|steps) to replay|has \d+ steps before)",
     "what a run recorded decides whether it can be replayed"),
    (r"^the model `[^`]*` of run `[^`]*` is not configured here", "models are server configuration"),
    # Scores: a step index and a call id must be the run's own, and a score names one or the other; a
    # scorer must be usable (its pattern compiles within the size limit, its schema compiles, a bound
    # or an expected value is given, here or in the body) and the body's expected value is bounded in
    # bytes of JSON.
    (r"^(step_index|call_id): run `", "a run's own steps and calls"),
    (r"^give step_index or call_id, not both", "a rule across two fields"),
    (r"^scorers\[\d+\]: ", "a scorer must compile and have what it compares against"),
    (r"^score must be NAME", "a score filter's value after <, <=, > or >= must be a number"),
    # Review queues: a field's settings go with its kind (labels for a label field, min < max for a
    # number), its values with the field; runs named must be the project's (and have the step).
    (r"^fields(\[\d+\]\.| )", "a field's settings go with its kind"),
    (r"^fields: 1 to", "the schema's count, after the names' rules"),
    (r"^assignees: ", "user ids of 1-128 visible characters"),
    (r"^run_ids(\[\d+\])?: ", "runs must be the project's"),
    (r"^session_ids(\[\d+\]: no session `|: give runs or sessions, not both)",
     "sessions must be the project's; runs or sessions, a rule across two fields"),
    (r"^step_index: only with run_ids", "a rule across two fields"),
    (r"^step_index: run ", "the run must have the step"),
    (r"^scores(\.|: give)", "a value must fit its field"),
    (r"^skip: ", "a rule across two fields"),
    (r"^correction: ", "a correction needs the queue's dataset"),
    (r"^expected: at most \d+ KiB of JSON", "a JSON value's size in bytes is not a JSON Schema keyword"),
    # Datasets: an item's conversation pairs every invocation with one result after it and ends with the
    # human message to answer (the rule of a run's input_items), its prompt and JSON values are bounded in
    # bytes, a version read must be one the dataset has reached and a step one the run has, and each row
    # of an upload must make an item (rules of the file's text, which the document gives as a string).
    (r"^(items\[\d+\]\.)?input\.(input_items(\[\d+\])?|prompt): ",
     "an item's conversation pairs invocations with results and ends with a human message; bytes, not characters"),
    (r"^(items\[\d+\]\.)?(input\.input|expected|metadata|recorded_results): at most \d+ [KM]iB of JSON",
     "a JSON value's size in bytes is not a JSON Schema keyword"),
    (r"^version: dataset `", "a dataset's versions are its state, not a type"),
    (r"^up_to_step: run `", "a run's steps are its state, not a type"),
    (r"^content: ", "an upload's rows must each make an item, as its format (JSONL or CSV) says"),
    # Experiments: what runs is a saved agent or a model (a rule across two fields); mocks go with
    # tool_mode `mock`, one per tool, each a tool registered here and bounded in bytes; the dataset must
    # have reached the version asked for and hold items, every item must make a run of the configuration,
    # and two experiments compared must be of one dataset: the project's state, not a type.
    (r"^give agent_id \(a saved agent\) or model", "a rule across two fields"),
    (r"^agent_version: give it with agent_id", "a rule across two fields"),
    (r"^mocks(\[\d+\]\.(tool|result))?: ", "mocks go with tool_mode `mock`, one per registered tool, bounded in bytes"),
    (r"^model: unknown model `", "models are server configuration (GET /api/models)"),
    (r"^dataset_(id|version): dataset `", "a dataset's versions and items are its state"),
    (r"^item `[^`]*` of dataset `", "each item must make a run of the experiment's configuration"),
    (r"^with: experiment `", "experiments compared must be of one dataset"),
    # Experiment sets: each model must be configured here, the models replace the experiment's own,
    # and each model's experiment is checked as one started alone (its message follows the prefix).
    (r"^models\[\d+\]: unknown model `", "models are server configuration (GET /api/models)"),
    (r"^experiment\.model: ", "a rule across two fields"),
]


# POST /api/runs/import: a state document must be whole and consistent (calls belong to
# their steps, numbering follows position, decisions match statuses and "always" lists,
# references resolve, tools and models exist here). Each such 400 names the place in the
# document it is about, which is how these are told apart from any other 400.
IMPORT_CONSISTENCY = (r"^(run\.|messages\[\d+\]|steps\[\d+\]|tool call |invocation-result |dangling reference"
                      r"|a paused run must|missing field `run\.|invalid run state|unknown (tool|model) `"
                      r"|the document has more than)")


def _integral_floats(value):
    """Whether `value` holds a number like 1000.0: an `integer` to JSON Schema, not to the API."""
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, dict):
        return any(_integral_floats(v) for v in value.values())
    if isinstance(value, list):
        return any(_integral_floats(v) for v in value)
    return False


def _fraction_rule(case, message):
    """The API reads integers written without a fraction (JSON Schema's `integer` includes 1000.0)."""
    return bool(re.search(r"integer|expected [ui](8|16|32|64)|invalid type: floating point", message)) and _integral_floats(case.body)


def _header(case, name):
    return next((v for k, v in (case.headers or {}).items() if k.lower() == name.lower()), None)


def _invalid_component(failure):
    match = re.search(r"Invalid component: (.*)", failure.message)
    return match.group(1) if match else ""


def _seeded_path_value(failure, case):
    """Whether the path parameter a failure calls invalid holds a real id `flatmap_path_parameters` put
    there in place of the drawn (invalid) value: the request was valid after all."""
    match = re.match(r"parameter `([^`]+)` in path", _invalid_component(failure))
    if not match:
        return False
    name = match.group(1)
    value = urllib.parse.unquote(str((case.path_parameters or {}).get(name)))
    return any(str(real.get(name)) == value for real in _seeded(case.operation.path))


# Schema-violating requests the API accepts by a documented rule (class of failure,
# predicate on the failure and the case, and the rule).
ACCEPTED_BY_RULE = [
    ("AcceptedNegativeData", _seeded_path_value,
     "a real id from fuzz/seed.py replaced the drawn invalid path parameter (see flatmap_path_parameters)"),
    ("AcceptedNegativeData",
     lambda f, case: case.operation.path == "/api/runs/{id}/events"
     and _invalid_component(f).startswith("parameter `after`")
     and (_header(case, "Last-Event-ID") or "").strip() != "",
     "GET /api/runs/{id}/events: Last-Event-ID wins, and `after` is then not read"),
    ("UnsupportedMethodResponse",
     lambda f, case: getattr(f, "status_code", None) == 404 and _header(case, "X-Runlens-Project") is not None,
     "a project named in X-Runlens-Project that the caller has no role in (or that does not exist) is a 404, "
     "decided before the method is looked at"),
]


def _error_message(response):
    try:
        body = json.loads(response.content)
    except (ValueError, TypeError):
        return None
    return body.get("error") if isinstance(body, dict) else None


def _probe(method, path, body):
    """The status of one request to the server under test."""
    base = os.environ["RUNLENS_FUZZ_BASE"].rstrip("/")
    req = urllib.request.Request(base + urllib.parse.quote(path), data=json.dumps(body).encode(), method=method)
    req.add_header("content-type", "application/json")
    req.add_header("authorization", f"Bearer {os.environ['RUNLENS_FUZZ_KEY']}")
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status
    except urllib.error.HTTPError as e:
        return e.code


@schemathesis.hook
def filter_failure(context, failure, case, response):
    kind = type(failure).__name__
    if any(kind == k and applies(failure, case) for k, applies, _ in ACCEPTED_BY_RULE):
        return False
    if kind != "RejectedPositiveData" or response.status_code != 400:
        return True
    message = _error_message(response) or ""
    # A set's experiment refused as one started alone would be: the same rules, after the model's name.
    message = re.sub(r"^experiment \(with model `[^`]*`\): ", "", message)
    if _fraction_rule(case, message):
        return False
    if case.operation.label == "POST /api/runs/import" and re.search(IMPORT_CONSISTENCY, message):
        return False
    return not any(re.search(pattern, message) for pattern, _ in SEMANTIC_400)


def _seeded(path):
    """Coherent sets of real path parameters for an operation's path."""
    runs = SEEDS["runs"]
    if path.startswith("/api/blobs/"):
        return [{"id": b} for b in SEEDS["blobs"]]
    if path.startswith("/api/prices/"):
        return [{"model": m} for m in SEEDS["models"]]
    if path.startswith("/api/agents/") and "{version}" in path:
        return [{"id": a, "version": str(v)} for a, versions in SEEDS["agents"].items() for v in versions]
    if path.startswith("/api/agents/"):
        return [{"id": a} for a in SEEDS["agents"]]
    if path.startswith("/api/compare/groups/"):
        return [{"id": g} for g in SEEDS.get("groups", [])]
    if path.startswith("/api/approval-requests/"):
        return [{"id": r} for r in SEEDS.get("approval_requests", [])]
    if path.startswith("/api/questions/"):
        return [{"id": q} for q in SEEDS.get("questions", [])]
    if path.startswith("/api/webhooks/"):
        return [{"id": w} for w in SEEDS["webhooks"]]
    if path.startswith("/api/tools/http/"):
        return [{"name": t} for t in SEEDS.get("http_tools", [])]
    if "{step}" in path:
        return [{"id": r, "step": s} for r in runs for s in SEEDS["steps"][r]] + [
            {"id": r, "step": str(i)} for r in runs for i in range(len(SEEDS["steps"][r]))]
    if "{call_id}" in path:
        return [{"id": r, "call_id": c} for r in runs for c in SEEDS["calls"][r]]
    if "{message_id}" in path:
        return [{"id": r, "message_id": m} for r in runs for m in SEEDS["messages"][r]]
    if "{id}" in path:
        return [{"id": r} for r in runs]
    return []


@schemathesis.hook
def flatmap_path_parameters(context, path_parameters):
    real = _seeded(context.operation.path)
    if not real or not isinstance(path_parameters, dict):
        return st.just(path_parameters)
    # The drawn values (usually a 404) or a real set, with a drawn value left in place
    # where the real set does not name the parameter.
    return st.sampled_from([path_parameters] + [{**path_parameters, **r} for r in real])


@schemathesis.hook
def flatmap_query(context, query):
    """`GET /api/compare` with real runs (two of one project) as well as drawn ids."""
    if context.operation.path != "/api/compare" or not isinstance(query, dict):
        return st.just(query)
    runs = SEEDS["runs"]
    pairs = [{"a": a, "b": b} for a in runs[:4] for b in runs[:4]] + [{"a": "fuzz-parent", "b": runs[0]}]
    return st.sampled_from([query] + [{**query, **p} for p in pairs])


def _start_a_run():
    _probe("POST", "/api/runs", {
        "initial_prompt": "a run for the all-runs stream", "tools": ["send_email"],
        "model_settings": {"script": [
            {"tool_calls": [{"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]},
            {"text": "sent"}]}})


# Long-polls (`GET /api/approval-requests/{id}?wait=N`, questions too) on a pending request
# answer after N seconds, the same answer as at once: a valid `wait` over a second is cut to
# one, so the suite's time goes to inputs, not to waiting.
LONG_POLLS = {"/api/approval-requests/{id}", "/api/questions/{id}"}


@schemathesis.hook
def before_call(context, case, kwargs):
    if case.operation.path in LONG_POLLS and isinstance(case.query, dict):
        wait = str(case.query.get("wait", ""))
        if wait.isdigit() and 1 < int(wait) <= 30:
            case.query["wait"] = "1"
    if case.operation.label == "DELETE /api/keys/{id}" and (case.path_parameters or {}).get("id") == SEEDS["key_id"]:
        case.path_parameters["id"] = "key_not_the_fuzzers_own"
    if case.operation.path == "/api/events":
        threading.Timer(0.2, _start_a_run).start()
