//! The dashboard's stylesheet and script, embedded in the binary (no build
//! step at install time). Their URLs carry a digest of their content, so a
//! browser may keep them for a day and still never runs a stale script after
//! an upgrade.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

const FILES: [(&str, &str, &str); 2] = [
    ("dashboard.css", "text/css; charset=utf-8", include_str!("../../assets/dashboard.css")),
    ("dashboard.js", "text/javascript; charset=utf-8", include_str!("../../assets/dashboard.js")),
];

/// The first 12 hex digits of each file's SHA-256.
static VERSIONS: LazyLock<Vec<String>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|(_, _, body)| Sha256::digest(body.as_bytes()).iter().take(6).map(|b| format!("{b:02x}")).collect())
        .collect()
});

/// The URL of an embedded file, versioned by its content.
pub(super) fn url(name: &str) -> String {
    let version = FILES.iter().position(|(n, _, _)| *n == name).and_then(|i| VERSIONS.get(i)).cloned();
    format!("/dashboard/assets/{name}?v={}", version.unwrap_or_default())
}

pub(super) async fn serve(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
                (header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=86400")),
            ],
            *body,
        )
            .into_response(),
        None => {
            (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "not found").into_response()
        }
    }
}
