-- Issue 5: the outline of a long run (every step and tool call without
-- payloads) from narrow covering indexes.
--
-- `steps` and `tool_calls` are clustered on their keys, so their rows hold
-- the payloads (requests, responses, arguments, results): scanning 10,000 of
-- them walks every payload page. These indexes carry only what the outline
-- shows, in key order, so an outline read walks a few hundred small pages
-- and never touches a payload.

-- The model a step called, when its request recorded one (the first step and
-- every step where it changed); NULL means the run's model. Kept beside the
-- request so the outline need not read the request at all.
ALTER TABLE steps ADD COLUMN model TEXT;
UPDATE steps SET model = json_extract(request, '$.model')
    WHERE request LIKE '%"model"%' AND json_valid(request);

CREATE INDEX steps_outline ON steps (
    run_id, idx, kind, status, model,
    input_tokens, output_tokens, cache_read_tokens, reasoning_tokens, total_tokens, requests,
    started_at, model_completed_at, completed_at
);

CREATE INDEX tool_calls_outline ON tool_calls (
    run_id, step_idx, pos, id, tool_name, status, requested_at, started_at, completed_at
);
