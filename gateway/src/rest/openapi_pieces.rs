//! The pieces every part of the OpenAPI document uses: the REST surface's
//! (`rest::openapi`) and each route group's (`rest::*::openapi`).

use serde_json::{Value, json};

/// A reference to a schema of the document's components.
pub(in crate::rest) fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// An error answer: the one JSON error shape.
pub(in crate::rest) fn error_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema_ref("Error")}}})
}

/// An error answer that says when to retry (`Retry-After`, seconds).
pub(in crate::rest) fn retry_later(description: &str) -> Value {
    let mut r = error_response(description);
    r["headers"] = json!({"Retry-After": {"schema": {"type": "integer", "minimum": 1}, "description": "Seconds"}});
    r
}
