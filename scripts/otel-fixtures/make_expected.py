#!/usr/bin/env python3
"""Decode recorded OTLP/HTTP protobuf payloads into expected.json.

Usage: make_expected.py FIXTURE_DIR

Reads FIXTURE_DIR/NNN.pb (ExportTraceServiceRequest) in file order and, if
present, FIXTURE_DIR/logs/NNN.pb (ExportLogsServiceRequest), and writes
FIXTURE_DIR/expected.json with one entry per span (and per log record).
"""
import base64
import glob
import json
import os
import sys

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

KIND = {v: k for k, v in Span.SpanKind.items()}
STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


def any_value(v):
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return {"bytes_base64": base64.b64encode(v.bytes_value).decode()}
    return getattr(v, which)


def attrs(kvs):
    return {kv.key: any_value(kv.value) for kv in kvs}


def hexid(b):
    return b.hex() if b else None


def service_name(resource):
    return attrs(resource.attributes).get("service.name")


def main(d):
    spans, services = [], set()
    files = sorted(glob.glob(os.path.join(d, "[0-9][0-9][0-9].pb")))
    for path in files:
        req = ExportTraceServiceRequest()
        with open(path, "rb") as f:
            req.ParseFromString(f.read())
        for rs in req.resource_spans:
            svc = service_name(rs.resource)
            services.add(svc)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    spans.append(
                        {
                            "batch": os.path.basename(path),
                            "trace_id": hexid(s.trace_id),
                            "span_id": hexid(s.span_id),
                            "parent_span_id": hexid(s.parent_span_id),
                            "name": s.name,
                            "kind": KIND[s.kind],
                            "start_time_unix_nano": s.start_time_unix_nano,
                            "end_time_unix_nano": s.end_time_unix_nano,
                            "status": {"code": STATUS[s.status.code], "message": s.status.message or None},
                            "scope": {"name": ss.scope.name, "version": ss.scope.version or None},
                            "service_name": svc,
                            "attributes": attrs(s.attributes),
                            "events": [
                                {
                                    "name": e.name,
                                    "time_unix_nano": e.time_unix_nano,
                                    "attributes": attrs(e.attributes),
                                }
                                for e in s.events
                            ],
                        }
                    )
    logs = []
    for path in sorted(glob.glob(os.path.join(d, "logs", "[0-9][0-9][0-9].pb"))):
        req = ExportLogsServiceRequest()
        with open(path, "rb") as f:
            req.ParseFromString(f.read())
        for rl in req.resource_logs:
            for sl in rl.scope_logs:
                for r in sl.log_records:
                    logs.append(
                        {
                            "batch": "logs/" + os.path.basename(path),
                            "trace_id": hexid(r.trace_id),
                            "span_id": hexid(r.span_id),
                            "event_name": r.event_name or None,
                            "time_unix_nano": r.time_unix_nano,
                            "observed_time_unix_nano": r.observed_time_unix_nano,
                            "severity_number": r.severity_number,
                            "scope": {"name": sl.scope.name, "version": sl.scope.version or None},
                            "service_name": service_name(rl.resource),
                            "attributes": attrs(r.attributes),
                            "body": any_value(r.body) if r.HasField("body") else None,
                        }
                    )
    out = {
        "service_name": sorted(s for s in services if s)[0] if services else None,
        "batch_files": [os.path.basename(p) for p in files],
        "trace_ids": sorted({s["trace_id"] for s in spans}),
        "span_count": len(spans),
        "spans": spans,
    }
    if logs:
        out["log_records"] = logs
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(out, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"{d}: {len(files)} batches, {len(spans)} spans, {len(logs)} log records")


if __name__ == "__main__":
    main(sys.argv[1])
