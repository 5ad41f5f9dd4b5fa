//! Compact JSON written by hand, byte for byte as `serde_json::to_writer` writes it, for the
//! lines written most: the rollout recorder's events ([`EventLine::write_to`]).
//!
//! Why not `serde_json` there: in a recording of 1,000,000 events its string escaper
//! (`format_escaped_str`, a table lookup per byte and a `write_all` per key and per value) was
//! a quarter of the whole run's time, more than the write syscalls. Here a string's plain bytes
//! are found eight and sixteen at a time (the scanner's [`find_special`]) and copied as one
//! run, keys and values go straight into the buffer, and integers through `itoa`, which is
//! what `serde_json` uses, so the bytes are the same: the escapes are `\"`, `\\`, `\b`, `\f`,
//! `\n`, `\r`, `\t` and `\u00xx` (lower-case hex) for the other control bytes, nothing else is
//! escaped (not `/`, not DEL, not non-ASCII), and a number inside a [`Value`] is written by
//! `serde_json` itself. `tests/line_writer.rs` holds it to `serde_json` on every event kind
//! with generated strings, values and unknown keys.
//!
//! [`EventLine::write_to`]: crate::rollout::event::EventLine::write_to

use serde_json::Value;

use crate::scan::{find_special, first_special_in, special};

/// What an event's members are written to: a `serde` map (its `Serialize`) or a [`Line`].
/// One list of members, two writers, so the two cannot disagree on what a line holds.
pub(crate) trait Members {
    type Error;
    /// Writes one member under a key of the format's.
    fn member<T: Put + serde::Serialize + ?Sized>(
        &mut self,
        key: Key,
        value: &T,
    ) -> Result<(), Self::Error>;
    /// Writes one member under any key (an unknown one kept from the line read).
    fn extra(&mut self, key: &str, value: &Value) -> Result<(), Self::Error>;
}

/// A member's key as the format spells it (plain ASCII, nothing to escape), with the bytes a
/// [`Line`] writes for it: `key!("seq")` is `seq` and `"seq":`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key {
    pub(crate) name: &'static str,
    pub(crate) quoted: &'static str,
}

/// The [`Key`] of a literal name.
macro_rules! key {
    ($name:literal) => {
        $crate::jsonw::Key {
            name: $name,
            quoted: concat!("\"", $name, "\":"),
        }
    };
}
pub(crate) use key;

/// [`Members`] through a `serde` map.
pub(crate) struct MapMembers<'m, M>(pub(crate) &'m mut M);

impl<M: serde::ser::SerializeMap> Members for MapMembers<'_, M> {
    type Error = M::Error;
    fn member<T: Put + serde::Serialize + ?Sized>(
        &mut self,
        key: Key,
        value: &T,
    ) -> Result<(), M::Error> {
        self.0.serialize_entry(key.name, value)
    }
    fn extra(&mut self, key: &str, value: &Value) -> Result<(), M::Error> {
        self.0.serialize_entry(key, value)
    }
}

/// A compact JSON object being written into a buffer: `{` on creation, `}` at [`Line::end`].
pub(crate) struct Line<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Line<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, first: true }
    }

    pub(crate) fn end(self) {
        self.out.push(b'}');
    }
}

impl Members for Line<'_> {
    type Error = serde_json::Error;
    fn member<T: Put + serde::Serialize + ?Sized>(
        &mut self,
        key: Key,
        value: &T,
    ) -> serde_json::Result<()> {
        debug_assert_eq!(
            first_special(key.name.as_bytes()),
            key.name.len(),
            "{key:?}"
        );
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.extend_from_slice(key.quoted.as_bytes());
        value.put(self.out)
    }
    fn extra(&mut self, key: &str, value: &Value) -> serde_json::Result<()> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        push_str(self.out, key);
        self.out.push(b':');
        push_value(self.out, value)
    }
}

