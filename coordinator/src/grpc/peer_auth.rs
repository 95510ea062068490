//! The cluster credential coordinators present to each other's `Peer` service:
//! `v2.<unix seconds>.<nonce>.<base64 HMAC-SHA256(secret, "baton-peer.v2.<seconds>.<nonce>.<method>.<digest>")>`
//! in the `x-baton-peer` metadata, where `digest` is the SHA-256 of the
//! request's identifying fields. The secret itself never crosses the wire,
//! and a token is good for one call: the method and request it was made
//! for, within a minute either side of its time, once (each replica
//! remembers the nonces it accepted for as long as they could verify). So a
//! token seen on the wire can neither be replayed nor carry another request.
//! It is checked in constant time. Worker and gateway bearer tokens can
//! never pass it.

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;

pub const METADATA_KEY: &str = "x-baton-peer";

/// How far a token's time may be from the verifier's clock.
const SKEW_SECONDS: u64 = 60;
/// Nonces remembered at once; past it, calls are refused until old ones age
/// out (a flood of valid tokens needs the secret, so this is a backstop).
const MAX_REMEMBERED: usize = 100_000;

type HmacSha256 = hmac::Hmac<Sha256>;

/// The SHA-256 of a request's identifying fields, each prefixed with its length.
pub fn digest(fields: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for f in fields {
        h.update((f.len() as u64).to_le_bytes());
        h.update(f.as_bytes());
    }
    h.finalize().into()
}

fn mac(secret: &[u8], seconds: u64, nonce: &str, method: &str, digest: &[u8; 32]) -> Option<HmacSha256> {
    let mut mac = HmacSha256::new_from_slice(secret).ok()?;
    mac.update(format!("baton-peer.v2.{seconds}.{nonce}.{method}.").as_bytes());
    mac.update(digest);
    Some(mac)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A token for one call of `method` carrying `digest`, made at `seconds`.
pub fn token(secret: &[u8], seconds: u64, method: &str, digest: &[u8; 32]) -> String {
    let mut nonce = [0u8; 16];
    // Without randomness the token still verifies once; a repeat is refused.
    let _ = getrandom::fill(&mut nonce);
    let nonce = b64(&nonce);
    let tag =
        mac(secret, seconds, &nonce, method, digest).map(|m| m.finalize().into_bytes().to_vec()).unwrap_or_default();
    format!("v2.{seconds}.{nonce}.{}", b64(&tag))
}

/// The nonces this replica accepted, with the time after which their tokens
/// could not verify anyway.
#[derive(Default)]
pub(crate) struct Seen(Mutex<HashMap<String, u64>>);

impl Seen {
    /// Whether `presented` is a current, unused token for this call; marks it used.
    pub(crate) fn verify(
        &self,
        secret: &[u8],
        presented: &str,
        method: &str,
        digest: &[u8; 32],
        now_seconds: u64,
    ) -> bool {
        let mut parts = presented.splitn(4, '.');
        let (Some("v2"), Some(seconds), Some(nonce), Some(tag)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        let Ok(seconds) = seconds.parse::<u64>() else { return false };
        if seconds.abs_diff(now_seconds) > SKEW_SECONDS || nonce.is_empty() || nonce.len() > 64 {
            return false;
        }
        let Ok(tag) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(tag) else { return false };
        let signed = mac(secret, seconds, nonce, method, digest).is_some_and(|m| m.verify_slice(&tag).is_ok());
        if !signed {
            return false;
        }
        let Ok(mut seen) = self.0.lock() else { return false };
        if seen.len() >= MAX_REMEMBERED {
            seen.retain(|_, until| *until >= now_seconds);
        }
        if seen.len() >= MAX_REMEMBERED || seen.contains_key(nonce) {
            return false;
        }
        seen.insert(nonce.to_owned(), seconds + SKEW_SECONDS);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn a_token_verifies_once_for_its_call_with_its_secret_and_near_its_time() {
        let d = digest(&["wk_1", "te_1", "1", "cancelled"]);
        let t = token(SECRET, 1_000, "DeliverCancel", &d);
        assert!(!Seen::default().verify(b"another secret of enough length!!", &t, "DeliverCancel", &d, 1_000));
        assert!(!Seen::default().verify(SECRET, &t, "DeliverInput", &d, 1_000), "another method");
        let other = digest(&["wk_1", "te_2", "1", "cancelled"]);
        assert!(!Seen::default().verify(SECRET, &t, "DeliverCancel", &other, 1_000), "another request");
        assert!(!Seen::default().verify(SECRET, &t, "DeliverCancel", &d, 1_061), "expired");
        let forged_time = t.replacen("v2.1000", "v2.1001", 1);
        assert!(!Seen::default().verify(SECRET, &forged_time, "DeliverCancel", &d, 1_000), "time is signed");

        let seen = Seen::default();
        assert!(seen.verify(SECRET, &t, "DeliverCancel", &d, 1_060));
        assert!(!seen.verify(SECRET, &t, "DeliverCancel", &d, 1_000), "used once");
        assert!(seen.verify(SECRET, &token(SECRET, 1_000, "DeliverCancel", &d), "DeliverCancel", &d, 1_000));
        for bad in ["Bearer wk_token", "", "v1.1000.AAAA", "v2.1000..AAAA"] {
            assert!(!seen.verify(SECRET, bad, "DeliverCancel", &d, 1_000), "{bad}");
        }
    }

    #[test]
    fn digests_tell_fields_apart() {
        assert_ne!(digest(&["ab", "c"]), digest(&["a", "bc"]));
        assert_ne!(digest(&["a\nb"]), digest(&["a", "b"]));
    }
}
