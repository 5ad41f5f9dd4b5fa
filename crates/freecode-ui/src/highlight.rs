//! A light code highlighter for the transcript: strings, comments, numbers and common keywords
//! of C-like, shell and Python code become `<span class="hl-…">`s. It only splits the text;
//! every piece is escaped by the template, so highlighting can never produce markup.

use maud::{Markup, html};

/// What a piece of code is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Anything else.
    Plain,
    /// A keyword.
    Keyword,
    /// A quoted string.
    Str,
    /// A comment to the end of the line.
    Comment,
    /// A number.
    Number,
}

const KEYWORDS: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "case",
    "class",
    "const",
    "continue",
    "def",
    "do",
    "elif",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "fi",
    "fn",
    "for",
    "from",
    "function",
    "if",
    "impl",
    "import",
    "in",
    "interface",
    "let",
    "match",
    "mod",
    "mut",
    "new",
    "None",
    "null",
    "pub",
    "return",
    "self",
    "static",
    "struct",
    "switch",
    "then",
    "this",
    "trait",
    "true",
    "True",
    "False",
    "try",
    "type",
    "use",
    "var",
    "while",
    "with",
    "yield",
];

/// `code` cut into pieces of a kind, in order; the pieces concatenate to `code`.
pub fn tokens(code: &str) -> Vec<(Kind, &str)> {
    let bytes = code.as_bytes();
    let mut out: Vec<(Kind, &str)> = Vec::new();
    let mut plain_from = 0;
    let mut i = 0;
    // Indices move only over ASCII bytes or to the end of a UTF-8 sequence, so every slice
    // boundary is a char boundary.
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        let kind = if b == b'"' || b == b'\'' || b == b'`' {
            i += 1;
            while i < bytes.len() && bytes[i] != b && bytes[i] != b'\n' {
                if bytes[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(bytes.len());
            Kind::Str
        } else if (b == b'/' && bytes.get(i + 1) == Some(&b'/'))
            || (b == b'#' && (i == 0 || bytes[i - 1].is_ascii_whitespace()))
        {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            Kind::Comment
        } else if b.is_ascii_digit() && (i == 0 || !is_word(bytes[i - 1])) {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
            Kind::Number
        } else if b.is_ascii_alphabetic() || b == b'_' {
            while i < bytes.len() && is_word(bytes[i]) {
                i += 1;
            }
            if KEYWORDS.contains(&&code[start..i]) {
                Kind::Keyword
            } else {
                continue;
            }
        } else {
            i += 1;
            while i < bytes.len() && !bytes[i].is_ascii() {
                i += 1;
            }
            continue;
        };
        // A string may end inside a multibyte char's bytes only at the end of the text.
        while i < bytes.len() && !code.is_char_boundary(i) {
            i += 1;
        }
        if plain_from < start {
            out.push((Kind::Plain, &code[plain_from..start]));
        }
        out.push((kind, &code[start..i]));
        plain_from = i;
    }
    if plain_from < code.len() {
        out.push((Kind::Plain, &code[plain_from..]));
    }
    out
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `<pre><code>` of `code`, highlighted; `language` becomes a class (letters and digits only).
pub fn code_block(code: &str, language: Option<&str>) -> Markup {
    let lang: String = language
        .unwrap_or("")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(20)
        .collect();
    html! {
        pre.code data-lang=(lang) {
            code {
                @for (kind, text) in tokens(code) {
                    @match kind {
                        Kind::Plain => (text),
                        Kind::Keyword => span.hl-kw { (text) },
                        Kind::Str => span.hl-str { (text) },
                        Kind::Comment => span.hl-com { (text) },
                        Kind::Number => span.hl-num { (text) },
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_text_and_are_escaped() {
        for code in [
            "fn main() { let x = \"<b>\"; // </code><script>\n 42 }",
            "é'ü\\'x' # ünï\n`tpl` 3.5e2 ✓",
            "\"unterminated é",
            "",
            "#!/bin/sh\necho 'a' && if true; then fi",
        ] {
            let joined: String = tokens(code).iter().map(|(_, s)| *s).collect();
            assert_eq!(joined, code);
            let html = code_block(code, Some("rs\"><x")).into_string();
            assert!(!html.contains("<script>"), "{html}");
            assert!(!html.contains("<b>"), "{html}");
            assert!(!html.contains("\"><x"), "{html}");
        }
        let t = tokens("let s = \"a\"; // c");
        assert!(t.contains(&(Kind::Keyword, "let")));
        assert!(t.contains(&(Kind::Str, "\"a\"")));
        assert!(t.contains(&(Kind::Comment, "// c")));
    }
}
