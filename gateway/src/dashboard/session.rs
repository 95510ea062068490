//! The dashboard's cookie: the coordinator's session token (never the API key
//! it was opened with), the project it was opened for, a CSRF token and an
//! expiry, sealed with AES-256-GCM into one cookie that any replica holding
//! the gateway's session key opens. The sealing key is derived from
//! `options.session_key` for this use alone (and the associated data differs),
//! so a legacy MCP session id is never a dashboard cookie or the reverse.
//! Opening a cookie proves only that a gateway sealed it: the session inside
//! is checked with the coordinator on every request, which ends it on
//! sign-out, on the key's revocation, and after its idle or absolute lifetime.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::time::Duration;

const PREFIX: &str = "bd1.";
const NONCE_LEN: usize = 12;
const AAD: &[u8] = b"baton/dashboard-session/v2";
/// Cookies above this length are refused before any decryption.
const MAX_TOKEN_LEN: usize = 2048;
/// The session cookie; the path keeps it off every other route.
pub(super) const COOKIE: &str = "baton_dashboard";
/// The sign-in form's double-submit cookie (before there is a session).
pub(super) const SIGN_IN_COOKIE: &str = "baton_dashboard_sign_in";
pub(super) const COOKIE_PATH: &str = "/dashboard/";
/// How long a sign-in form stays usable.
pub(super) const SIGN_IN_LIFETIME: Duration = Duration::from_secs(3600);

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Error {
    #[error("the random number generator failed")]
    Random,
    #[error("sealing the session failed")]
    Seal,
    #[error("the session cookie is malformed or was not sealed with this key")]
    Invalid,
    #[error("the session expired")]
    Expired,
}

/// What a session holds. Short field names: the cookie travels with every request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Claims {
    /// The coordinator's session token (`bds_…`), checked on every request.
    #[serde(rename = "s")]
    pub(crate) session: String,
    #[serde(rename = "o")]
    pub(crate) org_id: String,
    #[serde(rename = "p")]
    pub(crate) project_id: String,
    /// Sent back with every state-changing request.
    #[serde(rename = "c")]
    pub(crate) csrf: String,
    /// Unix milliseconds after which the session is over.
    #[serde(rename = "x")]
    pub(crate) expires_ms: i64,
    /// A person signed in with the OpenID provider (not with an API key).
    #[serde(rename = "w", default)]
    pub(crate) person: bool,
}

impl std::fmt::Debug for Claims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claims")
            .field("org_id", &self.org_id)
            .field("project_id", &self.project_id)
            .field("expires_ms", &self.expires_ms)
            .field("person", &self.person)
            .finish_non_exhaustive()
    }
}

/// 128 random bits, URL-safe.
pub(super) fn random_token() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|_| Error::Random)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// The dashboard's own key, derived from the gateway's session key.
fn derive(session_key: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"baton dashboard session key v1\0");
    h.update(session_key);
    h.finalize().into()
}

pub(super) fn seal(session_key: &[u8; 32], claims: &Claims) -> Result<String, Error> {
    seal_value(session_key, AAD, claims)
}

/// Any value sealed like the session (the sign-in flow's cookie uses its own `aad`).
pub(crate) fn seal_value<T: Serialize>(session_key: &[u8; 32], aad: &[u8], value: &T) -> Result<String, Error> {
    let cipher = Aes256Gcm::new_from_slice(&derive(session_key)).map_err(|_| Error::Seal)?;
    let plaintext = serde_json::to_vec(value).map_err(|_| Error::Seal)?;
    let mut nonce = [0u8; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(|_| Error::Random)?;
    let n = Nonce::try_from(&nonce[..]).map_err(|_| Error::Seal)?;
    let ct = cipher.encrypt(&n, Payload { msg: &plaintext, aad }).map_err(|_| Error::Seal)?;
    let mut raw = Vec::with_capacity(NONCE_LEN + ct.len());
    raw.extend_from_slice(&nonce);
    raw.extend_from_slice(&ct);
    Ok(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(raw)))
}

/// The value of a token [`seal_value`] sealed with the same key and `aad`.
pub(crate) fn open_value<T: serde::de::DeserializeOwned>(
    session_key: &[u8; 32],
    aad: &[u8],
    token: &str,
) -> Result<T, Error> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(Error::Invalid);
    }
    let body = token.strip_prefix(PREFIX).ok_or(Error::Invalid)?;
    let raw = URL_SAFE_NO_PAD.decode(body).map_err(|_| Error::Invalid)?;
    if raw.len() <= NONCE_LEN {
        return Err(Error::Invalid);
    }
    let (nonce, ct) = raw.split_at(NONCE_LEN);
    let cipher = Aes256Gcm::new_from_slice(&derive(session_key)).map_err(|_| Error::Invalid)?;
    let nonce = Nonce::try_from(nonce).map_err(|_| Error::Invalid)?;
    let plaintext = cipher.decrypt(&nonce, Payload { msg: ct, aad }).map_err(|_| Error::Invalid)?;
    serde_json::from_slice(&plaintext).map_err(|_| Error::Invalid)
}

