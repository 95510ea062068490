//! The webhook routes' part of the OpenAPI document, added by `rest::openapi::spec`.

use super::super::openapi_pieces::{error_response, retry_later, schema_ref};
use super::{BASE, DEFAULT_LIMIT, MAX_LIMIT, MAX_URL};
use baton_proto::coordinator::v1::{ExecutionStatus, WebhookDeliveryStatus};
use serde_json::{Map, Value, json};

fn responses(ok: (u16, &str, Option<&str>), codes: &[u16]) -> Value {
    let mut out = Map::new();
    let mut success = json!({"description": ok.1});
    if let Some(schema) = ok.2 {
        success["content"] = json!({"application/json": {"schema": schema_ref(schema)}});
    }
    out.insert(ok.0.to_string(), success);
    for code in codes {
        let description = match code {
            400 => {
                "A malformed body or query, an event type other than tool.execution.lifecycle, or a target URL that is refused (not http(s), unresolvable, or resolving to a loopback, private or link-local address)"
            }
            401 => "Missing, invalid or revoked bearer token",
            403 => "The caller is not an admin API key of the project",
            404 => "Another project's path, or an unknown webhook",
            413 => "Request body too large",
            _ => "The coordinator or its database is unavailable; retry after Retry-After seconds",
        };
        let r = if *code == 503 { retry_later(description) } else { error_response(description) };
        out.insert(code.to_string(), r);
    }
    Value::Object(out)
}

fn empty_body() -> Value {
    json!({"required": false, "content": {"application/json": {"schema": {
        "type": "object", "additionalProperties": false, "maxProperties": 0}}}})
}

