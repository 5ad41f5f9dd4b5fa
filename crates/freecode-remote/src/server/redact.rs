//! Keeping share codes out of logs. A code is a bearer capability (whoever has it can read the
//! share), so log lines carry only its first 6 characters. Store errors embed file paths and S3
//! keys, which contain whole codes: their text goes through [`redact_codes`] before it is
//! logged.

use std::fmt::Display;

use crate::blob::CODE_LEN;

/// How many characters of a code survive redaction (as in [`crate::blob::ShareCode::short`]).
const KEPT: usize = 6;

/// `s` with every run of exactly [`CODE_LEN`] lowercase hex characters (a share code's shape)
/// cut to its first 6 characters followed by `…`. Shorter and longer runs are left alone.
pub(crate) fn redact_codes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut run_start = None;
    for (i, c) in s.char_indices() {
        if matches!(c, '0'..='9' | 'a'..='f') {
            run_start.get_or_insert(i);
        } else {
            if let Some(start) = run_start.take() {
                push_run(&mut out, &s[start..i]);
            }
            out.push(c);
        }
    }
    if let Some(start) = run_start {
        push_run(&mut out, &s[start..]);
    }
    out
}

/// Appends one maximal run of lowercase hex, shortened if it is code-sized.
fn push_run(out: &mut String, run: &str) {
    if run.len() == CODE_LEN {
        out.push_str(&run[..KEPT]);
        out.push('…');
    } else {
        out.push_str(run);
    }
}

/// An error's text, ready to log: [`redact_codes`] over its `Display`.
pub(crate) fn redacted(error: &impl Display) -> String {
    redact_codes(&error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODE: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn codes_are_shortened_wherever_they_appear() {
        assert_eq!(redact_codes(CODE), "012345…");
        assert_eq!(
            redact_codes(&format!(
                "reading /srv/shares/meta/{CODE}.json: Is a directory (os error 21)"
            )),
            "reading /srv/shares/meta/012345….json: Is a directory (os error 21)"
        );
        assert_eq!(
            redact_codes(&format!(
                "s3 get s3://bucket/p/blobs/{CODE}: Object at location p/blobs/{CODE} not found"
            )),
            "s3 get s3://bucket/p/blobs/012345…: Object at location p/blobs/012345… not found"
        );
        let other = "ffffffffffffffffffffffffffffffff";
        assert_eq!(redact_codes(&format!("{CODE}/{other}")), "012345…/ffffff…");
        // Non-ASCII neighbours are kept intact.
        assert_eq!(redact_codes(&format!("é{CODE}é")), "é012345…é");
    }

    #[test]
    fn other_text_is_untouched() {
        for s in [
            "",
            "storage error",
            "0123456789abcdef0123456789abcde",   // 31
            "0123456789abcdef0123456789abcdef0", // 33
            "0123456789ABCDEF0123456789ABCDEF",  // upper case is not a code
            "0123456789abcdef0123456789abcdeg",
            "/tmp/.tmp-0123456789abcdef: os error 2",
        ] {
            assert_eq!(redact_codes(s), s);
        }
        let digest = "ab".repeat(32);
        assert_eq!(redact_codes(&digest), digest);
        assert_eq!(redacted(&"plain"), "plain");
        assert_eq!(redacted(&format!("x {CODE} y")), "x 012345… y");
    }
}
