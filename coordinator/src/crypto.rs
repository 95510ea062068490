//! Payload encryption under the key ring `security.execution_payload_keys`.
//! AES-256-GCM; the first key encrypts, every key decrypts, so keys rotate. The
//! associated data binds a ciphertext to its execution and field: a ciphertext
//! copied into another row or column fails to open.
//!
//! Sealed layout: `v1` byte, key-id length byte, key id, 12-byte nonce, ciphertext+tag.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine as _;

const VERSION: u8 = 1;
const NONCE_LEN: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("payload key {id:?} is not valid base64 of 32 bytes")]
    BadKey { id: String },
    #[error("payload key ring is empty")]
    EmptyRing,
    #[error("payload key id {id:?} is empty or longer than 255 bytes")]
    BadKeyId { id: String },
    #[error("payload key id {id:?} appears twice in the ring")]
    DuplicateKeyId { id: String },
    #[error("stored payload was sealed with key id {id:?}, which is not in security.execution_payload_keys")]
    UnknownKeyId { id: String },
    #[error("stored payload is malformed")]
    Malformed,
    #[error("stored payload failed authentication (wrong key, or not sealed for this execution and field)")]
    Authentication,
    #[error("encryption failed")]
    Seal,
}

/// The payload fields that are stored encrypted; part of the associated data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    Input,
    Output,
    ErrorDetail,
    InputRequest,
    InputResponse,
    /// A webhook endpoint's `whsec_` secret (the id bound is the endpoint's).
    WebhookSecret,
}

impl Field {
    fn as_str(self) -> &'static str {
        match self {
            Field::Input => "input",
            Field::Output => "output",
            Field::ErrorDetail => "error_detail",
            Field::InputRequest => "input_request",
            Field::InputResponse => "input_response",
            Field::WebhookSecret => "webhook_secret",
        }
    }
}

struct RingKey {
    id: String,
    cipher: Aes256Gcm,
}

pub struct KeyRing {
    keys: Vec<RingKey>,
}

impl std::fmt::Debug for KeyRing {
    // Never print key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id.as_str()).collect();
        f.debug_struct("KeyRing").field("ids", &ids).finish()
    }
}

