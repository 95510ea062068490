//! MCP over Streamable HTTP at `/mcp/{gateway_id}` (being built; see issue #6).

use crate::AppState;
use axum::Router;

pub fn router() -> Router<AppState> {
    Router::new()
}
