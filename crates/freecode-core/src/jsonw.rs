//! JSON written by hand, byte for byte as `serde_json` writes it (compact, or pretty from a
//! given depth), for what is written most: the rollout recorder's events
//! ([`EventLine::write_to`], through `Line`) and the messages `session show --json` and RPC
//! `session.get` print ([`to_pretty_at`], [`to_compact`], through the [`Emit`] impls that
//! `json_record!` and `string_enum!` generate beside their `Serialize`).
//!
//! Why not `serde_json` there: in a recording of 1,000,000 events its string escaper
//! (`format_escaped_str`, a table lookup per byte and a `write_all` per key and per value) was
//! a quarter of the whole run's time, more than the write syscalls. Here a string's plain bytes
//! are found eight and sixteen at a time (the scanner's `find_special`) and copied as one
//! run, keys and values go straight into the buffer (a key of the format is a literal, checked
//! at compile time to need no escape and copied whole with its colon; a pretty line break and
//! its indentation are one copy), and integers through `itoa`, which is
//! what `serde_json` uses, so the bytes are the same: the escapes are `\"`, `\\`, `\b`, `\f`,
//! `\n`, `\r`, `\t` and `\u00xx` (lower-case hex) for the other control bytes, nothing else is
//! escaped (not `/`, not DEL, not non-ASCII), and a number inside a [`Value`] is written by
//! `serde_json` itself. The pretty layout is `serde_json`'s `PrettyFormatter` (two spaces a
//! level, `": "`, empty containers as `[]` and `{}`). `tests/line_writer.rs` holds it all to
//! `serde_json` on every event kind and on messages, with generated strings, values and
//! unknown keys, at several depths.
//!
//! [`EventLine::write_to`]: crate::rollout::event::EventLine::write_to

pub use serde_json::Error;
use serde_json::Value;

use crate::scan::{find_special, first_special};

/// What an event's members are written to: a `serde` map (its `Serialize`) or a [`Line`].
/// One list of members, two writers, so the two cannot disagree on what a line holds.
pub(crate) trait Members {
    type Error;
    /// Writes one member under a key of the format's.
    fn member<T: Emit + serde::Serialize + ?Sized>(
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
    fn member<T: Emit + serde::Serialize + ?Sized>(
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
    out: Compact<'a>,
    first: bool,
}

impl<'a> Line<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        let mut out = Compact(out);
        out.open(b'{');
        Self { out, first: true }
    }

    pub(crate) fn end(mut self) {
        self.out.close(b'}', self.first);
    }
}

impl Members for Line<'_> {
    type Error = serde_json::Error;
    fn member<T: Emit + serde::Serialize + ?Sized>(
        &mut self,
        key: Key,
        value: &T,
    ) -> serde_json::Result<()> {
        debug_assert_eq!(
            first_special(key.name.as_bytes()),
            key.name.len(),
            "{key:?}"
        );
        self.out.item(self.first);
        self.first = false;
        // The key and its colon as one literal: no escaping, one copy.
        self.out.0.extend_from_slice(key.quoted.as_bytes());
        value.emit(&mut self.out)
    }
    fn extra(&mut self, key: &str, value: &Value) -> serde_json::Result<()> {
        emit_member(&mut self.out, &mut self.first, key, value)
    }
}

/// The layout of hand-written JSON: [`Compact`] (`serde_json::to_writer`'s bytes) or
/// [`Pretty`] (`serde_json::to_writer_pretty`'s, from a given depth). A container is opened,
/// each member or element is announced (`first` for the first), and it is closed saying
/// whether it stayed empty; the values themselves go into [`Layout::out`].
pub trait Layout {
    /// The buffer the bytes go to.
    fn out(&mut self) -> &mut Vec<u8>;
    /// `{` or `[`.
    fn open(&mut self, bracket: u8);
    /// Before a member's key or an element.
    fn item(&mut self, first: bool);
    /// Between a key and its value.
    fn colon(&mut self);
    /// Before a member under a key of the format's: the item's separator, then the key and
    /// its colon. `key_colon` is `"key": ` (the pretty colon; the compact layout leaves out its
    /// last byte), nothing in it to escape ([`quoted_key!`](crate::quoted_key)).
    fn key(&mut self, first: bool, key_colon: &'static str) {
        self.item(first);
        // The quoted key without the pretty colon, then this layout's colon.
        let b = key_colon.as_bytes();
        self.out()
            .extend_from_slice(b.strip_suffix(b": ").unwrap_or(b));
        self.colon();
    }
    /// `}` or `]`, after `empty` (no item) or the last item.
    fn close(&mut self, bracket: u8, empty: bool);
}

