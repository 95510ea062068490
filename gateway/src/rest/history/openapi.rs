//! The history routes' part of the OpenAPI document, added to it by
//! `rest::openapi::spec`.

use super::super::openapi_pieces::{error_response, retry_later, schema_ref};
use super::{BASE, DEFAULT_LIMIT, MAX_FILTER_CHARS, MAX_LIMIT, MAX_OFFSET};
use baton_proto::coordinator::v1::{
    ExecutionOutcome, ExecutionStatus, ExecutionType, FailureReason, Surface, TimelineEvent,
};
use serde_json::{Map, Value, json};

/// Filter values may hold no control character (Unicode category Cc).
pub(in crate::rest) const NO_CONTROL_CHARACTERS: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";

fn one_of(names: impl Iterator<Item = &'static str>) -> Value {
    json!({"enum": names.collect::<Vec<_>>()})
}

/// A 200 with `ok.1`'s schema, and each error with its description.
pub(in crate::rest) fn responses(ok: (&str, &str), errors: &[(u16, &str)]) -> Value {
    let mut out = Map::new();
    out.insert(
        "200".into(),
        json!({"description": ok.0, "content": {"application/json": {"schema": schema_ref(ok.1)}}}),
    );
    for (code, description) in errors {
        let r = if *code == 503 { retry_later(description) } else { error_response(description) };
        out.insert(code.to_string(), r);
    }
    Value::Object(out)
}

const ERRORS: [(u16, &str); 5] = [
    (400, "A query parameter is malformed, unknown or given twice (the message names it)"),
    (401, "Missing, invalid or revoked bearer token"),
    (
        403,
        "Read-only keys, end-user tokens (MCP clients) and worker tokens may not read the history; payload flags need an admin key",
    ),
    (404, "Another project's path, or an unknown or expired execution (identical bodies)"),
    (503, "The coordinator or its database is unavailable; retry after Retry-After seconds"),
];

fn filters() -> Vec<Value> {
    let text = |name: &str, about: &str| {
        json!({"name": name, "in": "query", "required": false, "description": about,
            "schema": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_CHARS, "pattern": NO_CONTROL_CHARACTERS}})
    };
    let time = |name: &str, about: &str| {
        json!({"name": name, "in": "query", "required": false, "description": about,
            "schema": {"type": "string", "format": "date-time"}})
    };
    vec![
        text("tool_name", "Only runs of this tool"),
        text("toolkit_name", "Only runs of this toolkit's tools"),
        text("user_id", "Only runs for this end user"),
        json!({"name": "outcome", "in": "query", "required": false,
            "description": "success: completed runs; failure: failed runs (a cancelled run is neither)",
            "schema": one_of(ExecutionOutcome::names())}),
        json!({"name": "failure_reason", "in": "query", "required": false,
            "description": "Only failed runs that failed for this reason",
            "schema": one_of(FailureReason::names())}),
        time("start_time", "RFC 3339: runs created at or after this time"),
        time("end_time", "RFC 3339: runs created before this time; not before start_time (400)"),
    ]
}

fn item_properties() -> Map<String, Value> {
    let time = json!({"type": "string", "format": "date-time"});
    let nullable_time = json!({"type": ["string", "null"], "format": "date-time"});
    let Value::Object(m) = json!({
        "id": {"type": "string"},
        "created_at": time, "updated_at": time,
        "execution_type": one_of(ExecutionType::names()),
        "execution_status": one_of(ExecutionStatus::names()),
        "tool_name": {"type": "string"}, "toolkit_name": {"type": "string"}, "toolkit_version": {"type": "string"},
        "user_id": {"type": "string"},
        "started_at": nullable_time, "finished_at": nullable_time,
    }) else {
        return Map::new();
    };
    m
}

