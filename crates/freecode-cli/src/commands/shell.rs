//! `freecode completions SHELL` and `freecode man [--dir DIR]`: the shell's tab completion
//! (clap_complete) and manual pages (clap_mangen), both generated from the command definitions,
//! so they can never drift from what the binary accepts.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, CommandFactory};

use crate::UserError;

/// `freecode completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// `freecode man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one page per command (`freecode.1`, `freecode-session-list.1`, …) into this existing
    /// directory; without it, the page of `freecode` itself goes to stdout.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the completion script for `a.shell` to stdout.
pub fn completions(a: CompletionsArgs) -> anyhow::Result<()> {
    let mut cmd = crate::cli::Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(a.shell, &mut cmd, "freecode", &mut out);
    out.flush()?;
    Ok(())
}

/// Writes the manual pages: every command's into `--dir`, or the root page to stdout.
pub fn man(a: ManArgs) -> anyhow::Result<()> {
    let cmd = crate::cli::Cli::command();
    match a.dir {
        Some(dir) => {
            if !dir.is_dir() {
                return Err(UserError(format!(
                    "--dir {}: not a directory (create it first)",
                    dir.display()
                ))
                .into());
            }
            clap_mangen::generate_to(cmd, &dir)
                .map_err(|e| anyhow::Error::new(e).context(format!("write {}", dir.display())))?;
            // A note, not data: stdout stays empty for scripts.
            if !crate::render::quiet() {
                eprintln!("wrote the manual pages into {}", dir.display());
            }
            Ok(())
        }
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(cmd).render(&mut out)?;
            out.flush()?;
            Ok(())
        }
    }
}
