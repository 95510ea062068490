//! The operator routes' part of the OpenAPI document, added by `rest::openapi::spec`.

use super::super::openapi_pieces::{error_response, retry_later, schema_ref};
use super::{BASE, DEFAULT_LIMIT, MAX_LIMIT};
use baton_proto::coordinator::v1::ExecutionStatus;
use serde_json::{Map, Value, json};

fn responses(ok: (&str, &str), codes: &[u16]) -> Value {
    let mut out = Map::new();
    out.insert(
        "200".into(),
        json!({"description": ok.0, "content": {"application/json": {"schema": schema_ref(ok.1)}}}),
    );
    for code in codes {
        let description = match code {
            400 => "A malformed query, cursor or body",
            401 => "Missing, invalid or revoked bearer token",
            403 => "The key lacks the route's permission (status, payload or cancel), or is read-only (cancel)",
            404 => "Another project's path, or an unknown or expired execution (identical bodies)",
            413 => "Request body too large",
            _ => "The coordinator or its database is unavailable; retry after Retry-After seconds",
        };
        let r = if *code == 503 { retry_later(description) } else { error_response(description) };
        out.insert(code.to_string(), r);
    }
    Value::Object(out)
}

/// Adds the operator paths and schemas to `doc`.
pub(crate) fn extend(doc: &mut Value) {
    let scope = [
        json!({"name": "org_id", "in": "path", "required": true, "schema": {"type": "string"}}),
        json!({"name": "project_id", "in": "path", "required": true, "schema": {"type": "string"}}),
    ];
    let mut with_id = scope.to_vec();
    with_id.push(json!({"name": "execution_id", "in": "path", "required": true, "schema": {"type": "string"}}));
    let paths = json!({
        BASE: {
            "parameters": scope,
            "get": {
                "summary": "Every execution of the project, newest first (status permission)",
                "operationId": "listOperatorExecutions",
                "parameters": [
                    {"name": "limit", "in": "query", "required": false,
                        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}},
                    {"name": "cursor", "in": "query", "required": false, "schema": {"type": "string"}}
                ],
                "responses": responses(("One page; never payloads", "ExecutionPage"), &[400, 401, 403, 404, 503]),
            }
        },
        format!("{BASE}/{{execution_id}}"): {
            "parameters": with_id,
            "get": {
                "summary": "One execution's safe status (status permission)", "operationId": "getOperatorExecution",
                "responses": responses(("The status view; never payloads", "Execution"), &[401, 403, 404, 503]),
            }
        },
        format!("{BASE}/{{execution_id}}/payload"): {
            "parameters": with_id,
            "get": {
                "summary": "One execution's input and result (payload permission)", "operationId": "getOperatorPayload",
                "responses": responses(("The recorded payload", "OperatorPayload"), &[401, 403, 404, 503]),
            }
        },
        format!("{BASE}/{{execution_id}}/cancel"): {
            "parameters": with_id,
            "post": {
                "summary": "Request cooperative cancellation (cancel permission)", "operationId": "cancelOperatorExecution",
                "responses": responses(("What Baton can prove about the stop", "CancelResult"), &[400, 401, 403, 404, 413, 503]),
            }
        }
    });
    let schemas = json!({
        "OperatorPayload": {
            "type": "object", "required": ["execution_id", "status", "input", "result"],
            "properties": {
                "execution_id": {"type": "string"},
                "status": {"enum": ExecutionStatus::names().collect::<Vec<_>>()},
                "input": {"description": "The input the tool received"},
                "result": {"description": "The original tool result; null unless completed"}
            }
        }
    });
    if let (Some(to), Value::Object(from)) = (doc["paths"].as_object_mut(), paths) {
        to.extend(from);
    }
    if let (Some(to), Value::Object(from)) = (doc["components"]["schemas"].as_object_mut(), schemas) {
        to.extend(from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_routes_are_documented() {
        let mut doc = json!({"paths": {}, "components": {"schemas": {}}});
        extend(&mut doc);
        for (suffix, method) in [
            ("", "get"),
            ("/{execution_id}", "get"),
            ("/{execution_id}/payload", "get"),
            ("/{execution_id}/cancel", "post"),
        ] {
            let path = format!("/v1/orgs/{{org_id}}/projects/{{project_id}}/operator/tool-executions{suffix}");
            assert!(doc["paths"][&path][method].is_object(), "{path}");
        }
    }
}
