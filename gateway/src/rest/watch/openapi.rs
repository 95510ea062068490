//! The watch's part of the OpenAPI document, added by `rest::openapi::spec`:
//! the `delivery` and `timeout_seconds` parameters of a read by id (whose 200
//! is then a `WatchOffer`), the socket route and the `wait_id` fallback.

use super::super::openapi_pieces::{error_response as error, retry_later, schema_ref};
use super::{BASE, WATCH_PATH};
use crate::waits::{DEFAULT_WATCH_SECONDS, Limits};
use serde_json::{Value, json};

/// Adds the watch's paths, parameters and schemas to `doc`.
pub(crate) fn extend(doc: &mut Value) {
    let defaults = Limits::default();
    let read = &mut doc["paths"][format!("{BASE}/{{execution_id}}")]["get"];
    if let Some(params) = read["parameters"].as_array_mut() {
        params.push(json!({"name": "delivery", "in": "query",
            "schema": {"type": "string", "enum": ["poll", "websocket", "any"]},
            "description": "poll (the default): answer now, or after wait_ms. websocket or any: answer at once \
                with a WatchOffer (wait_ms is then refused)."}));
        params.push(json!({"name": "timeout_seconds", "in": "query", "schema": {"type": "integer", "minimum": 1},
            "description": format!("With delivery=websocket|any: how long the watch lasts (default {DEFAULT_WATCH_SECONDS}); \
                over the configured limit gateway.max_watch_seconds (default {}) is 400", defaults.max_watch_seconds)}));
        for p in params.iter_mut().filter(|p| p["name"] == "wait_ms") {
            p["description"] = format!(
                "Wait up to this long for the status to change (0: answer at once); over the configured limit \
                 gateway.max_wait_ms (default {}) is 400, never a shorter wait",
                defaults.max_wait_ms
            )
            .into();
        }
    }
    read["responses"]["200"]["content"]["application/json"]["schema"] =
        json!({"oneOf": [schema_ref("ExecutionRead"), schema_ref("WatchOffer")]});
    read["responses"]["200"]["description"] =
        "The owner view and why a long poll ended; or, with delivery=websocket|any, a watch offer".into();

    let with_wait = json!([
        {"name": "org_id", "in": "path", "required": true, "schema": {"type": "string"}},
        {"name": "project_id", "in": "path", "required": true, "schema": {"type": "string"}},
        {"name": "execution_id", "in": "path", "required": true, "schema": {"type": "string"}},
        {"name": "wait_id", "in": "path", "required": true, "schema": {"type": "string"}}
    ]);
    let paths = doc["paths"].as_object_mut();
    let Some(paths) = paths else { return };
    paths.insert(
        format!("{BASE}/{{execution_id}}/waits/{{wait_id}}"),
        json!({"parameters": with_wait, "get": {
            "summary": "The polling fallback of a watch: read the execution, optionally waiting for a change",
            "operationId": "pollWatch",
            "parameters": [{"name": "wait_ms", "in": "query", "schema": {"type": "integer", "minimum": 0},
                "description": "As on a read by id, within gateway.max_wait_ms"}],
            "responses": {
                "200": {"description": "The owner view, why a long poll ended, and the wait",
                    "content": {"application/json": {"schema": schema_ref("WaitRead")}}},
                "400": error("Malformed or over-limit wait_ms"),
                "401": error("Missing, invalid or revoked bearer token"),
                "404": error("Unknown, foreign or ended wait (reason wait_expired once it ended), or an execution \
                    that is gone"),
                "429": retry_later("too_many_waits: this credential or gateway holds too many waits"),
                "503": retry_later("The coordinator or its database is unavailable"),
            }
        }}),
    );
    paths.insert(
        WATCH_PATH.to_owned(),
        json!({"get": {
            "summary": "Open a watch socket (websocket upgrade only) with the single-use token of a WatchOffer",
            "description": "Messages are JSON text frames: {type: execution, execution} on open and on every status \
                change; {type: input_request, execution_id, input_request} as input requests appear; last \
                {type: end, reason: terminal|timed_out|shutdown, timed_out, shutdown} (close 1000; 1001 on \
                shutdown: reconnect at once) or {type: error, error} (close 1008 when the credential or access is \
                gone).",
            "operationId": "openWatch",
            // The credential rides sealed in the token; no Authorization header.
            "security": [],
            "parameters": [{"name": "token", "in": "query", "schema": {"type": "string"},
                "description": "The token of websocket_url"}],
            "responses": {
                "101": {"description": "Switching to the websocket protocol"},
                "400": error("invalid_request with reason upgrade_required: the request carried no websocket \
                    Upgrade (a proxy must forward Upgrade and Connection); the token stays unused"),
                "401": error("unauthenticated: reason token_invalid, token_expired (after connect_deadline) or \
                    token_used (single use); or the credential inside was revoked"),
                "404": error("The execution is gone or no longer the caller's"),
                "429": retry_later("too_many_waits: this credential or gateway holds too many waits"),
                "503": retry_later("The coordinator or its database is unavailable"),
            }
        }}),
    );
    let Some(schemas) = doc["components"]["schemas"].as_object_mut() else { return };
    let time = json!({"type": "string", "format": "date-time"});
    schemas.insert(
        "WatchOffer".into(),
        json!({
            "type": "object",
            "required": ["execution_id", "delivery", "websocket_url", "connect_deadline", "timeout_seconds",
                "watch_expires_at", "wait_id", "wait_url", "wait_expires_at", "execution"],
            "properties": {
                "execution_id": {"type": "string"},
                "delivery": {"type": "string", "enum": ["websocket", "any"]},
                "websocket_url": {"type": "string", "description": "Single use, never renewed; valid on any replica"},
                "connect_deadline": time.clone(),
                "timeout_seconds": {"type": "integer", "minimum": 1},
                "watch_expires_at": time.clone(),
                "wait_id": {"type": "string", "description": "The polling fallback, valid at least as long as the watch"},
                "wait_url": {"type": "string"},
                "wait_expires_at": time.clone(),
                "execution": schema_ref("Execution")
            }
        }),
    );
    schemas.insert(
        "WaitRead".into(),
        json!({"allOf": [schema_ref("ExecutionRead"), {"type": "object", "required": ["wait_id", "wait_expires_at"],
            "properties": {"wait_id": {"type": "string"}, "wait_expires_at": time}}]}),
    );
    if let Some(error) = schemas.get_mut("Error").and_then(|e| e["properties"]["error"]["properties"].as_object_mut()) {
        let reason = json!({"type": "string",
            "description": "A finer cause some refusals carry: upgrade_required, token_invalid, token_expired, \
                token_used, wait_expired"});
        error.insert("reason".into(), reason);
    }
}

#[cfg(test)]
mod tests {
    use crate::rest::openapi::spec;

    #[test]
    fn the_watch_routes_and_parameters_are_documented() {
        let doc = spec();
        let paths = &doc["paths"];
        let read = &paths["/v1/orgs/{org_id}/projects/{project_id}/tool-executions/{execution_id}"]["get"];
        let names: Vec<_> =
            read["parameters"].as_array().expect("parameters").iter().filter_map(|p| p["name"].as_str()).collect();
        assert!(names.contains(&"delivery") && names.contains(&"timeout_seconds"), "{names:?}");
        assert!(
            paths["/v1/watch"]["get"]["responses"]["400"]["description"]
                .as_str()
                .is_some_and(|d| d.contains("upgrade_required"))
        );
        let wait = "/v1/orgs/{org_id}/projects/{project_id}/tool-executions/{execution_id}/waits/{wait_id}";
        assert!(paths[wait]["get"].is_object());
        assert_eq!(paths["/v1/watch"]["get"]["security"], serde_json::json!([]), "the token is the credential");
        assert!(doc["components"]["schemas"]["WatchOffer"]["required"].as_array().is_some_and(|r| r.len() == 10));
    }
}
