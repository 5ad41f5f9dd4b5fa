//! `freecode ui`: the local web viewer ([`freecode_ui`]) on loopback, its URL (with the home's
//! token, the same from run to run) printed on stdout.

use clap::Args;
use freecode_store::Home;

/// `freecode ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    /// Address to listen on: a loopback address (127.x.y.z); port 0 picks a free one for this
    /// run. Default: 127.0.0.1 on the port of the last run, so the address stays the same.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Print the URL without opening a browser.
    #[arg(long)]
    no_open: bool,
    /// Make a new token (kept in the home): links, bookmarks and tabs from before stop working.
    #[arg(long)]
    new_token: bool,
    /// Show secrets as they are: by default every page and API answer is redacted as `session
    /// export` redacts (a page saved from the browser leaks nothing).
    #[arg(long)]
    no_redact: bool,
}

impl UiArgs {
    /// Serves until Ctrl+C.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        let opts = freecode_ui::Options {
            listen: self.listen,
            no_open: self.no_open,
            new_token: self.new_token,
            no_redact: self.no_redact,
        };
        if self.no_redact {
            tracing::warn!(
                "--no-redact: the viewer shows secrets as they are; a page saved from it holds them"
            );
        }
        freecode_ui::serve(home, &opts, |url| {
            use std::io::Write;
            writeln!(std::io::stdout().lock(), "{url}")
        })?;
        Ok(())
    }
}