/// `serde_json::to_writer`'s layout.
pub struct Compact<'a>(pub &'a mut Vec<u8>);

impl Layout for Compact<'_> {
    fn out(&mut self) -> &mut Vec<u8> {
        self.0
    }
    fn open(&mut self, bracket: u8) {
        self.0.push(bracket);
    }
    fn item(&mut self, first: bool) {
        if !first {
            self.0.push(b',');
        }
    }
    fn colon(&mut self) {
        self.0.push(b':');
    }
    fn key(&mut self, first: bool, key_colon: &'static str) {
        if !first {
            self.0.push(b',');
        }
        // `"key": ` without its space.
        let b = key_colon.as_bytes();
        self.0.extend_from_slice(&b[..b.len() - 1]);
    }
    fn close(&mut self, bracket: u8, _empty: bool) {
        self.0.push(bracket);
    }
}

/// `serde_json`'s pretty layout (two spaces a level) for a value `depth` levels deep in a
/// pretty document: its bytes are the whole document's at that place.
pub struct Pretty<'a> {
    out: &'a mut Vec<u8>,
    depth: usize,
}

impl<'a> Pretty<'a> {
    /// For a value at `depth` (an element of a top-level object's array is at 2).
    pub fn at(out: &'a mut Vec<u8>, depth: usize) -> Self {
        Self { out, depth }
    }

    /// A comma (unless `first`), a newline and the depth's indentation: one copy from
    /// [`BREAK`] up to its depth, a fill past it.
    fn separator(&mut self, first: bool) {
        let n = 2 + self.depth * 2;
        match BREAK.get(usize::from(first)..n) {
            Some(run) => self.out.extend_from_slice(run),
            None => {
                self.out.extend_from_slice(&BREAK[usize::from(first)..2]);
                self.out.resize(self.out.len() + self.depth * 2, b' ');
            }
        }
    }
}

/// `",\n"` and the indentation of the deepest level written in one copy (spaces past it are
/// filled).
const BREAK: &[u8; 2 + 2 * 32] =
    b",\n                                                                ";

impl Layout for Pretty<'_> {
    fn out(&mut self) -> &mut Vec<u8> {
        self.out
    }
    fn open(&mut self, bracket: u8) {
        self.depth += 1;
        self.out.push(bracket);
    }
    fn item(&mut self, first: bool) {
        self.separator(first);
    }
    fn colon(&mut self) {
        self.out.extend_from_slice(b": ");
    }
    fn key(&mut self, first: bool, key_colon: &'static str) {
        self.separator(first);
        self.out.extend_from_slice(key_colon.as_bytes());
    }
    fn close(&mut self, bracket: u8, empty: bool) {
        self.depth -= 1;
        if !empty {
            // The newline and indentation without a comma.
            self.separator(true);
        }
        self.out.push(bracket);
    }
}

/// A value written by hand, as `serde_json` writes it (its `Serialize`), in any [`Layout`].
/// Records declared with `json_record!` and enums with `string_enum!` implement it.
pub trait Emit {
    /// Writes the value.
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()>;
}

/// Writes `value` in the compact layout: `serde_json::to_writer`'s bytes.
pub fn to_compact<T: Emit + ?Sized>(value: &T, out: &mut Vec<u8>) -> serde_json::Result<()> {
    value.emit(&mut Compact(out))
}