fn schemas() -> Value {
    let item = item_properties();
    let required: Vec<String> = item.keys().cloned().collect();
    let nullable_time = json!({"type": ["string", "null"], "format": "date-time"});
    let nullable_text = json!({"type": ["string", "null"]});
    let nullable_int = json!({"type": ["integer", "null"], "minimum": 0});
    let mut detail = item.clone();
    let extra = json!({
        "surface": one_of(Surface::names()),
        "scheduled_at": nullable_time,
        "duration_ms": nullable_int,
        "failure_reason": {"enum": FailureReason::names().map(Value::from).chain([Value::Null]).collect::<Vec<_>>()},
        "error_message": nullable_text,
        "timeline": {"type": "array", "items": schema_ref("TimelineEntry")},
        "attempts": {"type": "array", "items": schema_ref("HistoryAttempt")},
        "progress": {"description": "The tool's latest progress report (current, total, message, updated_at); \
            null if it never reported any", "type": ["object", "null"]},
        "input": {"description": "With include_inputs=true (admin keys): the input the tool received"},
        "output": {"description": "With include_outputs=true (admin keys): the final tool result, null unless completed"},
    });
    if let Value::Object(extra) = extra {
        detail.extend(extra);
    }
    let mut detail_required = required.clone();
    detail_required.extend(
        ["surface", "scheduled_at", "duration_ms", "failure_reason", "error_message", "timeline", "attempts"]
            .map(String::from),
    );
    json!({
        "HistoryItem": {"type": "object", "required": required, "properties": item},
        "HistoryPage": {
            "type": "object", "required": ["items", "limit", "offset", "page_count", "total_count"],
            "properties": {
                "items": {"type": "array", "items": schema_ref("HistoryItem")},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                "offset": {"type": "integer", "minimum": 0},
                "page_count": {"type": "integer", "minimum": 0, "description": "How many items this page holds"},
                "total_count": {"type": "integer", "minimum": 0, "description": "How many runs match, all pages together"}
            }
        },
        "HistoryCount": {
            "type": "object", "required": ["count"],
            "properties": {"count": {"type": "integer", "minimum": 0}}
        },
        "TimelineEntry": {
            "type": "object", "required": ["at", "event", "status"],
            "properties": {
                "at": {"type": "string", "format": "date-time"},
                "event": one_of(TimelineEvent::names()),
                "status": one_of(ExecutionStatus::names())
            }
        },
        "HistoryAttempt": {
            "type": "object",
            "required": ["id", "attempt", "started_at", "finished_at", "duration_ms", "success", "error", "system_error_message"],
            "properties": {
                "id": {"type": "string", "description": "`{execution id}:{attempt}`"},
                "attempt": {"type": "integer", "minimum": 1},
                "started_at": {"type": "string", "format": "date-time"},
                "finished_at": nullable_time,
                "duration_ms": nullable_int,
                "success": {"type": ["boolean", "null"]},
                "error": {"type": ["string", "null"], "description": "The error the attempt reported"},
                "system_error_message": {"type": ["string", "null"], "description": "Why the system ended the attempt (deadline, lost worker)"},
                "output": {"description": "With include_outputs=true: what the attempt returned"},
                "error_detail": {"description": "With include_outputs=true: the free-form detail the tool attached to its error"}
            }
        },
        "HistoryDetail": {"type": "object", "required": detail_required, "properties": detail},
    })
}

/// An OpenAPI link from a page to the detail of its first run.
fn with_detail_link(mut responses: Value) -> Value {
    responses["200"]["links"] = json!({"getToolExecutionHistory": {
        "operationId": "getToolExecutionHistory",
        "parameters": {
            "org_id": "$request.path.org_id",
            "project_id": "$request.path.project_id",
            "execution_id": "$response.body#/items/0/id"
        }
    }});
    responses
}

/// Adds the history paths and schemas to `doc`.
pub(crate) fn extend(doc: &mut Value) {
    let scope = [
        json!({"name": "org_id", "in": "path", "required": true, "schema": {"type": "string"}}),
        json!({"name": "project_id", "in": "path", "required": true, "schema": {"type": "string"}}),
    ];
    let mut with_id = scope.to_vec();
    with_id.push(json!({"name": "execution_id", "in": "path", "required": true, "schema": {"type": "string"}}));
    let mut list_params = filters();
    list_params.push(json!({"name": "limit", "in": "query", "required": false,
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}}));
    list_params.push(json!({"name": "offset", "in": "query", "required": false,
        "schema": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET, "default": 0}}));
    let flag = |name: &str, what: &str| {
        json!({"name": name, "in": "query", "required": false, "description": format!("Adds {what}; needs an admin key (403 otherwise)"),
            "schema": {"type": "boolean", "default": false}})
    };
    let paths = json!({
        BASE: {
            "parameters": scope,
            "get": {
                "summary": "The project's execution history, newest first", "operationId": "listToolExecutionHistory",
                "parameters": list_params,
                "responses": with_detail_link(responses(("One page; never payloads", "HistoryPage"), &ERRORS)),
            }
        },
        format!("{BASE}/count"): {
            "parameters": scope,
            "get": {
                "summary": "How many runs match the filters", "operationId": "countToolExecutionHistory",
                "parameters": filters(),
                "responses": responses(("The count; never payloads", "HistoryCount"), &ERRORS),
            }
        },
        format!("{BASE}/{{execution_id}}"): {
            "parameters": with_id,
            "get": {
                "summary": "One run with its timeline and attempts", "operationId": "getToolExecutionHistory",
                "parameters": [flag("include_inputs", "`input`"), flag("include_outputs", "`output` and each attempt's `output` and `error_detail`")],
                "responses": responses(("The run", "HistoryDetail"), &ERRORS),
            }
        }
    });
    if let (Some(to), Value::Object(from)) = (doc["paths"].as_object_mut(), paths) {
        to.extend(from);
    }
    if let (Some(to), Value::Object(from)) = (doc["components"]["schemas"].as_object_mut(), schemas()) {
        to.extend(from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_routes_are_documented() {
        let mut doc = json!({"paths": {}, "components": {"schemas": {}}});
        extend(&mut doc);
        for suffix in ["", "/count", "/{execution_id}"] {
            let path = format!("/v1/orgs/{{org_id}}/projects/{{project_id}}/tool_executions{suffix}");
            assert!(doc["paths"][&path]["get"].is_object(), "{path}");
        }
        let item = &doc["components"]["schemas"]["HistoryItem"];
        for field in [
            "id",
            "created_at",
            "updated_at",
            "execution_type",
            "execution_status",
            "tool_name",
            "toolkit_name",
            "toolkit_version",
            "user_id",
            "started_at",
            "finished_at",
        ] {
            assert!(item["properties"][field].is_object(), "{field}");
        }
        assert!(doc["components"]["schemas"]["HistoryPage"]["properties"]["items"].is_object());
    }
}
