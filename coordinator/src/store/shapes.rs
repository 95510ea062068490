//! The shapes of the batched reads' statements. A batch's rows are padded to
//! one of a few sizes, so that a handful of prepared statements serve every
//! batch: Postgres plans each once per connection and reuses the plan.
//! Planning is what a statement over the history's day partitions costs most
//! (about 1 ms for a read by id over ten days, where running the cached plan
//! takes 0.1 ms), so a statement written anew for every batch size would pay
//! it on every call. Bigger batches are cut into several statements of the
//! largest size, which bounds the plans a connection keeps (about 0.3 MB for
//! the largest).

/// The most rows one statement carries.
pub(super) const MAX_ROWS: usize = 64;

/// The rows a statement for a batch of `n` is written for: the smallest of
/// 1, 4, 16 and 64 that holds it. `n` is at most [`MAX_ROWS`].
pub(super) fn padded(n: usize) -> usize {
    let mut size = 1;
    while size < n && size < MAX_ROWS {
        size *= 4;
    }
    size
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_few_and_hold_the_batch() {
        let sizes: std::collections::BTreeSet<usize> = (1..=MAX_ROWS).map(padded).collect();
        assert_eq!(sizes.into_iter().collect::<Vec<_>>(), vec![1, 4, 16, 64]);
        for n in 1..=MAX_ROWS {
            assert!(padded(n) >= n, "{n}");
        }
    }
}
