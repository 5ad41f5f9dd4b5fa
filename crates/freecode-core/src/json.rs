//! JSON as the original writes it: JavaScript's `JSON.stringify` escapes a lone UTF-16
//! surrogate as `"\ud83d"` (a string cut inside an emoji, as its read tool does), which is
//! valid JSON but no Rust `String`. [`from_slice_lossy`] reads such text with each lone
//! surrogate as U+FFFD, as `String.prototype.toWellFormed` would, and says how many it
//! replaced; the bytes on disk are left as they are. Text without one costs nothing extra: the
//! repair runs only after serde_json has refused the text.

use serde::de::DeserializeOwned;

/// A value read by [`from_slice_lossy`], with the number of lone surrogates it replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lossy<T> {
    /// The value.
    pub value: T,
    /// Lone UTF-16 surrogates read as U+FFFD (0 for well-formed text).
    pub replaced: usize,
}

/// Parses `bytes` as serde_json does; when that fails and the text holds lone surrogate
/// escapes, parses it again with each read as U+FFFD. The error is serde_json's first one.
pub fn from_slice_lossy<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<Lossy<T>> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(Lossy { value, replaced: 0 }),
        Err(first) => match replace_lone_surrogates(bytes) {
            Some((fixed, replaced)) => serde_json::from_slice(&fixed)
                .map(|value| Lossy { value, replaced })
                .map_err(|_| first),
            None => Err(first),
        },
    }
}

fn hex4(b: &[u8]) -> Option<u16> {
    let s = std::str::from_utf8(b.get(..4)?).ok()?;
    u16::from_str_radix(s, 16).ok()
}

/// `bytes` with every `\uXXXX` escape of a lone surrogate (a high one not followed by a low
/// one, or a low one alone) rewritten as `\uFFFD`, and the count; `None` when there is none.
/// The rewrite keeps the length, so offsets into the line stay true.
pub fn replace_lone_surrogates(bytes: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut out: Option<Vec<u8>> = None;
    let mut count = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        if bytes.get(i + 1) != Some(&b'u') {
            // Any other escape: skip it whole (`\\` must not start a new one).
            i += 2;
            continue;
        }
        let Some(unit) = bytes.get(i + 2..).and_then(hex4) else {
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => {
                let pair = bytes.get(i + 6..i + 8) == Some(b"\\u")
                    && bytes
                        .get(i + 8..)
                        .and_then(hex4)
                        .is_some_and(|low| (0xDC00..=0xDFFF).contains(&low));
                if pair {
                    i += 12;
                    continue;
                }
                true
            }
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let buf = out.get_or_insert_with(|| bytes.to_vec());
            buf[i + 2..i + 6].copy_from_slice(b"FFFD");
            count += 1;
        }
        i += 6;
    }
    out.map(|b| (b, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(s: &str) -> serde_json::Result<Lossy<String>> {
        from_slice_lossy(s.as_bytes())
    }

    #[test]
    fn lone_surrogates_read_as_replacement_characters() {
        assert_eq!(
            read(r#""cut \ud83d""#).unwrap(),
            Lossy {
                value: "cut \u{FFFD}".to_owned(),
                replaced: 1
            }
        );
        assert_eq!(read(r#""\ude00x""#).unwrap().value, "\u{FFFD}x");
        assert_eq!(read(r#""\ud83d\ud83d""#).unwrap().value, "\u{FFFD}\u{FFFD}");
        assert_eq!(read(r#""\ud83da""#).unwrap().value, "\u{FFFD}a");
        // A pair is one character, untouched; an escaped backslash starts no escape.
        assert_eq!(
            read(r#""\ud83d\ude00 \\ud83d""#).unwrap(),
            Lossy {
                value: "😀 \\ud83d".to_owned(),
                replaced: 0
            }
        );
        // Inside objects and keys, as the original's records hold them.
        let v: Lossy<serde_json::Value> =
            from_slice_lossy(br#"{"parts":[{"type":"text","text":"ab\ud83d"}],"\udc00":1}"#)
                .unwrap();
        assert_eq!(v.replaced, 2);
        assert_eq!(v.value["parts"][0]["text"], "ab\u{FFFD}");
    }

    #[test]
    fn other_errors_stay_errors() {
        let e = read(r#""\ud83d"#).unwrap_err();
        assert!(e.is_eof(), "{e}");
        assert!(read("{").is_err());
        assert!(read(r#""\uZZZZ""#).is_err());
        assert_eq!(replace_lone_surrogates(b"plain \\n text"), None);
    }

    proptest! {
        /// Whatever the text, the repair never panics and keeps the length; a well-formed
        /// string reads as itself.
        #[test]
        fn repair_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..64), s in "\\PC*") {
            if let Some((fixed, n)) = replace_lone_surrogates(&bytes) {
                prop_assert_eq!(fixed.len(), bytes.len());
                prop_assert!(n > 0);
            }
            let json = serde_json::to_string(&s).unwrap();
            prop_assert_eq!(read(&json).unwrap(), Lossy { value: s, replaced: 0 });
        }
    }
}
