//! Legacy (2025-11-25 / 2025-06-18) sessions without server state: the
//! `Mcp-Session-Id` is an AES-256-GCM sealed token carrying the principal hash,
//! the negotiated version and a summary of the client's capabilities, so any
//! replica holding `options.session_key` can open it. Also owns the set of
//! terminated session ids, and the sealing both session ids and MRTR request
//! states use (`seal_json`/`open_json`). Does not authenticate: the caller
//! compares the principal hash with the credential the coordinator resolved.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

const PREFIX: &str = "bs1.";
const NONCE_LEN: usize = 12;
const AAD: &[u8] = b"baton/mcp-session/v1";
/// Tokens above this length are rejected before any decryption.
const MAX_TOKEN_LEN: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub(super) enum Error {
    #[error("the random number generator failed")]
    Random,
    #[error("sealing the token failed")]
    Seal,
    #[error("the token is malformed or was not sealed with this key")]
    Invalid,
}

/// What a session remembers. Field names are short: the token travels in a
/// header on every request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Claims {
    /// Random session id, the key of the terminated set.
    #[serde(rename = "s")]
    pub(crate) sid: String,
    /// Hash of the principal that opened the session.
    #[serde(rename = "p")]
    pub(crate) principal: String,
    #[serde(rename = "g")]
    pub(crate) gateway_id: String,
    /// Negotiated protocol version.
    #[serde(rename = "v")]
    pub(crate) version: String,
    /// The client can answer `elicitation/create`.
    #[serde(rename = "e", default)]
    pub(crate) elicitation: bool,
    /// The client declared the `tasks` capability.
    #[serde(rename = "t", default)]
    pub(crate) tasks: bool,
}

pub(super) fn random_sid() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|_| Error::Random)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

pub(super) fn seal(key: &[u8; 32], claims: &Claims) -> Result<String, Error> {
    seal_json(key, PREFIX, AAD, claims)
}

pub(super) fn open(key: &[u8; 32], token: &str) -> Result<Claims, Error> {
    open_json(key, PREFIX, AAD, token)
}

/// Seals `value` as `{prefix}{base64url(nonce ‖ ciphertext)}`; `aad` binds the
/// token to its purpose, so a token of one kind never opens as another.
pub(super) fn seal_json<T: Serialize>(key: &[u8; 32], prefix: &str, aad: &[u8], value: &T) -> Result<String, Error> {
    let cipher = Aes256Gcm::new_from_slice(key).map_err(|_| Error::Seal)?;
    let plaintext = serde_json::to_vec(value).map_err(|_| Error::Seal)?;
    let mut nonce = [0u8; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(|_| Error::Random)?;
    let nonce_arr = Nonce::try_from(&nonce[..]).map_err(|_| Error::Seal)?;
    let ct = cipher.encrypt(&nonce_arr, Payload { msg: &plaintext, aad }).map_err(|_| Error::Seal)?;
    let mut raw = Vec::with_capacity(NONCE_LEN + ct.len());
    raw.extend_from_slice(&nonce);
    raw.extend_from_slice(&ct);
    Ok(format!("{prefix}{}", URL_SAFE_NO_PAD.encode(raw)))
}

/// Opens what `seal_json` sealed with the same key, prefix and `aad`.
pub(super) fn open_json<T: DeserializeOwned>(
    key: &[u8; 32],
    prefix: &str,
    aad: &[u8],
    token: &str,
) -> Result<T, Error> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(Error::Invalid);
    }
    let body = token.strip_prefix(prefix).ok_or(Error::Invalid)?;
    let raw = URL_SAFE_NO_PAD.decode(body).map_err(|_| Error::Invalid)?;
    if raw.len() <= NONCE_LEN {
        return Err(Error::Invalid);
    }
    let (nonce, ct) = raw.split_at(NONCE_LEN);
    let cipher = Aes256Gcm::new_from_slice(key).map_err(|_| Error::Invalid)?;
    let nonce = Nonce::try_from(nonce).map_err(|_| Error::Invalid)?;
    let plaintext = cipher.decrypt(&nonce, Payload { msg: ct, aad }).map_err(|_| Error::Invalid)?;
    serde_json::from_slice(&plaintext).map_err(|_| Error::Invalid)
}

/// Session ids this replica ended by DELETE, oldest evicted first: a fast
/// local answer. The truth is the coordinator's (`EndMcpSession`, checked with
/// every legacy message through `WhoAmI`), so every replica sees the end.
pub(super) struct Terminated {
    inner: Mutex<(HashSet<String>, VecDeque<String>)>,
    capacity: usize,
}

impl Terminated {
    pub(super) fn new(capacity: usize) -> Self {
        Terminated { inner: Mutex::new((HashSet::new(), VecDeque::new())), capacity: capacity.max(1) }
    }

    pub(super) fn insert(&self, sid: &str) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (set, order) = &mut *guard;
        if set.insert(sid.to_owned()) {
            order.push_back(sid.to_owned());
        }
        while order.len() > self.capacity {
            if let Some(old) = order.pop_front() {
                set.remove(&old);
            }
        }
    }

    pub(super) fn contains(&self, sid: &str) -> bool {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).0.contains(sid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            sid: random_sid().expect("sid"),
            principal: "p".into(),
            gateway_id: "gw".into(),
            version: "2025-11-25".into(),
            elicitation: true,
            tasks: false,
        }
    }

    #[test]
    fn round_trip_and_visible_ascii() {
        let key = [7u8; 32];
        let c = claims();
        let token = seal(&key, &c).expect("seal");
        assert!(token.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        assert_eq!(open(&key, &token).expect("open"), c);
    }

    #[test]
    fn tampering_and_foreign_keys_fail() {
        let key = [7u8; 32];
        let token = seal(&key, &claims()).expect("seal");
        assert!(open(&[8u8; 32], &token).is_err());
        let mut bytes = token.into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).expect("ascii");
        assert!(open(&key, &tampered).is_err());
        assert!(open(&key, "bs1.").is_err());
        assert!(open(&key, "garbage").is_err());
    }

    #[test]
    fn terminated_set_is_bounded() {
        let t = Terminated::new(2);
        t.insert("a");
        t.insert("b");
        t.insert("c");
        assert!(!t.contains("a"));
        assert!(t.contains("b") && t.contains("c"));
    }
}
