//! The OpenAPI 3.1 document for the REST surface, served at `/v1/openapi.json`.
//! Built in code next to the routes it describes; the black-box tests and
//! schemathesis use it as the contract.

use super::openapi_pieces::{error_response, retry_later};
use crate::waits::TooManyWaits;
use axum::Json;
use baton_proto::coordinator::v1::{CancelOutcome, CancelState, ExecutionStatus, ExecutionType, Surface};
use baton_proto::error::ErrorCode;
use baton_proto::worker::v1::InputAction;
use serde_json::{Value, json};

pub(crate) async fn document() -> Json<Value> {
    Json(spec())
}

fn errors(codes: &[u16]) -> serde_json::Map<String, Value> {
    codes
        .iter()
        .map(|c| {
            let description = match c {
                400 => "Malformed request or input that does not match the tool's schema",
                401 => "Missing, invalid or revoked bearer token",
                403 => "The credential's role or binding does not allow this",
                404 => "Unknown, unauthorized or expired execution (identical bodies), or unknown tool",
                409 => "Idempotency-Key reused for different work, or no result for a failed/cancelled execution",
                413 => "Request body too large",
                429 => "An admission bound is reached; retry after Retry-After seconds with the same Idempotency-Key",
                _ => "The coordinator or its database is unavailable; retry after Retry-After seconds",
            };
            let r = if matches!(c, 429 | 503) { retry_later(description) } else { error_response(description) };
            (c.to_string(), r)
        })
        .collect()
}

fn op(summary: &str, id: &str, ok: (&str, Value), codes: &[u16], extra: Value) -> Value {
    let mut responses = errors(codes);
    responses.insert(ok.0.to_owned(), ok.1);
    let mut o = json!({"summary": summary, "operationId": id, "responses": responses});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            match (k.as_str(), v) {
                ("responses", Value::Object(more)) => {
                    for (code, r) in more {
                        o["responses"][code] = r;
                    }
                }
                (_, v) => o[k] = v,
            }
        }
    }
    o
}

fn body(schema_ref: &str) -> Value {
    json!({"content": {"application/json": {"schema": {"$ref": schema_ref}}}})
}

/// OpenAPI links from a started execution to the calls that take its id.
fn links(mut response: Value) -> Value {
    let params = json!({
        "org_id": "$request.path.org_id",
        "project_id": "$request.path.project_id",
        "execution_id": "$response.body#/execution_id"
    });
    response["links"] = ["getExecution", "getExecutionResult", "provideExecutionInput", "cancelExecution"]
        .iter()
        .map(|op| (op.to_string(), json!({"operationId": op, "parameters": params})))
        .collect::<serde_json::Map<_, _>>()
        .into();
    response
}

/// A schema allowing exactly a wire enum's names (spelled once, in baton-proto).
fn one_of(names: impl Iterator<Item = &'static str>) -> Value {
    json!({"enum": names.collect::<Vec<_>>()})
}

fn execution_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Execution"}}}})
}

/// The 429 of a long poll over the gateway's wait bounds.
fn too_many_waits() -> Value {
    retry_later(&format!(
        "`{}`: this credential (scope `principal`) or this gateway (scope `gateway`) holds as many long polls as \
         it may; retry after Retry-After seconds",
        TooManyWaits::CODE
    ))
}