impl KeyRing {
    /// Builds the ring from `(id, base64 key)` pairs, first = the encrypting key.
    pub fn from_base64<'a>(keys: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self, Error> {
        let mut ring = Vec::new();
        for (id, b64) in keys {
            if id.is_empty() || id.len() > 255 {
                return Err(Error::BadKeyId { id: id.to_owned() });
            }
            if ring.iter().any(|k: &RingKey| k.id == id) {
                return Err(Error::DuplicateKeyId { id: id.to_owned() });
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|_| Error::BadKey { id: id.to_owned() })?;
            if bytes.len() != 32 {
                return Err(Error::BadKey { id: id.to_owned() });
            }
            let cipher = Aes256Gcm::new_from_slice(&bytes).map_err(|_| Error::BadKey { id: id.to_owned() })?;
            ring.push(RingKey { id: id.to_owned(), cipher });
        }
        if ring.is_empty() {
            return Err(Error::EmptyRing);
        }
        Ok(KeyRing { keys: ring })
    }

    /// A fresh random key, base64-encoded (for `baton dev` and `baton admin`).
    pub fn generate_key_base64() -> String {
        let mut key = [0u8; 32];
        crate::domain::id::fill_random(&mut key);
        base64::engine::general_purpose::STANDARD.encode(key)
    }

    fn aad(execution_id: &str, field: Field) -> Vec<u8> {
        format!("baton/v1/{execution_id}/{}", field.as_str()).into_bytes()
    }

    pub(crate) fn seal(&self, execution_id: &str, field: Field, plaintext: &[u8]) -> Result<Vec<u8>, Error> {
        let key = self.keys.first().ok_or(Error::EmptyRing)?;
        let mut nonce = [0u8; NONCE_LEN];
        crate::domain::id::fill_random(&mut nonce);
        let aad = Self::aad(execution_id, field);
        let nonce_arr = Nonce::try_from(&nonce[..]).map_err(|_| Error::Seal)?;
        let ct = key.cipher.encrypt(&nonce_arr, Payload { msg: plaintext, aad: &aad }).map_err(|_| Error::Seal)?;
        let mut out = Vec::with_capacity(2 + key.id.len() + NONCE_LEN + ct.len());
        out.push(VERSION);
        out.push(key.id.len() as u8);
        out.extend_from_slice(key.id.as_bytes());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        Ok(out)
    }

    pub(crate) fn open(&self, execution_id: &str, field: Field, sealed: &[u8]) -> Result<Vec<u8>, Error> {
        let [version, id_len, rest @ ..] = sealed else {
            return Err(Error::Malformed);
        };
        if *version != VERSION || rest.len() < usize::from(*id_len) + NONCE_LEN {
            return Err(Error::Malformed);
        }
        let (id, rest) = rest.split_at(usize::from(*id_len));
        let (nonce, ct) = rest.split_at(NONCE_LEN);
        let id = std::str::from_utf8(id).map_err(|_| Error::Malformed)?;
        let key = self.keys.iter().find(|k| k.id == id).ok_or_else(|| Error::UnknownKeyId { id: id.to_owned() })?;
        let aad = Self::aad(execution_id, field);
        let nonce = Nonce::try_from(nonce).map_err(|_| Error::Malformed)?;
        key.cipher.decrypt(&nonce, Payload { msg: ct, aad: &aad }).map_err(|_| Error::Authentication)
    }

    /// The id of the key that seals (the ring's first).
    pub fn sealing_key_id(&self) -> &str {
        self.keys.first().map_or("", |k| k.id.as_str())
    }

    /// Whether the ring holds a key of this id (so values sealed by it open).
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.keys.iter().any(|k| k.id == id)
    }

    /// Opens `sealed` and seals its plaintext again under the sealing key, for
    /// the same execution and field; the plaintext never leaves this call.
    pub(crate) fn reseal(&self, execution_id: &str, field: Field, sealed: &[u8]) -> Result<Vec<u8>, Error> {
        let plaintext = self.open(execution_id, field, sealed)?;
        self.seal(execution_id, field, &plaintext)
    }

    /// The key id of a sealed payload, for diagnostics and rotation reports.
    pub(crate) fn key_id_of(sealed: &[u8]) -> Option<&str> {
        let [VERSION, id_len, rest @ ..] = sealed else { return None };
        rest.get(..usize::from(*id_len)).and_then(|id| std::str::from_utf8(id).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(ids: &[&str]) -> (KeyRing, Vec<(String, String)>) {
        let pairs: Vec<(String, String)> =
            ids.iter().map(|id| (id.to_string(), KeyRing::generate_key_base64())).collect();
        let ring = KeyRing::from_base64(pairs.iter().map(|(a, b)| (a.as_str(), b.as_str()))).expect("ring");
        (ring, pairs)
    }

    #[test]
    fn seal_open_round_trip_hides_the_plaintext() {
        let (r, _) = ring(&["k1"]);
        let sealed = r.seal("te_a", Field::Input, b"canary-secret").expect("seal");
        assert!(!sealed.windows(13).any(|w| w == b"canary-secret"));
        assert_eq!(r.open("te_a", Field::Input, &sealed).expect("open"), b"canary-secret");
    }

    #[test]
    fn rotation_new_key_encrypts_old_key_still_decrypts() {
        let (old, pairs) = ring(&["old"]);
        let sealed_old = old.seal("te_a", Field::Output, b"x").expect("seal");
        let new_key = KeyRing::generate_key_base64();
        let rotated = KeyRing::from_base64([("new", new_key.as_str()), (pairs[0].0.as_str(), pairs[0].1.as_str())])
            .expect("ring");
        assert_eq!(rotated.open("te_a", Field::Output, &sealed_old).expect("open"), b"x");
        let sealed_new = rotated.seal("te_a", Field::Output, b"y").expect("seal");
        assert_eq!(KeyRing::key_id_of(&sealed_new), Some("new"));
        let err = old.open("te_a", Field::Output, &sealed_new).expect_err("old ring lacks the new key");
        assert!(err.to_string().contains("\"new\""), "{err}");
    }

    #[test]
    fn a_ciphertext_moved_to_another_row_or_field_fails() {
        let (r, _) = ring(&["k"]);
        let sealed = r.seal("te_a", Field::Input, b"x").expect("seal");
        assert!(matches!(r.open("te_b", Field::Input, &sealed), Err(Error::Authentication)));
        assert!(matches!(r.open("te_a", Field::Output, &sealed), Err(Error::Authentication)));
    }

    #[test]
    fn bad_rings_are_rejected_with_the_key_id() {
        assert!(matches!(KeyRing::from_base64([]), Err(Error::EmptyRing)));
        let err = KeyRing::from_base64([("short", "AAAA")]).expect_err("short key");
        assert!(err.to_string().contains("short"));
        let k = KeyRing::generate_key_base64();
        assert!(matches!(
            KeyRing::from_base64([("a", k.as_str()), ("a", k.as_str())]),
            Err(Error::DuplicateKeyId { .. })
        ));
    }

    #[test]
    fn truncated_payloads_are_malformed_not_panics() {
        let (r, _) = ring(&["k"]);
        for bad in [&[][..], &[1], &[1, 5, b'a'], &[9, 0, 0]] {
            assert!(r.open("te_a", Field::Input, bad).is_err());
        }
    }
}
