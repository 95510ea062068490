//! Opaque identifiers. An execution id is `te_` followed by 27 base62 digits of a
//! fresh 160-bit random value: unguessable, and never derived from remote ids or URLs.

use std::fmt;

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Encodes `bytes` as a fixed-width base62 number of `width` digits.
fn base62(bytes: &[u8], width: usize) -> String {
    let mut digits = vec![0u8; width];
    let mut n = bytes.to_vec();
    for slot in digits.iter_mut().rev() {
        let mut rem: u32 = 0;
        for b in n.iter_mut() {
            let acc = (rem << 8) | u32::from(*b);
            *b = (acc / 62) as u8;
            rem = acc % 62;
        }
        *slot = BASE62[rem as usize];
    }
    String::from_utf8(digits).unwrap_or_default()
}

/// A random id with `prefix`, carrying `bits` bits of entropy (a multiple of 8).
pub fn random_id(prefix: &str, bits: usize) -> String {
    let mut bytes = vec![0u8; bits / 8];
    if !simulated::fill(&mut bytes) {
        fill_random(&mut bytes);
    }
    let width = ((bits as f64) / 62f64.log2()).ceil() as usize;
    format!("{prefix}{}", base62(&bytes, width))
}

/// Fills `buf` from the operating system's RNG.
pub fn fill_random(buf: &mut [u8]) {
    // Without an OS RNG no id, token or nonce can be made safely; getrandom
    // documents this as practically impossible on Linux after boot.
    #[allow(clippy::expect_used)]
    getrandom::fill(buf).expect("operating system random number generator unavailable");
}

/// Ids drawn from a seed instead of the operating system, on one thread: the
/// deterministic simulation (`baton-proof`) replays a seed only if the ids it
/// makes, and so the order of rows sorted by id, are the same each time.
/// Only ids: tokens, keys and nonces always come from the operating system.
/// Nothing in a Baton process seeds it.
pub mod simulated {
    use std::cell::Cell;

    thread_local! {
        static STATE: Cell<Option<u64>> = const { Cell::new(None) };
    }

    /// Draws this thread's ids from `seed` from now on.
    pub fn seed(seed: u64) {
        STATE.with(|s| s.set(Some(seed)));
    }

    /// Back to the operating system's randomness.
    pub fn stop() {
        STATE.with(|s| s.set(None));
    }

    /// Fills `buf` from the seed (splitmix64); false when no seed is set.
    pub(super) fn fill(buf: &mut [u8]) -> bool {
        STATE.with(|s| {
            let Some(mut state) = s.get() else { return false };
            for chunk in buf.chunks_mut(8) {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
            }
            s.set(Some(state));
            true
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExecutionId(String);

impl ExecutionId {
    pub const PREFIX: &'static str = "te_";
    /// The base62 digits of 160 bits. Callers check the shape with
    /// `baton_proto::names::is_execution_id`; a coordinator test holds the two
    /// to the same shape.
    pub const DIGITS: usize = 27;

    pub fn generate() -> Self {
        Self(random_id(Self::PREFIX, 160))
    }

    /// An id of the documented shape, or none: what a caller or a stored row
    /// names is checked here once, and is typed from then on.
    pub fn parse(s: &str) -> Option<Self> {
        let digits = s.strip_prefix(Self::PREFIX)?;
        (digits.len() == Self::DIGITS && digits.bytes().all(|b| b.is_ascii_alphanumeric())).then(|| Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl AsRef<str> for ExecutionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Hashes as its text, so a map keyed by ids is looked up by a `&str`.
impl std::borrow::Borrow<str> for ExecutionId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for ExecutionId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ExecutionId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One attempt of one execution: what a lease, a worker's message and a
/// settlement name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttemptRef {
    pub execution_id: ExecutionId,
    pub attempt: u32,
}

impl AttemptRef {
    pub fn new(execution_id: &ExecutionId, attempt: u32) -> Self {
        AttemptRef { execution_id: execution_id.clone(), attempt }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execution_ids_have_the_documented_shape_and_differ() {
        let a = ExecutionId::generate();
        let b = ExecutionId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), ExecutionId::PREFIX.len() + ExecutionId::DIGITS);
        assert!(a.as_str()[ExecutionId::PREFIX.len()..].bytes().all(|b| b.is_ascii_alphanumeric()));
    }

    #[test]
    fn only_the_documented_shape_parses() {
        let id = ExecutionId::generate();
        assert_eq!(ExecutionId::parse(id.as_str()), Some(id.clone()));
        let digits = &id.as_str()[ExecutionId::PREFIX.len()..];
        for bad in [
            String::new(),
            "te_".to_owned(),
            digits.to_owned(),
            format!("tx_{digits}"),
            format!("{id}0"),
            id.as_str()[..id.as_str().len() - 1].to_owned(),
            format!("te_{}%", &digits[1..]),
        ] {
            assert_eq!(ExecutionId::parse(&bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_seeded_thread_makes_the_same_ids_and_other_threads_do_not() {
        simulated::seed(7);
        let first = (random_id("x_", 96), ExecutionId::generate());
        simulated::seed(7);
        let second = (random_id("x_", 96), ExecutionId::generate());
        assert_eq!(first, second);
        let elsewhere = std::thread::spawn(|| random_id("x_", 96)).join().expect("thread");
        assert_ne!(elsewhere, first.0, "another thread draws from the operating system");
        simulated::stop();
        assert_ne!(random_id("x_", 96), first.0);
    }

    #[test]
    fn base62_is_fixed_width_and_covers_the_maximum() {
        assert_eq!(base62(&[0; 20], 27), "0".repeat(27));
        let max = base62(&[0xff; 20], 27);
        assert_eq!(max.len(), 27);
        assert_ne!(&max[..1], "0");
    }
}
