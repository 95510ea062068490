//! The `requestState` of an MRTR round (2026-07-28): a sealed token naming the
//! execution the first round started, the tool it runs and the principal it
//! was handed to. Any replica holding `options.session_key` opens it, so the
//! retry may land anywhere; a token altered, sealed elsewhere, or sent back by
//! another principal or for another tool is refused before anything is read.
//! Ownership is still the coordinator's: the execution is read with the
//! caller's credential like any other.

use super::session::{self, Error};
use serde::{Deserialize, Serialize};

const PREFIX: &str = "brs1.";
const AAD: &[u8] = b"baton/mcp-request-state/v1";

/// What a request state says. Field names are short: it travels in every retry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct RequestState {
    #[serde(rename = "e")]
    pub(crate) execution_id: String,
    #[serde(rename = "t")]
    pub(crate) tool: String,
    /// Hash of the principal the round was answered to (`Caller::principal`).
    #[serde(rename = "p")]
    pub(crate) principal: String,
}

pub(super) fn seal(key: &[u8; 32], state: &RequestState) -> Result<String, Error> {
    session::seal_json(key, PREFIX, AAD, state)
}

/// The state `token` names, if it was sealed here for this principal and tool.
pub(super) fn open_for(key: &[u8; 32], token: &str, principal: &str, tool: &str) -> Option<RequestState> {
    let state: RequestState = session::open_json(key, PREFIX, AAD, token).ok()?;
    (state.principal == principal && state.tool == tool).then_some(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> RequestState {
        RequestState { execution_id: "te_1".into(), tool: "ask".into(), principal: "alice".into() }
    }

    #[test]
    fn opens_only_for_its_principal_and_tool() {
        let key = [3u8; 32];
        let token = seal(&key, &state()).expect("seal");
        assert_eq!(open_for(&key, &token, "alice", "ask"), Some(state()));
        assert_eq!(open_for(&key, &token, "bob", "ask"), None);
        assert_eq!(open_for(&key, &token, "alice", "other"), None);
        assert_eq!(open_for(&[4u8; 32], &token, "alice", "ask"), None);
    }

    #[test]
    fn a_session_id_or_a_bare_execution_id_is_not_a_request_state() {
        let key = [3u8; 32];
        let claims = session::Claims {
            sid: "s".into(),
            principal: "alice".into(),
            gateway_id: "gw".into(),
            version: "2025-11-25".into(),
            elicitation: true,
            tasks: true,
        };
        let session_token = session::seal(&key, &claims).expect("seal");
        assert_eq!(open_for(&key, &session_token, "alice", "ask"), None);
        let swapped = session_token.replacen("bs1.", PREFIX, 1);
        assert_eq!(open_for(&key, &swapped, "alice", "ask"), None, "the purpose is bound by the associated data");
        assert_eq!(open_for(&key, "te_0123456789abcdefghijklmnopq", "alice", "ask"), None);
    }
}
