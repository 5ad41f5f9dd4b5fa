//! A message's text as a reader expects it.
//!
//! - **An assistant's answer is markdown** ([`markdown`]): CommonMark with tables,
//!   strikethrough and task lists, parsed by `pulldown-cmark` and written by its HTML writer,
//!   which escapes all text and attributes. Before it writes, the events are made safe: raw HTML
//!   (a block or inline) becomes text, so it shows as written and never as markup; code blocks
//!   go through this crate's highlighter ([`code_block`], escaped by the template); a link is
//!   kept only to an `http:`, `https:` or `mailto:` address (anything else keeps its text and
//!   loses the link); an image is never loaded (the CSP would refuse it anyway) but shown as a
//!   link to it. A line break in the answer is a line break on the page, as in chat. Table
//!   columns are not aligned (that would take a `style` attribute, which the CSP refuses).
//! - **What an agent wrapped in a tag of its own is quiet** ([`plain`]): a segment that starts
//!   a line with `<name>` and ends with `</name>`, where the name is lowercase with a `-` or `_`
//!   in it (the shape of agents' wrappers, such as `system-reminder`, `local-command-stdout` or
//!   `environment_context`, and never of an HTML element), is a collapsed block labelled with
//!   the name. A run of `command-*` tags (a slash command as Claude Code records it) is one
//!   line: the command and its arguments.
//! - Everything else is shown as written (line breaks kept), with fenced code blocks as code.

use maud::{Markup, PreEscaped, html};
use pulldown_cmark::{Alignment, CodeBlockKind, CowStr, Event, Options, Parser, Tag, TagEnd};

use super::highlight::code_block;

/// An assistant's text: rendered markdown, made safe as the module says.
pub fn markdown(text: &str) -> Markup {
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = safe_events(Parser::new_ext(text, opts));
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    pulldown_cmark::html::push_html(&mut out, events.into_iter());
    // pulldown-cmark's writer escaped every text and attribute; the only raw HTML left is this
    // crate's own code blocks (maud templates).
    html! { div.md { (PreEscaped(out)) } }
}

/// Whether a link may point at `url`: a web or mail address.
fn linkable(url: &str) -> bool {
    let u = url.trim_start().to_ascii_lowercase();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|s| u.starts_with(s))
}

/// The parser's events with raw HTML as text, code blocks highlighted, links checked and
/// images turned into links.
fn safe_events<'a>(parser: impl Iterator<Item = Event<'a>>) -> Vec<Event<'a>> {
    let mut out: Vec<Event<'a>> = Vec::new();
    // Inside a code block or a raw HTML block: its language and its text so far.
    let mut block: Option<(Option<String>, String)> = None;
    // Open links and images: whether each was kept, and where its events started.
    let mut links: Vec<(bool, usize)> = Vec::new();
    for ev in parser {
        if let Some((lang, buf)) = &mut block {
            match ev {
                Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => buf.push_str(&t),
                Event::End(TagEnd::CodeBlock | TagEnd::HtmlBlock) => {
                    let code = code_block(buf.trim_end_matches('\n'), lang.as_deref());
                    out.push(Event::Html(CowStr::from(code.into_string())));
                    block = None;
                }
                _ => {}
            }
            continue;
        }
        match ev {
            Event::Start(Tag::CodeBlock(kind)) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .filter(|l| !l.is_empty())
                        .map(str::to_owned),
                    CodeBlockKind::Indented => None,
                };
                block = Some((lang, String::new()));
            }
            Event::Start(Tag::HtmlBlock) => block = Some((Some("html".to_owned()), String::new())),
            Event::Html(t) | Event::InlineHtml(t) => out.push(Event::Text(t)),
            Event::SoftBreak => out.push(Event::HardBreak),
            // A column's alignment would be a `style` attribute, which the CSP refuses.
            Event::Start(Tag::Table(columns)) => {
                out.push(Event::Start(Tag::Table(vec![
                    Alignment::None;
                    columns.len()
                ])));
            }
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            })
            | Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) => {
                let kept = linkable(&dest_url);
                links.push((kept, out.len()));
                if kept {
                    out.push(Event::Start(Tag::Link {
                        link_type,
                        dest_url,
                        title,
                        id,
                    }));
                }
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                if let Some((true, start)) = links.pop() {
                    // An image without words: its address is the link's text.
                    if out.len() == start + 1
                        && let Some(Event::Start(Tag::Link { dest_url, .. })) = out.get(start)
                    {
                        let text = Event::Text(dest_url.clone());
                        out.push(text);
                    }
                    out.push(Event::End(TagEnd::Link));
                }
            }
            other => out.push(other),
        }
    }
    // Text that ends inside an unclosed fence: the parser closes it, but be sure.
    if let Some((lang, buf)) = block {
        out.push(Event::Html(CowStr::from(
            code_block(&buf, lang.as_deref()).into_string(),
        )));
    }
    out
}

