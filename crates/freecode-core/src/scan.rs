//! A validating scanner for the JSON lines the store writes: compact objects of plain keys,
//! strings, integers, booleans and small values, read in one pass over the bytes.
//!
//! It is the fast path of the two line readers, the rollout log's
//! ([`ParsedLine::parse`](crate::rollout::view::ParsedLine::parse)) and `messages.jsonl`'s
//! ([`StoredMessage::scan`](crate::StoredMessage::scan)), and it is conservative: a reader
//! built on it accepts a line only when every byte is one it checked against the JSON grammar
//! and every known key's value has the type the typed reader requires, so what it returns is
//! what `serde_json` would (the same values, the last of duplicate keys winning). Anything it is
//! not sure of gives up (`None`) and the line takes the `serde_json` path, whose errors and
//! lossy cases read as they always did: whitespace between tokens, an escape in a key, a
//! surrogate escape (`\uD83D`), a number that is not a short integer, a nesting past
//! [`MAX_DEPTH`]. The writers write none of those, so their lines never leave the fast path.
//!
//! Why not a JSON library: on the 1,000,000 lines of the benchmark log (247 MiB), `serde_json`'s
//! borrowed parse into the view's fields took about 370 ms (its key visitor, its typed `Option`
//! dispatch, its string skipper), and `sonic-rs` was slower still on these lines; this scanner
//! reads them in about 145 ms, because it knows the keys, reads the five every line starts with
//! without looking them up, never builds a value and passes string bytes 8 and 16 at a time.

/// How deep a skipped value may nest before the scanner gives up (`serde_json` allows 128).
pub const MAX_DEPTH: usize = 64;

/// A position in one line's bytes.
pub(crate) struct Scanner<'a> {
    src: &'a str,
    p: usize,
}

