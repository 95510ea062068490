//! Standard Webhooks signing: `webhook-signature: v1,<base64 HMAC-SHA256>`
//! over `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the base64-decoded
//! part of the `whsec_` secret (keying with the text itself is the classic bug).
//! During a rotation the header carries one signature per live secret,
//! space-separated, as the spec allows; receivers accept any that verifies.

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = hmac::Hmac<Sha256>;

pub(crate) const SECRET_PREFIX: &str = "whsec_";
/// 256-bit secrets (the spec allows 24 to 64 bytes).
const SECRET_BYTES: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a webhook secret is `whsec_` followed by base64 of 24 to 64 bytes")]
pub(crate) struct BadSecret;

/// A fresh `whsec_…` secret.
pub(crate) fn generate_secret() -> String {
    let mut key = [0u8; SECRET_BYTES];
    crate::domain::id::fill_random(&mut key);
    format!("{SECRET_PREFIX}{}", base64::engine::general_purpose::STANDARD.encode(key))
}

/// The HMAC key of a `whsec_…` secret.
pub(crate) fn key_of(secret: &str) -> Result<Vec<u8>, BadSecret> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).ok_or(BadSecret)?;
    let key = base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|_| BadSecret)?;
    if (24..=64).contains(&key.len()) { Ok(key) } else { Err(BadSecret) }
}

/// One `v1,<base64>` signature of a message.
pub(crate) fn signature(key: &[u8], message_id: &str, timestamp: i64, body: &[u8]) -> String {
    // Keys are 24 to 64 bytes and HMAC takes any length: this cannot fail.
    let Ok(mut mac) = HmacSha256::new_from_slice(key) else { return String::new() };
    mac.update(message_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` header value: one signature per key, newest first.
pub(crate) fn header(keys: &[Vec<u8>], message_id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter().map(|k| signature(k, message_id, timestamp, body)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The official libraries' known answer ("sign function works").
    #[test]
    fn the_spec_vector_is_reproduced() {
        let key = key_of("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("key");
        let sig = signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn generated_secrets_round_trip_and_rotation_signs_twice() {
        let (a, b) = (generate_secret(), generate_secret());
        assert_ne!(a, b);
        let (ka, kb) = (key_of(&a).expect("a"), key_of(&b).expect("b"));
        assert_eq!(ka.len(), 32);
        let both = header(&[kb.clone(), ka.clone()], "msg_1", 7, b"{}");
        let parts: Vec<&str> = both.split(' ').collect();
        assert_eq!(parts, [signature(&kb, "msg_1", 7, b"{}"), signature(&ka, "msg_1", 7, b"{}")]);
    }

    #[test]
    fn malformed_secrets_are_refused() {
        for bad in ["", "whsec_", "whsec_!!", "sk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_AAAA"] {
            assert_eq!(key_of(bad), Err(BadSecret), "{bad}");
        }
    }
}
