//! The cluster credential coordinators present to each other's `Peer` service:
//! `v1.<unix seconds>.<base64 HMAC-SHA256(secret, "baton-peer.v1.<seconds>")>`
//! in the `x-baton-peer` metadata. The secret itself never crosses the wire, a
//! token is good for a minute either side of its time, and it is checked in
//! constant time. Worker and gateway bearer tokens can never pass it.

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use sha2::Sha256;

pub const METADATA_KEY: &str = "x-baton-peer";

/// How far a token's time may be from the verifier's clock.
const SKEW_SECONDS: u64 = 60;

type HmacSha256 = hmac::Hmac<Sha256>;

fn mac(secret: &[u8], seconds: u64) -> Option<HmacSha256> {
    let mut mac = HmacSha256::new_from_slice(secret).ok()?;
    mac.update(format!("baton-peer.v1.{seconds}").as_bytes());
    Some(mac)
}

pub fn unix_seconds() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A token for `secret` at `seconds`.
pub fn token(secret: &[u8], seconds: u64) -> String {
    let tag = mac(secret, seconds).map(|m| m.finalize().into_bytes().to_vec()).unwrap_or_default();
    format!("v1.{seconds}.{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(tag))
}

/// Whether `presented` is a current token for `secret`.
pub fn verify(secret: &[u8], presented: &str, now_seconds: u64) -> bool {
    let mut parts = presented.splitn(3, '.');
    let (Some("v1"), Some(seconds), Some(tag)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Ok(seconds) = seconds.parse::<u64>() else { return false };
    if seconds.abs_diff(now_seconds) > SKEW_SECONDS {
        return false;
    }
    let Ok(tag) = base64::engine::general_purpose::STANDARD_NO_PAD.decode(tag) else { return false };
    mac(secret, seconds).is_some_and(|m| m.verify_slice(&tag).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_verifies_only_with_its_secret_and_near_its_time() {
        let secret = b"0123456789abcdef0123456789abcdef";
        let t = token(secret, 1_000);
        assert!(verify(secret, &t, 1_000));
        assert!(verify(secret, &t, 1_060));
        assert!(!verify(secret, &t, 1_061), "expired");
        assert!(!verify(b"another secret of enough length!!", &t, 1_000), "wrong secret");
        assert!(!verify(secret, &t.replace("v1.1000", "v1.1001"), 1_000), "time is signed");
        assert!(!verify(secret, "Bearer wk_token", 1_000));
        assert!(!verify(secret, "", 1_000));
    }
}