/// The bytes that end a run of plain string bytes: a quote, a backslash or a control byte.
#[inline]
fn special(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The index of the first [`special`] byte of `s` at or after `p` (`s.len()` when none).
#[inline]
pub(crate) fn find_special(s: &[u8], mut p: usize) -> usize {
    const LANES: usize = 16;
    // Most strings are short: try one word first.
    if let Some(word) = s.get(p..p + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        if let Some(i) = first_special_in(u64::from_le_bytes(w)) {
            return p + i;
        }
        p += 8;
    }
    while let Some(chunk) = s.get(p..p + LANES) {
        // A fold without early exit over a fixed width, which the compiler turns into vector
        // compares: most strings' bytes are passed 16 at a time.
        if chunk.iter().fold(false, |acc, &b| acc | special(b)) {
            break;
        }
        p += LANES;
    }
    find_special_short(s, p)
}

/// The index of the first byte of `b` that needs an escape (`b.len()` when none), for the
/// short strings most written members are (`jsonw`): a word at a time, the last word overlapping the one before
/// (its bytes there were passed, so none of them is flagged), longer strings by
/// [`find_special`].
#[inline]
pub(crate) fn first_special(b: &[u8]) -> usize {
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

/// [`find_special`] for short strings: eight bytes at a time from the start.
#[inline]
fn find_special_short(s: &[u8], mut p: usize) -> usize {
    while let Some(word) = s.get(p..p + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        if let Some(i) = first_special_in(u64::from_le_bytes(w)) {
            return p + i;
        }
        p += 8;
    }
    while let Some(&b) = s.get(p) {
        if special(b) {
            return p;
        }
        p += 1;
    }
    p
}

/// The first [`special`] byte of eight (little-endian), by word arithmetic: each test below
/// flags the lowest byte that meets it exactly (a borrow can only flag bytes above it), so the
/// lowest flag of the three is the first special byte.
#[inline]
fn first_special_in(x: u64) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let quote = zero(x ^ (ONES * u64::from(b'"')));
    let backslash = zero(x ^ (ONES * u64::from(b'\\')));
    let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
    let m = quote | backslash | control;
    (m != 0).then(|| (m.trailing_zeros() / 8) as usize)
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Self { src, p: 0 }
    }

    #[inline]
    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    #[inline]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes().get(self.p).copied()
    }

    /// The next byte, consumed.
    #[inline]
    pub(crate) fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.p += 1;
        Some(b)
    }

    /// Consumes `want` or gives up.
    #[inline]
    pub(crate) fn eat(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    /// Consumes `text` when it is next.
    #[inline]
    pub(crate) fn lit(&mut self, text: &[u8]) -> bool {
        let end = self.p + text.len();
        let hit = self.bytes().get(self.p..end) == Some(text);
        if hit {
            self.p = end;
        }
        hit
    }

    /// Whether every byte has been read.
    pub(crate) fn at_end(&self) -> bool {
        self.p == self.src.len()
    }

    /// Consumes the literal `word` (`null`, `true`, `false`).
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.p + word.len();
        (self.bytes().get(self.p..end)? == word).then(|| self.p = end)
    }

    /// Consumes `null` when it is next: `Some(true)`; `Some(false)` when something else is.
    #[inline]
    fn null(&mut self) -> Option<bool> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(true);
        }
        Some(false)
    }

    /// After an opening quote: the string's text up to its closing quote (consumed), when it
    /// has no escape; `None` on an escape or a control byte.
    #[inline]
    pub(crate) fn plain_body(&mut self) -> Option<&'a str> {
        let start = self.p;
        let end = find_special(self.bytes(), start);
        if self.bytes().get(end) != Some(&b'"') {
            return None;
        }
        self.p = end + 1;
        // Both ends sit on ASCII bytes of a `str`, so these are char boundaries.
        self.src.get(start..end)
    }

    /// After an opening quote: a key up to its closing quote (consumed), when it has no
    /// escape. Keys are short: found a word at a time, without the vector pass.
    #[inline]
    pub(crate) fn plain_key(&mut self) -> Option<&'a str> {
        let start = self.p;
        let end = find_special_short(self.bytes(), start);
        if self.bytes().get(end) != Some(&b'"') {
            return None;
        }
        self.p = end + 1;
        self.src.get(start..end)
    }

    /// After an opening quote: skips a string with valid escapes to its closing quote.
    fn skip_body(&mut self) -> Option<()> {
        loop {
            let at = find_special(self.bytes(), self.p);
            match self.bytes().get(at)? {
                b'"' => {
                    self.p = at + 1;
                    return Some(());
                }
                b'\\' => {
                    self.p = at + 1;
                    match self.next()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let hex = self.bytes().get(self.p..self.p + 4)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            // A surrogate escape, paired or lone: `serde_json` decides (the
                            // reader keeps a lone one as U+FFFD and reports it).
                            if matches!(hex[0], b'd' | b'D')
                                && matches!(hex[1], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
                            {
                                return None;
                            }
                            self.p += 4;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    /// After an opening quote: the string decoded, escapes and all, up to its closing quote
    /// (consumed). Gives up on a control byte, a bad escape and any surrogate escape.
    pub(crate) fn string_body(&mut self) -> Option<String> {
        let start = self.p;
        let end = find_special(self.bytes(), start);
        if self.bytes().get(end) == Some(&b'"') {
            self.p = end + 1;
            return self.src.get(start..end).map(str::to_owned);
        }
        // Escapes: find the end first (checking every escape), then decode into a string of
        // the raw length, which the decoded text never exceeds.
        self.skip_body()?;
        let raw = self.src.get(start..self.p - 1)?;
        let mut out = String::with_capacity(raw.len());
        let mut rest = raw;
        // `memchr`, not `str::find`: that compares each match's bytes in a call of its own.
        while let Some(i) = memchr::memchr(b'\\', rest.as_bytes()) {
            out.push_str(rest.get(..i)?);
            let esc = rest.as_bytes().get(i + 1)?;
            let (ch, len) = match esc {
                b'"' => ('"', 2),
                b'\\' => ('\\', 2),
                b'/' => ('/', 2),
                b'b' => ('\u{8}', 2),
                b'f' => ('\u{c}', 2),
                b'n' => ('\n', 2),
                b'r' => ('\r', 2),
                b't' => ('\t', 2),
                b'u' => {
                    let code = u32::from_str_radix(rest.get(i + 2..i + 6)?, 16).ok()?;
                    // Not a surrogate: `skip_body` gave up on those.
                    (char::from_u32(code)?, 6)
                }
                _ => return None,
            };
            out.push(ch);
            rest = rest.get(i + len..)?;
        }
        out.push_str(rest);
        Some(out)
    }

    /// A string decoded, or `null`.
    pub(crate) fn string(&mut self) -> Option<Option<String>> {
        if self.null()? {
            return Some(None);
        }
        self.eat(b'"')?;
        self.string_body().map(Some)
    }

    /// A string without escapes, or `null`.
    #[inline]
    pub(crate) fn plain_str(&mut self) -> Option<Option<&'a str>> {
        if self.null()? {
            return Some(None);
        }
        self.eat(b'"')?;
        self.plain_body().map(Some)
    }

    /// A string (escapes allowed, checked), or `null`: its JSON text, quotes included.
    pub(crate) fn raw_str(&mut self) -> Option<Option<&'a str>> {
        if self.null()? {
            return Some(None);
        }
        let start = self.p;
        self.eat(b'"')?;
        self.skip_body()?;
        self.src.get(start..self.p).map(Some)
    }

    /// `true`, `false` or `null`.
    pub(crate) fn bool(&mut self) -> Option<Option<bool>> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|()| Some(true)),
            b'f' => self.literal(b"false").map(|()| Some(false)),
            b'n' => self.literal(b"null").map(|()| None),
            _ => None,
        }
    }

    /// Up to 18 digits, without a leading zero, and not followed by a fraction or an
    /// exponent (those are floats, which the typed fields refuse: `serde_json` decides).
    #[inline]
    fn digits(&mut self) -> Option<u64> {
        let start = self.p;
        let mut v: u64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            v = v * 10 + u64::from(d - b'0');
            self.p += 1;
            if self.p - start > 18 {
                return None;
            }
        }
        let n = self.p - start;
        if n == 0 || (n > 1 && self.bytes()[start] == b'0') {
            return None;
        }
        match self.peek() {
            Some(b'.' | b'e' | b'E') => None,
            _ => Some(v),
        }
    }

    /// An unsigned integer or `null`.
    #[inline]
    pub(crate) fn u64(&mut self) -> Option<Option<u64>> {
        if self.null()? {
            return Some(None);
        }
        self.digits().map(Some)
    }

    /// A signed integer or `null` (`-0` gives up: `serde_json` reads it as a float).
    #[inline]
    pub(crate) fn i64(&mut self) -> Option<Option<i64>> {
        if self.null()? {
            return Some(None);
        }
        let negative = self.peek()? == b'-';
        if negative {
            self.p += 1;
        }
        let v = i64::try_from(self.digits()?).ok()?;
        if negative {
            if v == 0 {
                return None;
            }
            return Some(Some(-v));
        }
        Some(Some(v))
    }

    /// An array of strings without escapes, or `null`: the text between the brackets.
    pub(crate) fn plain_str_array(&mut self) -> Option<Option<&'a str>> {
        if self.null()? {
            return Some(None);
        }
        self.eat(b'[')?;
        let start = self.p;
        if self.peek()? == b']' {
            self.p += 1;
            return Some(Some(""));
        }
        loop {
            self.eat(b'"')?;
            self.plain_body()?;
            match self.next()? {
                b',' => {}
                b']' => return self.src.get(start..self.p - 1).map(Some),
                _ => return None,
            }
        }
    }

    /// An array of strings (escapes allowed, checked), or `null`.
    pub(crate) fn str_array(&mut self) -> Option<()> {
        if self.null()? {
            return Some(());
        }
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.p += 1;
            return Some(());
        }
        loop {
            self.eat(b'"')?;
            self.skip_body()?;
            match self.next()? {
                b',' => {}
                b']' => return Some(()),
                _ => return None,
            }
        }
    }

    /// Any JSON value (checked against the grammar): its text. `null` included.
    pub(crate) fn value(&mut self) -> Option<&'a str> {
        let start = self.p;
        self.skip_value(0)?;
        self.src.get(start..self.p)
    }

    fn skip_value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.p += 1;
                self.skip_body()
            }
            b'{' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.p += 1;
                if self.peek()? == b'}' {
                    self.p += 1;
                    return Some(());
                }
                loop {
                    self.eat(b'"')?;
                    self.skip_body()?;
                    self.eat(b':')?;
                    self.skip_value(depth + 1)?;
                    match self.next()? {
                        b',' => {}
                        b'}' => return Some(()),
                        _ => return None,
                    }
                }
            }
            b'[' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.p += 1;
                if self.peek()? == b']' {
                    self.p += 1;
                    return Some(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    match self.next()? {
                        b',' => {}
                        b']' => return Some(()),
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.skip_number(),
            _ => None,
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn skip_number(&mut self) -> Option<()> {
        if self.peek()? == b'-' {
            self.p += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.skip_digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.p += 1;
            self.some_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.p += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.p += 1;
            }
            self.some_digits()?;
        }
        // `01` is refused by `serde_json`: a digit may not follow a lone zero.
        if matches!(self.peek(), Some(b'0'..=b'9')) {
            return None;
        }
        Some(())
    }

    fn skip_digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.p += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return None;
        }
        self.skip_digits();
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(s: &str) -> Option<&str> {
        let mut sc = Scanner::new(s);
        let v = sc.value()?;
        sc.at_end().then_some(v)
    }

    #[test]
    fn values_are_taken_exactly_when_serde_json_takes_them() {
        let cases = [
            "0",
            "-0",
            "1",
            "-1",
            "10",
            "01",
            "-01",
            "1.",
            "1.5",
            ".5",
            "1e5",
            "1E+5",
            "1e-",
            "1e",
            "-",
            "--1",
            "1.5e3",
            "0.0",
            "00",
            "true",
            "false",
            "null",
            "nul",
            "tru",
            "\"\"",
            "\"a\\\"b\"",
            "\"\\u00e9\"",
            "\"\\u00g9\"",
            "\"\\x\"",
            "\"\u{1}\"",
            "\"é\"",
            "[]",
            "[1,2]",
            "[1,]",
            "[,1]",
            "{}",
            "{\"a\":1}",
            "{\"a\":1,}",
            "{\"a\"}",
            "{1:2}",
            "{\"a\":[{\"b\":null}]}",
            "[[[]]]",
            "\"unterminated",
            "[",
            "{",
            "1 ",
            " 1",
        ];
        for c in cases {
            let ours = value(c);
            let theirs = serde_json::from_str::<serde::de::IgnoredAny>(c).is_ok();
            // Whitespace makes the scanner give up (serde_json may accept): that is allowed.
            if c.trim() != c {
                assert_eq!(ours, None, "{c:?}");
                continue;
            }
            assert_eq!(ours.is_some(), theirs, "{c:?}");
            if let Some(v) = ours {
                assert_eq!(v, c);
            }
        }
    }

    #[test]
    fn nesting_past_the_limit_gives_up() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(value(&deep), None);
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(value(&ok), Some(ok.as_str()));
    }

    #[test]
    fn integers_give_up_on_what_is_not_a_short_integer() {
        let i = |s: &str| {
            let mut sc = Scanner::new(s);
            sc.i64()
        };
        assert_eq!(i("12"), Some(Some(12)));
        assert_eq!(i("-12"), Some(Some(-12)));
        assert_eq!(i("null"), Some(None));
        assert_eq!(i("999999999999999999"), Some(Some(999_999_999_999_999_999)));
        for bad in [
            "-0",
            "1.0",
            "1e3",
            "01",
            "1234567890123456789",
            "-",
            "x",
            "\"1\"",
        ] {
            assert_eq!(i(bad), None, "{bad}");
        }
        let mut sc = Scanner::new("-1");
        assert_eq!(sc.u64(), None);
    }

    #[test]
    fn the_word_test_finds_the_first_special_byte_of_any_eight() {
        let picks = [
            0u8, 0x1f, 0x20, b'"', b'\\', b'x', 0x7f, 0x80, 0xff, 0x21, 0x5b, 0x5d,
        ];
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..200_000 {
            let mut w = [0u8; 8];
            for b in &mut w {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                *b = picks[(rng % picks.len() as u64) as usize];
            }
            let want = w.iter().position(|&b| special(b));
            assert_eq!(first_special_in(u64::from_le_bytes(w)), want, "{w:?}");
        }
    }

    #[test]
    fn strings_are_found_across_the_vector_lanes() {
        for n in 0..40 {
            let body = "x".repeat(n);
            let line = format!("{body}\"");
            let mut sc = Scanner::new(&line);
            assert_eq!(sc.plain_body(), Some(body.as_str()));
            let escaped = format!("{body}\\n\"");
            let mut sc = Scanner::new(&escaped);
            assert_eq!(sc.plain_body(), None);
            let ctl = format!("{body}\t\"");
            let mut sc = Scanner::new(&ctl);
            assert_eq!(sc.plain_body(), None);
        }
    }
}