/// Writes `value` as it sits `depth` levels deep in a pretty document (`depth` 0:
/// `serde_json::to_writer_pretty`'s bytes).
pub fn to_pretty_at<T: Emit + ?Sized>(
    value: &T,
    depth: usize,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    value.emit(&mut Pretty::at(out, depth))
}

/// One member of an object being emitted (for `json_record!`): the key, then the value.
#[doc(hidden)]
pub fn emit_member<L: Layout, T: Emit + ?Sized>(
    l: &mut L,
    first: &mut bool,
    key: &str,
    value: &T,
) -> serde_json::Result<()> {
    l.item(*first);
    *first = false;
    push_str(l.out(), key);
    l.colon();
    value.emit(l)
}

/// One member of an object under a key of the format's (for `emit_object!` and
/// `json_record!`): `key_colon` is the key in quotes and the pretty colon ([`quoted_key!`](crate::quoted_key)), a
/// literal checked at compile time to need no escape ([`plain_key`]), so it is copied whole.
#[doc(hidden)]
#[inline]
pub fn emit_key_member<L: Layout, T: Emit + ?Sized>(
    l: &mut L,
    first: &mut bool,
    key_colon: &'static str,
    value: &T,
) -> serde_json::Result<()> {
    l.key(*first, key_colon);
    *first = false;
    value.emit(l)
}

/// Whether a key needs no escape (no quote, backslash or control byte), so that its quoted
/// form can be copied as it is: checked at compile time for every literal key ([`quoted_key!`](crate::quoted_key)).
#[doc(hidden)]
pub const fn plain_key(key: &str) -> bool {
    let b = key.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] < 0x20 || b[i] == b'"' || b[i] == b'\\' {
            return false;
        }
        i += 1;
    }
    true
}

/// A literal key in quotes followed by the pretty colon (`"key": `), as a `&'static str`; a
/// key that would need an escape does not compile.
#[doc(hidden)]
#[macro_export]
macro_rules! quoted_key {
    ($key:literal) => {{
        const _: () = assert!(
            $crate::jsonw::plain_key($key),
            "a JSON key that needs escaping"
        );
        concat!("\"", $key, "\": ")
    }};
}

/// Writes an object whose members are listed in order, each `always "key" => value`, `some
/// "key" => value` (an `Option`, skipped when `None`: `skip_serializing_if = "Option::is_none"`)
/// or `nonempty "key" => value` (a `Vec`, skipped when empty): the bytes of the type's derived
/// `Serialize` when the list is its fields in declaration order.
macro_rules! emit_object {
    ($l:expr; $($how:ident $key:literal => $value:expr),+ $(,)?) => {{
        let l = $l;
        let first = &mut true;
        $crate::jsonw::Layout::open(l, b'{');
        $( $crate::jsonw::emit_object!(@$how l, first, $key, $value); )+
        $crate::jsonw::Layout::close(l, b'}', *first);
        Ok(())
    }};
    (@always $l:ident, $first:ident, $key:literal, $value:expr) => {
        $crate::jsonw::emit_key_member($l, $first, $crate::quoted_key!($key), $value)?;
    };
    (@some $l:ident, $first:ident, $key:literal, $value:expr) => {
        if let Some(v) = $value {
            $crate::jsonw::emit_key_member($l, $first, $crate::quoted_key!($key), v)?;
        }
    };
    (@nonempty $l:ident, $first:ident, $key:literal, $value:expr) => {
        if !$value.is_empty() {
            $crate::jsonw::emit_key_member($l, $first, $crate::quoted_key!($key), $value)?;
        }
    };
}
pub(crate) use emit_object;

impl Emit for str {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        push_str(l.out(), self);
        Ok(())
    }
}

impl Emit for String {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        push_str(l.out(), self);
        Ok(())
    }
}

macro_rules! emit_integer {
    ($($t:ty),*) => {$(
        impl Emit for $t {
            fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
                l.out().extend_from_slice(itoa::Buffer::new().format(*self).as_bytes());
                Ok(())
            }
        }
    )*};
}
emit_integer!(u64, i64, u32, i32);