pub(crate) fn spec() -> Value {
    let scope = json!([
        {"name": "org_id", "in": "path", "required": true, "schema": {"type": "string"}},
        {"name": "project_id", "in": "path", "required": true, "schema": {"type": "string"}}
    ]);
    let mut with_id = scope.clone();
    if let Value::Array(a) = &mut with_id {
        a.push(json!({"name": "execution_id", "in": "path", "required": true, "schema": {"type": "string"}}));
    }
    let base = "/v1/orgs/{org_id}/projects/{project_id}/tool-executions";
    let nullable_time = json!({"type": ["string", "null"], "format": "date-time"});
    let time = json!({"type": "string", "format": "date-time"});
    let status = one_of(ExecutionStatus::names());
    let error_codes = format!(
        "Stable machine-readable code: {}, and `{}` (429: too many concurrent long polls)",
        ErrorCode::ALL
            .iter()
            // A coordinator's refusal of the gateway itself reaches callers as `unavailable`.
            .filter(|c| **c != ErrorCode::VersionUnsupported)
            .map(|c| format!("`{}`", c.as_str()))
            .collect::<Vec<_>>()
            .join(", "),
        TooManyWaits::CODE
    );
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Baton",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Durable background tool executions: the owner lifecycle over REST."
        },
        "security": [{"bearer": []}],
        "paths": {
            base: {
                "parameters": scope,
                "post": op("Start an execution", "startExecution",
                    ("202", links(execution_response("Accepted: the durable execution"))),
                    &[400, 401, 403, 404, 409, 413, 429, 503],
                    json!({
                        "parameters": [{"name": "Idempotency-Key", "in": "header", "required": false,
                            "schema": {"type": "string", "minLength": 1, "maxLength": 255}}],
                        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/StartRequest"}}}}
                    })),
                "get": op("List the caller's executions, newest first", "listExecutions",
                    ("200", json!({"description": "One page", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ExecutionPage"}}}})),
                    &[400, 401, 403, 404, 503],
                    json!({"parameters": [
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 200}},
                        {"name": "cursor", "in": "query", "schema": {"type": "string"}}
                    ]})),
            },
            format!("{base}/{{execution_id}}"): {
                "parameters": with_id.clone(),
                "get": op("Read an execution, optionally waiting for it to change or reach a state", "getExecution",
                    ("200", json!({"description": "The owner view, and why a long poll ended",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ExecutionRead"}}}})),
                    &[400, 401, 403, 404, 503],
                    json!({
                        "parameters": [
                            {"name": "wait_ms", "in": "query", "schema": {"type": "integer", "minimum": 0},
                                "description": "Wait up to this long (0: answer at once): at most gateway.max_wait_ms \
                                    (45000 unless configured), or with `until` gateway.max_predicate_wait_ms; longer is 400"},
                            {"name": "since_cursor", "in": "query", "schema": {"type": "string"},
                                "description": "Answer as soon as the execution changed after this `next_cursor` (at once if it already has)"},
                            {"name": "until", "in": "query", "schema": {"type": "string"},
                                "description": "Answer once the status is one of these, comma-separated: pending, working, \
                                    input_required, completed, failed, cancelled, terminal"}
                        ],
                        "responses": {"429": too_many_waits()}
                    })),
            },
            format!("{base}/{{execution_id}}/result"): {
                "parameters": with_id.clone(),
                "get": op("The original result", "getExecutionResult",
                    ("200", json!({"description": "Completed: the original tool result", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Result"}}}})),
                    &[401, 403, 404, 409, 503],
                    json!({"responses": {"202": execution_response("Still pollable")}})),
            },
            format!("{base}/{{execution_id}}/input"): {
                "parameters": with_id.clone(),
                "post": op("Answer a published input request", "provideExecutionInput",
                    ("200", json!({"description": "Acknowledged; does not prove the key was current",
                        "content": {"application/json": {"schema": {"type": "object", "required": ["acknowledged"],
                            "properties": {"acknowledged": {"type": "boolean"}}}}}})),
                    &[400, 401, 403, 404, 413, 503],
                    json!({"requestBody": {"required": true, "content": body("#/components/schemas/InputRequestBody")["content"].clone()}})),
            },
            format!("{base}/{{execution_id}}/cancel"): {
                "parameters": with_id,
                "post": op("Request cooperative cancellation", "cancelExecution",
                    ("200", json!({"description": "What Baton can prove about the stop", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CancelResult"}}}})),
                    &[400, 401, 403, 404, 413, 503],
                    json!({})),
            },
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object", "required": ["error"],
                    "properties": {"error": {"type": "object", "required": ["code", "message"],
                        "properties": {
                            "code": {"type": "string", "description": error_codes},
                            "message": {"type": "string"},
                            "scope": {"type": "string", "description": "The bound reached, for `capacity_exceeded` and `too_many_waits`"},
                            "retry_after_ms": {"type": "integer", "description": "With 429 and 503: when to retry, in milliseconds"}
                        }}}
                },
                "StartRequest": {
                    "type": "object", "required": ["gateway_id", "tool_name"], "additionalProperties": false,
                    "properties": {
                        "gateway_id": {"type": "string", "minLength": 1, "maxLength": 512},
                        "tool_name": {"type": "string", "minLength": 1, "maxLength": 512},
                        "input": {"type": ["object", "null"]},
                        "user_id": {"type": ["string", "null"], "minLength": 1, "maxLength": 512},
                        "run_at": {"type": ["string", "null"], "format": "date-time"},
                        "ttl_ms": {"type": ["integer", "null"], "minimum": 1}
                    }
                },
                "InputRequestBody": {
                    "type": "object", "required": ["request_key", "response"], "additionalProperties": false,
                    "properties": {
                        "request_key": {"type": "string", "minLength": 1, "maxLength": 512},
                        "response": {"type": "object", "required": ["action"], "additionalProperties": false,
                            "properties": {"action": one_of(InputAction::names()), "content": {"type": ["object", "null"]}}}
                    }
                },
                "InputRequest": {
                    "type": "object", "required": ["request_key", "message"],
                    "properties": {"request_key": {"type": "string"}, "message": {"type": "string"}, "requested_schema": {}}
                },
                "Execution": {
                    "type": "object",
                    "required": ["execution_id", "status", "execution_deadline", "retention_expires_at", "poll_interval_ms"],
                    "properties": {
                        "execution_id": {"type": "string"},
                        "status": status,
                        "tool_name": {"type": "string"}, "toolkit_name": {"type": "string"}, "toolkit_version": {"type": "string"},
                        "gateway_id": {"type": "string"}, "user_id": {"type": "string"},
                        "surface": one_of(Surface::names()),
                        "execution_type": one_of(ExecutionType::names()),
                        "created_at": time, "updated_at": time,
                        "scheduled_at": nullable_time, "started_at": nullable_time, "finished_at": nullable_time,
                        "execution_deadline": time, "retention_expires_at": time,
                        "poll_interval_ms": {"type": "integer"},
                        "owner_loss_detection_at": nullable_time,
                        "failure_reason": {"type": ["string", "null"]},
                        "error_message": {"type": ["string", "null"]},
                        "cancel_state": one_of(CancelState::names()),
                        "input_requests": {"type": "array", "items": {"$ref": "#/components/schemas/InputRequest"}},
                        "progress": {
                            "description": "The running tool's latest progress report; null before the first",
                            "type": ["object", "null"],
                            "properties": {
                                "current": {"type": "number"},
                                "total": {"type": ["number", "null"]},
                                "message": {"type": "string"},
                                "updated_at": time
                            }
                        }
                    }
                },
                "ExecutionRead": {
                    "description": "The owner view answered by a read by id, saying why a long poll ended",
                    "allOf": [
                        {"$ref": "#/components/schemas/Execution"},
                        {"type": "object", "required": ["timed_out", "shutdown", "next_cursor"], "properties": {
                            "timed_out": {"type": "boolean",
                                "description": "true when wait_ms passed without what the wait waited for"},
                            "next_cursor": {"type": "string",
                                "description": "Give it as since_cursor to the next wait, so no change in between is missed"},
                            "shutdown": {"type": "boolean",
                                "description": "true when the wait ended early because this gateway is shutting down \
                                    (timed_out is then false): reconnect at once"}
                        }}
                    ]
                },
                "ExecutionPage": {
                    "type": "object", "required": ["items"],
                    "properties": {"items": {"type": "array", "items": {"$ref": "#/components/schemas/Execution"}},
                        "next_cursor": {"type": ["string", "null"]}}
                },
                "Result": {
                    "type": "object", "required": ["execution_id", "status", "result"],
                    "properties": {"execution_id": {"type": "string"}, "status": {"const": ExecutionStatus::Completed.name()},
                        "result": {"type": "object", "properties": {"content": {"type": "array"}, "structuredContent": {}}}}
                },
                "CancelResult": {
                    "type": "object", "required": ["outcome"],
                    "properties": {
                        "outcome": one_of(CancelOutcome::names()),
                        "execution": {"$ref": "#/components/schemas/Execution"}
                    }
                }
            }
        }
    });
    super::history::openapi::extend(&mut doc);
    super::admin::openapi::extend(&mut doc);
    super::operator::openapi::extend(&mut doc);
    super::watch::openapi::extend(&mut doc);
    super::webhooks::openapi::extend(&mut doc);
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_routed_path_is_documented() {
        let doc = spec();
        let paths = doc["paths"].as_object().expect("paths");
        for suffix in
            ["", "/{execution_id}", "/{execution_id}/result", "/{execution_id}/input", "/{execution_id}/cancel"]
        {
            let path = format!("/v1/orgs/{{org_id}}/projects/{{project_id}}/tool-executions{suffix}");
            assert!(paths.contains_key(&path), "{path} missing");
        }
        assert_eq!(doc["openapi"], "3.1.0");
    }

    #[test]
    fn long_polls_document_why_they_ended_and_their_bound() {
        let doc = spec();
        let get = &doc["paths"]["/v1/orgs/{org_id}/projects/{project_id}/tool-executions/{execution_id}"]["get"];
        assert!(get["responses"]["429"]["description"].as_str().is_some_and(|d| d.contains("too_many_waits")));
        let read = &doc["components"]["schemas"]["ExecutionRead"]["allOf"][1];
        assert_eq!(read["required"], json!(["timed_out", "shutdown", "next_cursor"]));
        let codes = doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(codes.contains("too_many_waits") && codes.contains("capacity_exceeded"), "{codes}");
    }
}
