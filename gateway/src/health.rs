//! Liveness and readiness. Ready only while the coordinator answers.

use crate::app::AppState;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/livez", get(|| async { "ok" })).route("/readyz", get(readyz))
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    if state.coordinator.ready().await {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "coordinator unreachable")
    }
}
