//! What the two kinds of dashboard session share: their token prefixes, and
//! how often a session's use is written back.

/// A key's dashboard session (`dashboard.rs`).
pub(super) const KEY_SESSION: &str = "bds_";
/// A person's dashboard session (`people.rs`).
pub(super) const PERSON_SESSION: &str = "bdp_";
/// A session is written back at most this often: the idle clock needs minutes,
/// not every request, and no shorter than a quarter of the idle lifetime.
pub(super) const TOUCH_EVERY_MS: i64 = 60_000;
