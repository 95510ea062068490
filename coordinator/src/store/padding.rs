//! Batched statements padded to a few sizes, so that each size's text is kept
//! prepared and planned once per connection, and is built once per process.

use super::KEPT_UP_TO;
use sqlx::AssertSqlSafe;
use std::borrow::Cow;
use std::sync::OnceLock;

/// How many rows a batched statement is padded to: its own count up to
/// [`KEPT_UP_TO`], then the next power of two up to [`PADDED_UP_TO`]. The
/// statement's text then takes a handful of shapes, each kept prepared and, on
/// the hot pool, planned once per connection; unpadded, every batch size was a
/// new statement that Postgres planned from scratch on each call (about 3 ms
/// for a settlement of ten rows, 1 ms for ten owner reads).
pub(super) fn padded(n: usize) -> usize {
    if n <= KEPT_UP_TO || n > PADDED_UP_TO { n } else { n.next_power_of_two() }
}

/// Larger batches (a sweep's, a big worker's heartbeat) are rare and sent as
/// they are: padded, they could pass Postgres' 65,535 parameters.
pub(super) const PADDED_UP_TO: usize = 256;

const _: () = assert!(KEPT_UP_TO.is_power_of_two() && PADDED_UP_TO.is_power_of_two());

/// How many sizes [`padded`] answers: 1 to [`KEPT_UP_TO`], then each power of
/// two up to [`PADDED_UP_TO`].
const SIZES: usize = KEPT_UP_TO + (PADDED_UP_TO.trailing_zeros() - KEPT_UP_TO.trailing_zeros()) as usize;

/// Which of the [`SIZES`] `n` is, if it is one.
fn size_index(n: usize) -> Option<usize> {
    match n {
        0 => None,
        n if n <= KEPT_UP_TO => Some(n - 1),
        n if n.is_power_of_two() && n <= PADDED_UP_TO => {
            Some(KEPT_UP_TO + (n.trailing_zeros() - KEPT_UP_TO.trailing_zeros()) as usize - 1)
        }
        _ => None,
    }
}

/// A batched statement's text for each padded size, built on first use and
/// kept for the process's life (sqlx then takes it without a copy).
pub(super) struct PaddedTexts([OnceLock<String>; SIZES]);

impl PaddedTexts {
    pub(super) const fn new() -> Self {
        PaddedTexts([const { OnceLock::new() }; SIZES])
    }

    /// The text for `n` rows, `build` making it the first time; a size
    /// [`padded`] never answers is built each time.
    pub(super) fn get(
        &'static self,
        n: usize,
        build: impl FnOnce(usize) -> String,
    ) -> AssertSqlSafe<Cow<'static, str>> {
        AssertSqlSafe(match size_index(n).and_then(|i| self.0.get(i)) {
            Some(text) => Cow::Borrowed(text.get_or_init(|| build(n)).as_str()),
            None => Cow::Owned(build(n)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_padded_size_has_a_kept_text_of_its_own() {
        let sizes: Vec<usize> = (1..=PADDED_UP_TO).map(padded).collect();
        let mut indexes: Vec<usize> = sizes.iter().map(|&n| size_index(n).expect("a kept size")).collect();
        indexes.dedup();
        assert_eq!(indexes, (0..SIZES).collect::<Vec<_>>());
        assert_eq!(size_index(PADDED_UP_TO + 1), None);
        static TEXTS: PaddedTexts = PaddedTexts::new();
        let built = std::sync::atomic::AtomicUsize::new(0);
        let text = |n| {
            let AssertSqlSafe(text) = TEXTS.get(n, |n| {
                built.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                format!("{n} rows")
            });
            text
        };
        assert_eq!((text(8), text(8), text(3)), ("8 rows".into(), "8 rows".into(), "3 rows".into()));
        assert_eq!(built.load(std::sync::atomic::Ordering::Relaxed), 2, "each size is built once");
        assert!(matches!(text(300), Cow::Owned(_)));
    }
}
