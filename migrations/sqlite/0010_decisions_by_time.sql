-- `GET /api/approvals?status=decided` pages a project's decisions newest
-- first: read them in that order instead of sorting the whole table.
CREATE INDEX approval_decisions_by_time ON approval_decisions (decided_at DESC, run_id DESC, call_id DESC);