impl Emit for bool {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        l.out()
            .extend_from_slice(if *self { b"true" } else { b"false" });
        Ok(())
    }
}

impl<T: Emit> Emit for Option<T> {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        match self {
            Some(v) => v.emit(l),
            None => {
                l.out().extend_from_slice(b"null");
                Ok(())
            }
        }
    }
}

impl<T: Emit + ?Sized> Emit for Box<T> {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        (**self).emit(l)
    }
}

/// An array of `items`.
fn emit_array<'v, L: Layout, T: Emit + 'v>(
    l: &mut L,
    items: impl IntoIterator<Item = &'v T>,
) -> serde_json::Result<()> {
    l.open(b'[');
    let mut empty = true;
    for v in items {
        l.item(empty);
        empty = false;
        v.emit(l)?;
    }
    l.close(b']', empty);
    Ok(())
}

impl<T: Emit> Emit for Vec<T> {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        emit_array(l, self)
    }
}

impl Emit for Value {
    fn emit<L: Layout>(&self, l: &mut L) -> serde_json::Result<()> {
        match self {
            Value::Null => l.out().extend_from_slice(b"null"),
            Value::Bool(b) => b.emit(l)?,
            Value::Number(n) => serde_json::to_writer(&mut *l.out(), n)?,
            Value::String(s) => push_str(l.out(), s),
            Value::Array(items) => emit_array(l, items)?,
            Value::Object(map) => {
                l.open(b'{');
                let mut first = true;
                for (k, v) in map {
                    emit_member(l, &mut first, k, v)?;
                }
                l.close(b'}', first);
            }
        }
        Ok(())
    }
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
    fn indentation_past_the_copied_run_is_filled() {
        // Deeper than `BREAK` holds: the fill path, at every depth around its end.
        let mut v = serde_json::json!({"leaf": [1, "two", {}], "k": []});
        for depth in 0..40 {
            v = serde_json::json!({ "d": depth, "next": [v.clone()], "z": {"a": true} });
            let mut out = Vec::new();
            to_pretty_at(&v, 0, &mut out).unwrap();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string_pretty(&v).unwrap(),
                "nesting {depth}"
            );
        }
    }

    /// A layout of its own that keeps `Layout::key`'s default: the compact layout's bytes.
    struct Plain<'a>(Compact<'a>);

    impl Layout for Plain<'_> {
        fn out(&mut self) -> &mut Vec<u8> {
            self.0.out()
        }
        fn open(&mut self, bracket: u8) {
            self.0.open(bracket);
        }
        fn item(&mut self, first: bool) {
            self.0.item(first);
        }
        fn colon(&mut self) {
            self.0.colon();
        }
        fn close(&mut self, bracket: u8, empty: bool) {
            self.0.close(bracket, empty);
        }
    }

    #[test]
    fn a_layout_without_its_own_key_writes_the_key_and_its_colon() {
        let span = crate::rollout::trace::ToolSpan {
            tool: "read_file".to_owned(),
            started_at: 7,
            duration_ms: 3,
            args: Some(serde_json::json!({"path": "a\"b"})),
            failed: Some(true),
        };
        let mut out = Vec::new();
        span.emit(&mut Plain(Compact(&mut out))).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            serde_json::to_string(&span).unwrap()
        );
    }

    #[test]
    fn keys_that_need_escaping_are_refused() {
        assert!(plain_key("cacheReadTokens"));
        assert!(plain_key("é-ключ"));
        for bad in ["a\"b", "a\\b", "a\nb", "\u{1}"] {
            assert!(!plain_key(bad), "{bad:?}");
        }
    }

    #[test]
    fn long_runs_and_multibyte_text_are_copied_whole() {
        let s = format!("{}\"中文 é 🦀\n{}\\", "x".repeat(40), "y".repeat(17));
        assert_eq!(ours(&s), serde_json::to_string(&s).unwrap());
        assert_eq!(ours(""), "\"\"");
    }
}
