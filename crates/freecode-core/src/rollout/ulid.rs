//! Event ids: standard 26-character ULIDs (48-bit millisecond time, 80 random bits, Crockford
//! base32), monotonic within a millisecond: a second id in the same millisecond is the previous
//! one plus one, so ids sort in write order. Readers accept any string, including the original's
//! 20-character ids.
//!
//! Pure: the caller supplies the clock and the random bits.

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const RANDOM_MASK: u128 = (1 << 80) - 1;

/// Generates monotonic ULIDs.
#[derive(Debug, Default, Clone)]
pub struct UlidGenerator {
    last_ms: u64,
    last_random: u128,
}

impl UlidGenerator {
    /// The next id at `now_ms`; `random` is asked for fresh bits only when the millisecond moved.
    pub fn next(&mut self, now_ms: u64, random: impl FnOnce() -> u128) -> String {
        let ms = now_ms.max(self.last_ms);
        if ms == self.last_ms && self.last_ms != 0 {
            self.last_random = (self.last_random + 1) & RANDOM_MASK;
            // 2^80 ids in one millisecond wrap the counter; borrow the next millisecond.
            if self.last_random == 0 {
                self.last_ms += 1;
            }
        } else {
            self.last_ms = ms;
            self.last_random = random() & RANDOM_MASK;
        }
        encode(self.last_ms, self.last_random)
    }
}

impl UlidGenerator {
    /// A generator whose ids sort after `last_id` (a 26-character ULID; anything else is
    /// ignored), so a reopened log keeps increasing ids.
    pub fn after(last_id: &str) -> Self {
        match decode(last_id) {
            Some((ms, random)) => Self {
                last_ms: ms,
                last_random: random,
            },
            None => Self::default(),
        }
    }
}

/// Decodes a 26-character ULID into its time and random parts.
pub fn decode(id: &str) -> Option<(u64, u128)> {
    if id.len() != 26 {
        return None;
    }
    let mut value: u128 = 0;
    for b in id.bytes() {
        let d = ALPHABET.iter().position(|&c| c == b.to_ascii_uppercase())?;
        value = value.checked_mul(32)?.checked_add(d as u128)?;
    }
    Some(((value >> 80) as u64, value & RANDOM_MASK))
}

/// Encodes time and randomness as 26 Crockford base32 characters.
pub fn encode(ms: u64, random: u128) -> String {
    let value: u128 = (u128::from(ms & ((1 << 48) - 1)) << 80) | (random & RANDOM_MASK);
    let mut out = [0u8; 26];
    for (i, c) in out.iter_mut().enumerate() {
        let shift = 5 * (25 - i);
        *c = ALPHABET[((value >> shift) & 31) as usize];
    }
    out.iter().map(|&b| b as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_within_a_millisecond_and_across() {
        let mut g = UlidGenerator::default();
        let a = g.next(1_768_467_604_000, || 5);
        let b = g.next(1_768_467_604_000, || 0);
        let c = g.next(1_768_467_603_000, || 0); // clock stepped back: still increasing
        let d = g.next(1_768_467_605_000, || 1);
        assert_eq!(a.len(), 26);
        assert!(a < b && b < c && c < d, "{a} {b} {c} {d}");
        assert!(a.starts_with("01KF0E48H0"), "{a}"); // the original's time prefix for that ms
        let mut resumed = UlidGenerator::after(&d);
        assert!(resumed.next(1_768_467_605_000, || 0) > d);
        assert_eq!(decode(&d), Some((1_768_467_605_000, 1)));
        assert_eq!(decode("01KF0E48H0TXVY2GSD2F"), None); // the original's 20-character ids
    }
}