/// Adds the webhook paths and schemas to `doc`.
pub(crate) fn extend(doc: &mut Value) {
    let scope = [
        json!({"name": "org_id", "in": "path", "required": true, "schema": {"type": "string"}}),
        json!({"name": "project_id", "in": "path", "required": true, "schema": {"type": "string"}}),
    ];
    let mut with_id = scope.to_vec();
    with_id.push(json!({"name": "webhook_id", "in": "path", "required": true, "schema": {"type": "string"}}));
    let paths = json!({
        BASE: {
            "parameters": scope,
            "post": {
                "summary": "Create a webhook endpoint; the answer shows its secret once (admin)",
                "operationId": "createWebhook",
                "requestBody": {"required": true, "content": {"application/json": {"schema": schema_ref("CreateWebhookRequest")}}},
                "responses": responses((201, "The endpoint and its whsec_ secret", Some("WebhookWithSecret")), &[400, 401, 403, 404, 413, 503]),
            },
            "get": {
                "summary": "The project's webhook endpoints (admin)", "operationId": "listWebhooks",
                "responses": responses((200, "Every endpoint; never a secret", Some("WebhookList")), &[401, 403, 404, 503]),
            }
        },
        format!("{BASE}/{{webhook_id}}"): {
            "parameters": with_id,
            "get": {
                "summary": "One webhook endpoint (admin)", "operationId": "getWebhook",
                "responses": responses((200, "The endpoint; never its secret", Some("Webhook")), &[401, 403, 404, 503]),
            },
            "delete": {
                "summary": "Delete the endpoint and the signals still owed to it (admin)", "operationId": "deleteWebhook",
                "responses": responses((204, "Deleted", None), &[401, 403, 404, 503]),
            }
        },
        format!("{BASE}/{{webhook_id}}/disable"): {
            "parameters": with_id,
            "post": {
                "summary": "Stop delivering to the endpoint; new signals are not written for it (admin)",
                "operationId": "disableWebhook", "requestBody": empty_body(),
                "responses": responses((200, "The endpoint", Some("Webhook")), &[400, 401, 403, 404, 413, 503]),
            }
        },
        format!("{BASE}/{{webhook_id}}/enable"): {
            "parameters": with_id,
            "post": {
                "summary": "Deliver to the endpoint again (admin)", "operationId": "enableWebhook", "requestBody": empty_body(),
                "responses": responses((200, "The endpoint", Some("Webhook")), &[400, 401, 403, 404, 413, 503]),
            }
        },
        format!("{BASE}/{{webhook_id}}/rotate-secret"): {
            "parameters": with_id,
            "post": {
                "summary": "A new secret; the previous one keeps signing (a second signature) during the overlap (admin)",
                "operationId": "rotateWebhookSecret", "requestBody": empty_body(),
                "responses": responses((200, "The endpoint and its new whsec_ secret", Some("WebhookWithSecret")), &[400, 401, 403, 404, 413, 503]),
            }
        },
        format!("{BASE}/{{webhook_id}}/deliveries"): {
            "parameters": with_id,
            "get": {
                "summary": "The endpoint's most recent deliveries, newest first (admin)", "operationId": "listWebhookDeliveries",
                "parameters": [
                    {"name": "limit", "in": "query", "required": false,
                        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}}
                ],
                "responses": responses((200, "Delivery state: last attempt, status, next retry", Some("WebhookDeliveryPage")), &[400, 401, 403, 404, 503]),
            }
        }
    });
    let time = json!({"type": "string", "format": "date-time"});
    let nullable_time = json!({"type": ["string", "null"], "format": "date-time"});
    let webhook_properties = json!({
        "webhook_id": {"type": "string"},
        "url": {"type": "string"},
        "event_type": {"const": crate_event_type()},
        "enabled": {"type": "boolean"},
        "created_at": time,
        "updated_at": time,
        "previous_secret_expires_at": nullable_time,
    });
    let webhook_required =
        json!(["webhook_id", "url", "event_type", "enabled", "created_at", "updated_at", "previous_secret_expires_at"]);
    let mut with_secret_properties = webhook_properties.clone();
    with_secret_properties["secret"] = json!({"type": "string", "pattern": "^whsec_"});
    let mut with_secret_required = webhook_required.clone();
    if let Some(list) = with_secret_required.as_array_mut() {
        list.push(json!("secret"));
    }
    let schemas = json!({
        "CreateWebhookRequest": {
            "type": "object", "additionalProperties": false, "required": ["url", "event_type"],
            "properties": {
                "url": {"type": "string", "minLength": 1, "maxLength": MAX_URL, "description": "An http or https URL"},
                "event_type": {"const": crate_event_type()}
            }
        },
        "Webhook": {"type": "object", "required": webhook_required, "properties": webhook_properties},
        "WebhookWithSecret": {"type": "object", "required": with_secret_required, "properties": with_secret_properties},
        "WebhookList": {
            "type": "object", "required": ["items"],
            "properties": {"items": {"type": "array", "items": schema_ref("Webhook")}}
        },
        "WebhookDelivery": {
            "type": "object",
            "required": ["message_id", "execution_id", "state", "status", "attempts", "created_at", "last_attempt_at",
                "last_status_code", "last_error", "next_attempt_at", "finished_at"],
            "properties": {
                "message_id": {"type": "string", "description": "The webhook-id header, the same on every attempt"},
                "execution_id": {"type": "string"},
                "state": {"enum": ExecutionStatus::names().collect::<Vec<_>>()},
                "status": {"enum": WebhookDeliveryStatus::names().collect::<Vec<_>>()},
                "attempts": {"type": "integer", "minimum": 0},
                "created_at": time,
                "last_attempt_at": nullable_time,
                "last_status_code": {"type": ["integer", "null"]},
                "last_error": {"type": ["string", "null"]},
                "next_attempt_at": nullable_time,
                "finished_at": nullable_time,
            }
        },
        "WebhookDeliveryPage": {
            "type": "object", "required": ["items"],
            "properties": {"items": {"type": "array", "items": schema_ref("WebhookDelivery")}}
        }
    });
    if let (Some(to), Value::Object(from)) = (doc["paths"].as_object_mut(), paths) {
        to.extend(from);
    }
    if let (Some(to), Value::Object(from)) = (doc["components"]["schemas"].as_object_mut(), schemas) {
        to.extend(from);
    }
}

/// The one event type (the coordinator refuses any other).
fn crate_event_type() -> &'static str {
    "tool.execution.lifecycle"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_webhook_routes_are_documented() {
        let mut doc = json!({"paths": {}, "components": {"schemas": {}}});
        extend(&mut doc);
        for (suffix, method) in [
            ("", "post"),
            ("", "get"),
            ("/{webhook_id}", "get"),
            ("/{webhook_id}", "delete"),
            ("/{webhook_id}/disable", "post"),
            ("/{webhook_id}/enable", "post"),
            ("/{webhook_id}/rotate-secret", "post"),
            ("/{webhook_id}/deliveries", "get"),
        ] {
            let path = format!("/v1/orgs/{{org_id}}/projects/{{project_id}}/webhooks{suffix}");
            assert!(doc["paths"][&path][method].is_object(), "{path} {method}");
        }
        assert!(doc["components"]["schemas"]["WebhookWithSecret"]["required"].to_string().contains("secret"));
    }
}
