//! The two sealed values of a watch. A `websocket_url` carries a [`Ticket`]:
//! the caller's credential (so the socket, which has no `Authorization`
//! header, re-checks it before every send), the execution, a random id whose
//! single use the coordinator records, and two deadlines. A `wait_id` carries a
//! [`WaitClaims`]: the execution, a hash of the credential it is bound to and
//! when it ends; it is used with the caller's own `Authorization`.
//! Both are AES-256-GCM sealed under keys derived from the gateway's session
//! key, one per kind, so neither can be passed off as the other or as an MCP
//! session id.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const NONCE_LEN: usize = 12;
/// Sealed values above this length are refused before any decryption.
const MAX_LEN: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("the random number generator failed")]
    Random,
    #[error("sealing failed")]
    Seal,
    #[error("malformed, or not sealed by this deployment")]
    Invalid,
}

/// What a `websocket_url` grants: one connection, opened before
/// `connect_deadline_ms`, watching until `until_ms`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Ticket {
    /// Random; the coordinator records its single use.
    #[serde(rename = "i")]
    pub(crate) id: String,
    /// The caller's bearer token, re-checked before every send.
    #[serde(rename = "b")]
    pub(crate) bearer: String,
    #[serde(rename = "o")]
    pub(crate) org_id: String,
    #[serde(rename = "p")]
    pub(crate) project_id: String,
    #[serde(rename = "x")]
    pub(crate) execution_id: String,
    #[serde(rename = "d")]
    pub(crate) connect_deadline_ms: i64,
    #[serde(rename = "u")]
    pub(crate) until_ms: i64,
    /// Resuming: the cursor the watcher last saw; the socket first replays
    /// every change after it.
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    pub(crate) after: Option<i64>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket").field("id", &self.id).field("execution_id", &self.execution_id).finish()
    }
}

/// What a `wait_id` names: polling one execution, by one credential, until `until_ms`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WaitClaims {
    #[serde(rename = "o")]
    pub(crate) org_id: String,
    #[serde(rename = "p")]
    pub(crate) project_id: String,
    #[serde(rename = "x")]
    pub(crate) execution_id: String,
    /// [`principal`] of the credential that asked for the watch.
    #[serde(rename = "h")]
    pub(crate) principal: String,
    #[serde(rename = "u")]
    pub(crate) until_ms: i64,
}

/// The two kinds, each with its own prefix and derived key.
#[derive(Clone, Copy)]
enum Kind {
    Ticket,
    Wait,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Ticket => "bw1.",
            Kind::Wait => "bwait1.",
        }
    }

    fn label(self) -> &'static [u8] {
        match self {
            Kind::Ticket => b"baton/watch-ticket/v1",
            Kind::Wait => b"baton/watch-wait/v1",
        }
    }

    fn key(self, session_key: &[u8; 32]) -> [u8; 32] {
        let mut hash = Sha256::new();
        hash.update(self.label());
        hash.update(session_key);
        hash.finalize().into()
    }
}

/// A hash naming a credential inside a sealed value; never the token.
pub(crate) fn principal(bearer: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"baton/watch-principal/v1");
    hash.update(bearer.as_bytes());
    URL_SAFE_NO_PAD.encode(hash.finalize())
}

/// A fresh random id for a ticket.
pub(crate) fn random_id() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|_| Error::Random)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