/// The claims of a cookie this gateway (or a replica) sealed, unless expired at `now_ms`.
pub(crate) fn open(session_key: &[u8; 32], token: &str, now_ms: i64) -> Result<Claims, Error> {
    let claims: Claims = open_value(session_key, AAD, token)?;
    if claims.expires_ms <= now_ms {
        return Err(Error::Expired);
    }
    Ok(claims)
}

/// Compares two secrets in time independent of where they differ.
pub(super) fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && !a.is_empty() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, on the dashboard's path,
/// `Secure` when the page was served over TLS.
pub(super) fn set_cookie(name: &str, value: &str, max_age: Duration, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path={COOKIE_PATH}; Max-Age={}; HttpOnly; SameSite=Strict{secure}", max_age.as_secs())
}

/// As [`set_cookie`], but `SameSite=Lax`: the sign-in flow's cookie must come
/// back with the provider's top-level redirect to the callback, which a
/// strict cookie would not.
pub(crate) fn set_lax_cookie(name: &str, value: &str, max_age: Duration, secure: bool) -> String {
    set_cookie(name, value, max_age, secure).replace("SameSite=Strict", "SameSite=Lax")
}

/// A `Set-Cookie` value that removes the cookie.
pub(super) fn clear_cookie(name: &str, secure: bool) -> String {
    set_cookie(name, "", Duration::ZERO, secure)
}

/// The value of cookie `name` among the request's `Cookie` headers.
pub(super) fn cookie<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    const KEY: [u8; 32] = [9u8; 32];

    fn claims() -> Claims {
        Claims {
            session: "bds_secret-session".into(),
            org_id: "o".into(),
            project_id: "p".into(),
            csrf: random_token().expect("token"),
            expires_ms: 10_000,
            person: false,
        }
    }

    #[test]
    fn a_sealed_session_opens_on_any_replica_and_hides_the_key() {
        let c = claims();
        let token = seal(&KEY, &c).expect("seal");
        assert!(!token.contains("bds_secret"), "the session token is not readable in the cookie");
        assert!(token.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)), "a plain cookie value");
        assert_eq!(open(&KEY, &token, 9_999), Ok(c.clone()));
        assert_ne!(seal(&KEY, &c).expect("seal"), token, "every seal has its own nonce");
    }

    #[test]
    fn tampered_foreign_and_expired_sessions_do_not_open() {
        let token = seal(&KEY, &claims()).expect("seal");
        assert_eq!(open(&KEY, &token, 10_000), Err(Error::Expired));
        assert_eq!(open(&[8u8; 32], &token, 0), Err(Error::Invalid));
        let mut bytes = token.clone().into_bytes();
        let i = bytes.len() - 3;
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        assert_eq!(open(&KEY, &String::from_utf8(bytes).expect("ascii"), 0), Err(Error::Invalid));
        for junk in ["", "bd1.", "bd1.AAAA", "bs1.xyz", &"bd1.A".repeat(600)] {
            assert_eq!(open(&KEY, junk, 0), Err(Error::Invalid), "{junk:.20}");
        }
    }

    #[test]
    fn cookies_are_strict_http_only_and_secure_over_tls() {
        let plain = set_cookie(COOKIE, "v", Duration::from_secs(8 * 3600), false);
        assert_eq!(plain, "baton_dashboard=v; Path=/dashboard/; Max-Age=28800; HttpOnly; SameSite=Strict");
        assert!(set_cookie(COOKIE, "v", Duration::from_secs(1), true).ends_with("; Secure"));
        assert!(clear_cookie(COOKIE, false).contains("Max-Age=0"));
        let mut h = HeaderMap::new();
        h.append(http::header::COOKIE, "a=1; baton_dashboard=xyz".parse().expect("header"));
        h.append(http::header::COOKIE, "b=2".parse().expect("header"));
        assert_eq!(cookie(&h, COOKIE), Some("xyz"));
        assert_eq!(cookie(&h, "b"), Some("2"));
        assert_eq!(cookie(&h, "c"), None);
    }

    #[test]
    fn csrf_tokens_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
        assert!(!same_secret("", ""));
    }
}
