//! One module per top-level command.

pub mod config;
pub mod demo;
pub mod doctor;
pub mod import;
pub mod index;
pub mod mcp;
pub mod run;
pub mod schema;
pub mod serve;
pub mod session;
pub mod share;
pub mod shell;
pub mod sync;
pub mod trace;
pub mod ui;
pub mod usage;

/// The redaction of a page a person may attach (`--html`): the home's rules, as `session
/// export` redacts, unless `no_redact` (then a warning first).
pub fn page_redactor(
    home: &freecode_store::Home,
    no_redact: bool,
) -> anyhow::Result<freecode_ui::redact::PageRedactor> {
    if no_redact {
        tracing::warn!(
            "--no-redact: the page holds the session's secrets as they are; do not attach or \
             share it"
        );
    }
    Ok(freecode_ui::redact::PageRedactor::for_home(
        home, !no_redact,
    )?)
}

/// Says on stderr how many secrets a page left out, if any.
pub fn say_redacted(r: &freecode_ui::redact::PageRedactor, page: &std::path::Path) {
    let n = r.replaced();
    if n > 0 {
        let to = if page == std::path::Path::new("-") {
            "the page on standard output".to_owned()
        } else {
            page.display().to_string()
        };
        eprintln!(
            "{} redacted in {to} (`session export --dry-run` lists them; --no-redact keeps them)",
            freecode_ops::human::plural(n as u64, "secret", "secrets"),
        );
    }
}