fn seal<T: Serialize>(kind: Kind, session_key: &[u8; 32], claims: &T) -> Result<String, Error> {
    let cipher = Aes256Gcm::new_from_slice(&kind.key(session_key)).map_err(|_| Error::Seal)?;
    let plaintext = serde_json::to_vec(claims).map_err(|_| Error::Seal)?;
    let mut nonce = [0u8; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(|_| Error::Random)?;
    let nonce_arr = Nonce::try_from(&nonce[..]).map_err(|_| Error::Seal)?;
    let sealed = cipher.encrypt(&nonce_arr, Payload { msg: &plaintext, aad: kind.label() }).map_err(|_| Error::Seal)?;
    let mut raw = Vec::with_capacity(NONCE_LEN + sealed.len());
    raw.extend_from_slice(&nonce);
    raw.extend_from_slice(&sealed);
    Ok(format!("{}{}", kind.prefix(), URL_SAFE_NO_PAD.encode(raw)))
}

fn open<T: DeserializeOwned>(kind: Kind, session_key: &[u8; 32], sealed: &str) -> Result<T, Error> {
    if sealed.len() > MAX_LEN {
        return Err(Error::Invalid);
    }
    let body = sealed.strip_prefix(kind.prefix()).ok_or(Error::Invalid)?;
    let raw = URL_SAFE_NO_PAD.decode(body).map_err(|_| Error::Invalid)?;
    if raw.len() <= NONCE_LEN {
        return Err(Error::Invalid);
    }
    let (nonce, ciphertext) = raw.split_at(NONCE_LEN);
    let cipher = Aes256Gcm::new_from_slice(&kind.key(session_key)).map_err(|_| Error::Invalid)?;
    let nonce = Nonce::try_from(nonce).map_err(|_| Error::Invalid)?;
    let plaintext =
        cipher.decrypt(&nonce, Payload { msg: ciphertext, aad: kind.label() }).map_err(|_| Error::Invalid)?;
    serde_json::from_slice(&plaintext).map_err(|_| Error::Invalid)
}

impl Ticket {
    pub(crate) fn seal(&self, session_key: &[u8; 32]) -> Result<String, Error> {
        seal(Kind::Ticket, session_key, self)
    }

    pub(crate) fn open(session_key: &[u8; 32], sealed: &str) -> Result<Ticket, Error> {
        open(Kind::Ticket, session_key, sealed)
    }
}

impl WaitClaims {
    pub(crate) fn seal(&self, session_key: &[u8; 32]) -> Result<String, Error> {
        seal(Kind::Wait, session_key, self)
    }

    pub(crate) fn open(session_key: &[u8; 32], sealed: &str) -> Result<WaitClaims, Error> {
        open(Kind::Wait, session_key, sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket() -> Ticket {
        Ticket {
            id: random_id().expect("id"),
            bearer: "secret-bearer".into(),
            org_id: "o".into(),
            project_id: "p".into(),
            execution_id: "te_x".into(),
            connect_deadline_ms: 10,
            until_ms: 20,
            after: Some(7),
        }
    }

    #[test]
    fn tickets_round_trip_and_hide_the_bearer() {
        let key = [3u8; 32];
        let t = ticket();
        let sealed = t.seal(&key).expect("seal");
        assert!(!sealed.contains("secret-bearer"));
        assert!(sealed.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)), "URL-safe: {sealed}");
        assert!(Ticket::open(&key, &sealed).expect("open") == t);
        assert!(!format!("{t:?}").contains("secret-bearer"), "Debug never shows the bearer");
    }

    #[test]
    fn kinds_and_keys_do_not_mix() {
        let key = [3u8; 32];
        let sealed = ticket().seal(&key).expect("seal");
        assert!(Ticket::open(&[4u8; 32], &sealed).is_err(), "another deployment's key");
        let as_wait = sealed.replacen("bw1.", "bwait1.", 1);
        assert!(WaitClaims::open(&key, &as_wait).is_err(), "a ticket is not a wait id");
        let mut bytes = sealed.into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        assert!(Ticket::open(&key, &String::from_utf8(bytes).expect("ascii")).is_err(), "tampered");
        assert!(Ticket::open(&key, "bw1.").is_err() && Ticket::open(&key, "garbage").is_err());
    }

    #[test]
    fn principals_are_hashes() {
        assert_ne!(principal("a"), principal("b"));
        assert!(!principal("secret-bearer").contains("secret"));
    }
}