/// A piece of a message's text.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    /// Text as written.
    Text(&'a str),
    /// `<name>body</name>` starting a line.
    Tagged { name: &'a str, body: &'a str },
}

/// Whether `name` is an agent's wrapper tag: lowercase ASCII letters and digits with a `-` or
/// `_` between them, starting with a letter, at most 48 characters.
fn wrapper_name(name: &str) -> bool {
    name.len() <= 48
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.contains(['-', '_'])
        && !name.ends_with(['-', '_'])
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// `text` cut into text and the wrapper tags that start its lines.
fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut plain_from = 0;
    let mut at = 0;
    while at < text.len() {
        let line_start = at;
        let indent = text[at..].len() - text[at..].trim_start_matches([' ', '\t']).len();
        let open_at = at + indent;
        let tagged = text[open_at..].strip_prefix('<').and_then(|rest| {
            let end = rest.find('>')?;
            let name = &rest[..end];
            if !wrapper_name(name) {
                return None;
            }
            let body_from = open_at + 1 + end + 1;
            let close = format!("</{name}>");
            let len = text[body_from..].find(&close)?;
            Some((
                name,
                body_from,
                body_from + len,
                body_from + len + close.len(),
            ))
        });
        if let Some((name, body_from, body_to, after)) = tagged {
            if plain_from < line_start {
                out.push(Piece::Text(&text[plain_from..line_start]));
            }
            out.push(Piece::Tagged {
                name,
                body: &text[body_from..body_to],
            });
            // The rest of the closing line, when only blanks, goes with the tag.
            let rest = &text[after..];
            let blank = rest.len() - rest.trim_start_matches([' ', '\t']).len();
            at = after + blank;
            if text[at..].starts_with('\n') {
                at += 1;
            }
            plain_from = at;
            continue;
        }
        at = text[at..].find('\n').map_or(text.len(), |n| at + n + 1);
    }
    if plain_from < text.len() {
        out.push(Piece::Text(&text[plain_from..]));
    }
    out
}

/// A tag's name for a reader: `system-reminder` is "system reminder".
fn label(name: &str) -> String {
    name.replace(['-', '_'], " ")
}

/// Text that is not an assistant's answer: wrapper tags quiet, the rest as written.
pub fn plain(text: &str) -> Markup {
    let pieces = pieces(text);
    let mut blocks = Vec::with_capacity(pieces.len());
    let mut i = 0;
    while i < pieces.len() {
        match &pieces[i] {
            Piece::Text(t) => {
                blocks.push(fenced(t));
                i += 1;
            }
            Piece::Tagged { name, .. } if name.starts_with("command-") => {
                let run = command_run(&pieces[i..]);
                blocks.push(command_line(&pieces[i..i + run]));
                i += run;
            }
            Piece::Tagged { name, body } => {
                blocks.push(html! {
                    details.quiet data-tag=(name) {
                        summary { (label(name)) }
                        @if !body.trim().is_empty() { div.text { (body.trim_matches('\n')) } }
                    }
                });
                i += 1;
            }
        }
    }
    html! { @for b in blocks { (b) } }
}

