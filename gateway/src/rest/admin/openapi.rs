//! The project administration routes' part of the OpenAPI document, added by
//! `rest::openapi::spec`.

use super::super::body::MAX_RETENTION_SECONDS;
use super::super::history::MAX_OFFSET;
use super::super::history::openapi::{NO_CONTROL_CHARACTERS, responses};
use super::super::openapi_pieces::schema_ref;
use super::{AUDIT, DEFAULT_LIMIT, MAX_LIMIT, RETENTION};
use serde_json::{Value, json};

const ERRORS: [(u16, &str); 5] = [
    (400, "A query parameter or the body is malformed, unknown or given twice (the message names it)"),
    (401, "Missing, invalid or revoked bearer token"),
    (403, "Only the project's admin API keys may call this; a refused change is audited"),
    (404, "Another project's path (the same body as any not-found)"),
    (503, "The coordinator or its database is unavailable; retry after Retry-After seconds"),
];

fn schemas() -> Value {
    let nullable_text = json!({"type": ["string", "null"]});
    let nullable_seconds = json!({"type": ["integer", "null"], "minimum": 0});
    json!({
        "AuditLogEntry": {
            "type": "object",
            "required": ["id", "at", "actor_id", "actor_kind", "action", "target", "outcome", "detail", "occurrences", "scope"],
            "properties": {
                "id": {"type": "string"},
                "at": {"type": "string", "format": "date-time"},
                "actor_id": {"type": "string", "description": "The credential that acted, or `cli` for `baton admin`"},
                "actor_kind": {"enum": ["api_key", "end_user", "worker", "cli"]},
                "action": {"type": "string", "description": "e.g. operator.cancel, history.reveal, retention.set, credential.create"},
                "target": nullable_text,
                "outcome": {"type": "string", "description": "allowed, refused, not_found, or a cancel's outcome"},
                "detail": nullable_text,
                "occurrences": {"type": "integer", "minimum": 1,
                    "description": "How many times it happened: refusals of one credential for one action within a minute share one row, whose `at` is the first"},
                "scope": {"enum": ["project", "organization"]}
            }
        },
        "AuditLogPage": {
            "type": "object", "required": ["items", "limit", "offset", "page_count", "total_count"],
            "properties": {
                "items": {"type": "array", "items": schema_ref("AuditLogEntry")},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                "offset": {"type": "integer", "minimum": 0},
                "page_count": {"type": "integer", "minimum": 0},
                "total_count": {"type": "integer", "minimum": 0}
            }
        },
        "Retention": {
            "type": "object",
            "required": ["retention_seconds", "source", "project_retention_seconds", "organization_retention_seconds", "execution_logging"],
            "properties": {
                "retention_seconds": {"type": "integer", "minimum": 0, "description": "The window that applies, counted from each execution's deadline"},
                "source": {"enum": ["project", "organization", "default", "execution_logging_off"]},
                "project_retention_seconds": nullable_seconds,
                "organization_retention_seconds": nullable_seconds,
                "execution_logging": {"type": "boolean"}
            }
        },
        "RetentionChange": {
            "type": "object", "required": ["retention_seconds"], "additionalProperties": false,
            "properties": {
                "retention_seconds": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_RETENTION_SECONDS,
                    "description": "The project's window; null clears it so the organization's (or the default) applies"}
            }
        }
    })
}

/// Adds the administration paths and schemas to `doc`.
pub(crate) fn extend(doc: &mut Value) {
    let scope = [
        json!({"name": "org_id", "in": "path", "required": true, "schema": {"type": "string"}}),
        json!({"name": "project_id", "in": "path", "required": true, "schema": {"type": "string"}}),
    ];
    let text = |name: &str, about: &str| {
        json!({"name": name, "in": "query", "required": false, "description": about,
            "schema": {"type": "string", "minLength": 1, "maxLength": 512, "pattern": NO_CONTROL_CHARACTERS}})
    };
    let time = |name: &str, about: &str| {
        json!({"name": name, "in": "query", "required": false, "description": about,
            "schema": {"type": "string", "format": "date-time"}})
    };
    let params = [
        text("action", "Only this action"),
        text("actor_id", "Only what this credential (or `cli`) did"),
        text("outcome", "Only this outcome"),
        time("start_time", "RFC 3339: rows at or after this time"),
        time("end_time", "RFC 3339: rows before this time; not before start_time (400)"),
        json!({"name": "limit", "in": "query", "required": false,
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}}),
        json!({"name": "offset", "in": "query", "required": false,
            "schema": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET, "default": 0}}),
    ];
    let mut put_errors = ERRORS.to_vec();
    put_errors.insert(4, (413, "Request body too large"));
    let paths = json!({
        AUDIT: {
            "parameters": scope,
            "get": {
                "summary": "The project's audit log (and its organization's changes), newest first",
                "operationId": "listAuditLogs",
                "parameters": params,
                "responses": responses(("One page", "AuditLogPage"), &ERRORS),
            }
        },
        RETENTION: {
            "parameters": scope,
            "get": {
                "summary": "The project's retention window and where it comes from",
                "operationId": "getRetention",
                "responses": responses(("The window", "Retention"), &ERRORS),
            },
            "put": {
                "summary": "Sets or clears the project's retention window (audited)",
                "operationId": "setRetention",
                "requestBody": {"required": true, "content": {"application/json": {"schema": schema_ref("RetentionChange")}}},
                "responses": responses(("The window now", "Retention"), &put_errors),
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
