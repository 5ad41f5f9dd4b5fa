//! `freecode ui`: the local web viewer ([`freecode_ui`]) on loopback, its URL (with the run's
//! token) printed on stdout.

use clap::Args;
use freecode_store::Home;

/// `freecode ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    /// Address to listen on: a loopback address (127.x.y.z); port 0 picks a free one.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: String,
    /// Print the URL without opening a browser.
    #[arg(long)]
    no_open: bool,
}

impl UiArgs {
    /// Serves until Ctrl+C.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        let opts = freecode_ui::Options {
            listen: self.listen,
            no_open: self.no_open,
        };
        freecode_ui::serve(home, &opts, |url| {
            use std::io::Write;
            writeln!(std::io::stdout().lock(), "{url}")
        })?;
        Ok(())
    }
}