/// A value [`Line`] writes itself, as `serde_json` would.
pub(crate) trait Put {
    fn put(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
}

impl Put for str {
    fn put(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        push_str(out, self);
        Ok(())
    }
}

impl Put for String {
    fn put(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        push_str(out, self);
        Ok(())
    }
}

impl Put for u64 {
    fn put(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(itoa::Buffer::new().format(*self).as_bytes());
        Ok(())
    }
}

impl Put for i64 {
    fn put(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(itoa::Buffer::new().format(*self).as_bytes());
        Ok(())
    }
}

impl Put for bool {
    fn put(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
        Ok(())
    }
}

impl<T: Put> Put for Option<T> {
    fn put(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match self {
            Some(v) => v.put(out),
            None => {
                out.extend_from_slice(b"null");
                Ok(())
            }
        }
    }
}

impl<T: Put> Put for Vec<T> {
    fn put(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.push(b'[');
        for (i, v) in self.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            v.put(out)?;
        }
        out.push(b']');
        Ok(())
    }
}

impl Put for Value {
    fn put(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        push_value(out, self)
    }
}

/// Writes `value` as `serde_json::to_writer` does (its numbers by `serde_json` itself).
pub fn push_value(out: &mut Vec<u8>, value: &Value) -> serde_json::Result<()> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => b.put(out)?,
        Value::Number(n) => serde_json::to_writer(&mut *out, n)?,
        Value::String(s) => push_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                push_value(out, v)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                push_str(out, k);
                out.push(b':');
                push_value(out, v)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// Writes `s` as a JSON string, quoted and escaped exactly as `serde_json` escapes it.
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut i = first_special(bytes);
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    while let Some(&b) = bytes.get(i) {
        out.extend_from_slice(&bytes[start..i]);
        push_escape(out, b);
        start = i + 1;
        i = find_special(bytes, start);
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The index of the first byte of `b` that needs an escape (`b.len()` when none), for the
/// short strings most members are: a word at a time, the last word overlapping the one before
/// (its bytes there were passed, so none of them is flagged), longer strings by
/// [`find_special`].
#[inline]
fn first_special(b: &[u8]) -> usize {
    let n = b.len();
    if n > 32 {
        return find_special(b, 0);
    }
    if n < 8 {
        return b.iter().position(|&c| special(c)).unwrap_or(n);
    }
    let word = |p: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[p..p + 8]);
        u64::from_le_bytes(w)
    };
    let mut p = 0;
    while p + 8 <= n {
        if let Some(i) = first_special_in(word(p)) {
            return p + i;
        }
        p += 8;
    }
    if p < n
        && let Some(i) = first_special_in(word(n - 8))
    {
        return n - 8 + i;
    }
    n
}

/// The escape of one special byte (a quote, a backslash or a control byte).
fn push_escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short: &[u8] = match b {
        b'"' => b"\\\"",
        b'\\' => b"\\\\",
        0x08 => b"\\b",
        0x0c => b"\\f",
        b'\n' => b"\\n",
        b'\r' => b"\\r",
        b'\t' => b"\\t",
        _ => {
            let hex = [
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ];
            out.extend_from_slice(&hex);
            return;
        }
    };
    out.extend_from_slice(short);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(s: &str) -> String {
        let mut out = Vec::new();
        push_str(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_byte_below_0x80_is_escaped_as_serde_json_escapes_it() {
        for b in 0u8..0x80 {
            let s = format!("a{}b{}", char::from(b), "c".repeat(usize::from(b) % 20));
            assert_eq!(
                ours(&s),
                serde_json::to_string(&s).unwrap(),
                "byte {b:#04x}"
            );
        }
    }

    #[test]
    fn long_runs_and_multibyte_text_are_copied_whole() {
        let s = format!("{}\"中文 é 🦀\n{}\\", "x".repeat(40), "y".repeat(17));
        assert_eq!(ours(&s), serde_json::to_string(&s).unwrap());
        assert_eq!(ours(""), "\"\"");
    }
}
