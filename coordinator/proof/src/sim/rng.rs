//! The simulation's one source of choices: splitmix64 from the seed, so a seed
//! names a run exactly.

#[derive(Clone, Debug)]
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5EED_BA70_0000_0000)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub(super) fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next_u64() % n as u64) as usize }
    }

    /// True with probability `percent` in 100.
    pub(super) fn chance(&mut self, percent: u32) -> bool {
        self.next_u64() % 100 < u64::from(percent)
    }

    /// One of `items`, each as likely as its weight; None when all weigh 0.
    pub(super) fn weighted<T: Copy>(&mut self, items: &[(T, u32)]) -> Option<T> {
        let total: u64 = items.iter().map(|(_, w)| u64::from(*w)).sum();
        if total == 0 {
            return None;
        }
        let mut pick = self.next_u64() % total;
        for (item, weight) in items {
            if pick < u64::from(*weight) {
                return Some(*item);
            }
            pick -= u64::from(*weight);
        }
        None
    }
}