/// How many pieces from the first are one slash command: `command-*` tags with nothing but
/// blanks between them.
fn command_run(pieces: &[Piece<'_>]) -> usize {
    let mut n = 0;
    let mut tags = 0;
    for p in pieces {
        match p {
            Piece::Tagged { name, .. } if name.starts_with("command-") => {
                n += 1;
                tags = n;
            }
            Piece::Text(t) if t.trim().is_empty() => n += 1,
            _ => break,
        }
    }
    tags.max(1)
}

/// A slash command on one quiet line: its name (or message) and arguments.
fn command_line(pieces: &[Piece<'_>]) -> Markup {
    let field = |want: &str| {
        pieces.iter().find_map(|p| match p {
            Piece::Tagged { name, body } if *name == want => Some(body.trim()),
            _ => None,
        })
    };
    let name = field("command-name")
        .filter(|s| !s.is_empty())
        .or_else(|| field("command-message"))
        .unwrap_or("");
    let args = field("command-args").unwrap_or("");
    html! {
        div.quiet.command {
            span.label { "command" } " "
            code { (name) @if !args.is_empty() { " " (args) } }
        }
    }
}

/// Text with fenced code blocks (```lang … ```) shown as code.
fn fenced(text: &str) -> Markup {
    let mut pieces: Vec<(bool, Option<&str>, &str)> = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some(close) = after.find("```") else {
            break;
        };
        pieces.push((false, None, &rest[..open]));
        let inner = &after[..close];
        let (lang, code) = match inner.split_once('\n') {
            Some((l, c)) if !l.contains(' ') => (Some(l.trim()), c),
            _ => (None, inner),
        };
        pieces.push((true, lang, code));
        rest = &after[close + 3..];
    }
    pieces.push((false, None, rest));
    html! {
        @for (code, lang, s) in pieces {
            @if code { (code_block(s, lang)) }
            @else if !s.trim().is_empty() { div.text { (s.trim_matches('\n')) } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_rendered_and_raw_html_is_text() {
        let md = "# Plan\n\n**Bold** and *it* and `code`.\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n\
                  <script>alert(1)</script>\n\nInline <img src=x onerror=alert(2)> here.\n\n\
                  ```rust\nfn main() {}\n```\n";
        let html = markdown(md).into_string();
        for want in [
            "<h1>Plan</h1>",
            "<strong>Bold</strong>",
            "<em>it</em>",
            "<code>code</code>",
            "<li>one</li>",
            "<table>",
            "<td>2</td>",
            "&lt;script&gt;alert(",
            "&lt;img src=x onerror=alert(2)&gt;",
            "<pre class=\"code\" data-lang=\"rust\">",
        ] {
            assert!(html.contains(want), "{want} not in {html}");
        }
        assert!(
            !html.contains("<script") && !html.contains("<img"),
            "{html}"
        );
    }

    #[test]
    fn only_web_and_mail_links_and_images_are_never_loaded() {
        let html = markdown(
            "[ok](https://example.com/a?b=1&c=2) [bad](javascript:alert(1)) [rel](src/x.rs) \
             ![pic](https://example.com/p.png) ![](http://e.x/q.png) ![data](data:image/png;base64,AA==) \
             <mailto:me@example.com>",
        )
        .into_string();
        assert!(
            html.contains("<a href=\"https://example.com/a?b=1&amp;c=2\">ok</a>"),
            "{html}"
        );
        assert!(!html.contains("javascript:") || !html.contains("href=\"javascript"));
        assert!(!html.contains("href=\"javascript"), "{html}");
        assert!(!html.contains("href=\"src/"), "{html}");
        assert!(html.contains("bad") && html.contains("rel"), "{html}");
        assert!(
            html.contains("<a href=\"https://example.com/p.png\">pic</a>"),
            "{html}"
        );
        assert!(
            html.contains("<a href=\"http://e.x/q.png\">http://e.x/q.png</a>"),
            "{html}"
        );
        assert!(
            !html.contains("<img") && !html.contains("href=\"data:"),
            "{html}"
        );
        assert!(html.contains("href=\"mailto:me@example.com\""), "{html}");
    }

    #[test]
    fn a_line_break_is_kept() {
        let html = markdown("first line\nsecond line").into_string();
        assert!(html.contains("first line<br />"), "{html}");
    }

    #[test]
    fn wrappers_are_cut_out_of_the_text() {
        let text = "<command-message>mcp</command-message>\n<command-name>/mcp</command-name>\n\
                    <command-args>list</command-args>\nThen <b>this</b>\n  <system-reminder>\nbe brief\n</system-reminder>  \nend";
        let p = pieces(text);
        assert_eq!(
            p,
            vec![
                Piece::Tagged {
                    name: "command-message",
                    body: "mcp"
                },
                Piece::Tagged {
                    name: "command-name",
                    body: "/mcp"
                },
                Piece::Tagged {
                    name: "command-args",
                    body: "list"
                },
                Piece::Text("Then <b>this</b>\n"),
                Piece::Tagged {
                    name: "system-reminder",
                    body: "\nbe brief\n"
                },
                Piece::Text("end"),
            ]
        );
        let html = plain(text).into_string();
        assert!(
            html.contains("<div class=\"quiet command\"><span class=\"label\">command</span> <code>/mcp list</code></div>"),
            "{html}"
        );
        assert!(
            html.contains("<summary>system reminder</summary>"),
            "{html}"
        );
        assert!(html.contains("Then &lt;b&gt;this&lt;/b&gt;"), "{html}");
        assert_eq!(html.matches("class=\"quiet").count(), 2, "{html}");
    }

    #[test]
    fn html_elements_and_unclosed_tags_stay_text() {
        for text in [
            "<div>x</div>",
            "<b>bold</b>",
            "<system-reminder> never closed",
            "a <system-reminder>mid-line</system-reminder>",
            "<Sys-Tag>x</Sys-Tag>",
            "<-x>y</-x>",
        ] {
            assert_eq!(pieces(text), vec![Piece::Text(text)], "{text}");
        }
        assert_eq!(pieces(""), vec![]);
    }
}
