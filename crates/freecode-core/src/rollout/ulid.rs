//! Event ids: standard 26-character ULIDs (48-bit millisecond time, 80 random bits, Crockford
//! base32), monotonic within a millisecond: a second id in the same millisecond is the previous
//! one plus one, so ids sort in write order. Readers accept any string, including the original's
//! 20-character ids.
//!
//! Ids never go backwards: a clock past the 48-bit time range counts as its last millisecond,
//! and once the largest id (`7ZZZZZZZZZZZZZZZZZZZZZZZZZ`) has been given out there is no next
//! one — [`UlidGenerator::next`] refuses with [`UlidExhausted`] instead of wrapping to `000…`.
//!
//! Pure: the caller supplies the clock and the random bits.

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const RANDOM_MASK: u128 = (1 << 80) - 1;
/// The last millisecond a ULID can hold (48 bits).
pub const MAX_MS: u64 = (1 << 48) - 1;
/// The largest ULID.
pub const MAX_ULID: &str = "7ZZZZZZZZZZZZZZZZZZZZZZZZZ";

/// No id sorts after the last one given out: the ULID space is used up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no event id sorts after {last}: it is the largest ULID")]
pub struct UlidExhausted {
    /// The last id given out.
    pub last: String,
}

/// Generates monotonic ULIDs.
#[derive(Debug, Default, Clone)]
pub struct UlidGenerator {
    last_ms: u64,
    last_random: u128,
}

impl UlidGenerator {
    /// The next id at `now_ms`; `random` is asked for fresh bits only when the millisecond moved.
    /// Fails, changing nothing, when the last id was the largest ULID.
    pub fn next(
        &mut self,
        now_ms: u64,
        random: impl FnOnce() -> u128,
    ) -> Result<String, UlidExhausted> {
        let ms = now_ms.min(MAX_MS).max(self.last_ms);
        if ms == self.last_ms && self.last_ms != 0 {
            if self.last_random < RANDOM_MASK {
                self.last_random += 1;
            } else if self.last_ms < MAX_MS {
                // 2^80 ids in one millisecond use up its counter; borrow the next millisecond.
                self.last_ms += 1;
                self.last_random = 0;
            } else {
                return Err(UlidExhausted {
                    last: encode(self.last_ms, self.last_random),
                });
            }
        } else {
            self.last_ms = ms;
            self.last_random = random() & RANDOM_MASK;
        }
        Ok(encode(self.last_ms, self.last_random))
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
    // The alphabet is ASCII, so this never falls back to the empty string.
    std::str::from_utf8(&out)
        .map(str::to_owned)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_within_a_millisecond_and_across() {
        let mut g = UlidGenerator::default();
        let a = g.next(1_768_467_604_000, || 5).unwrap();
        let b = g.next(1_768_467_604_000, || 0).unwrap();
        let c = g.next(1_768_467_603_000, || 0).unwrap(); // clock stepped back: still increasing
        let d = g.next(1_768_467_605_000, || 1).unwrap();
        assert_eq!(a.len(), 26);
        assert!(a < b && b < c && c < d, "{a} {b} {c} {d}");
        assert!(a.starts_with("01KF0E48H0"), "{a}"); // the original's time prefix for that ms
        let mut resumed = UlidGenerator::after(&d);
        assert!(resumed.next(1_768_467_605_000, || 0).unwrap() > d);
        assert_eq!(decode(&d), Some((1_768_467_605_000, 1)));
        assert_eq!(decode("01KF0E48H0TXVY2GSD2F"), None); // the original's 20-character ids
    }

    #[test]
    fn the_largest_id_has_no_successor_and_nothing_wraps() {
        assert_eq!(encode(MAX_MS, RANDOM_MASK), MAX_ULID);
        assert_eq!(decode(MAX_ULID), Some((MAX_MS, RANDOM_MASK)));
        // After the largest id: refused, at any clock, and the generator stays put.
        let mut g = UlidGenerator::after(MAX_ULID);
        for now in [0, 1_768_467_604_000, MAX_MS, u64::MAX] {
            assert_eq!(
                g.next(now, || 0),
                Err(UlidExhausted {
                    last: MAX_ULID.to_owned()
                })
            );
        }
        // The last millisecond's counter runs out into the largest id, then stops.
        let before = encode(MAX_MS, RANDOM_MASK - 1);
        let mut g = UlidGenerator::after(&before);
        let last = g.next(0, || 0).unwrap();
        assert_eq!(last, MAX_ULID);
        assert!(last > before);
        assert!(g.next(0, || 0).is_err());
        // A full counter in an earlier millisecond borrows the next one.
        let full = encode(1_000, RANDOM_MASK);
        let next = UlidGenerator::after(&full).next(1_000, || 0).unwrap();
        assert!(next > full, "{next} after {full}");
        assert_eq!(decode(&next), Some((1_001, 0)));
        // A clock past the 48-bit range counts as its last millisecond: no wrap to 000….
        let mut g = UlidGenerator::after(&encode(MAX_MS - 1, 0));
        let far = g.next(u64::MAX, || 7).unwrap();
        assert_eq!(decode(&far), Some((MAX_MS, 7)));
    }
}
