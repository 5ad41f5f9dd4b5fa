//! `freecode`: the command-line face of freecode's session store.
//!
//! Data goes to stdout (`--json` for machines), logs and diagnostics to stderr (filtered by
//! `FREECODE_LOG` or `RUST_LOG`, or `-q`/`-v`), colour as `--color` says (by default only on a
//! terminal, never with `NO_COLOR`, always with `CLICOLOR_FORCE`/`FORCE_COLOR`). Exit
//! codes are decided once, here: 0 success (a closed pipe counts), 1 a user error (bad id,
//! unknown session, held lock, refused confirmation; a search without a match, silently, as grep
//! does), 2 anything unexpected, 130 a one-shot run
//! stopped by Ctrl+C ([`Interrupted`]).

mod autosync;
mod cli;
mod commands;
mod pager;
mod progress;
mod render;
mod signals;
mod trace_render;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::Cli;

/// mimalloc: a load allocates per part and string on two threads and frees across them, where
/// glibc's malloc (arenas, `malloc_consolidate`) took a quarter of `session show --json`. Built
/// `no_thp` (the workspace manifest says why).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// An error the user can fix: exit status 1.
#[derive(Debug)]
pub struct UserError(pub String);

impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UserError {}

/// A one-shot command stopped by the user's Ctrl+C after saving what it had: exit status 130
/// (128 + SIGINT), as shells report a process killed by the signal.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// A search that found nothing: exit status 1 with nothing on stderr, as grep and rg.
#[derive(Debug)]
pub struct NoMatch;

impl std::fmt::Display for NoMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no match")
    }
}

impl std::error::Error for NoMatch {}

/// Logs to stderr: `-q`/`-v` (`forced`) beat `FREECODE_LOG`/`RUST_LOG`, which beat `default`.
fn init_logging(default: &str, forced: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match forced {
        Some(level) => EnvFilter::new(level),
        None => EnvFilter::try_from_env("FREECODE_LOG")
            .or_else(|_| EnvFilter::try_from_default_env())
            .unwrap_or_else(|_| EnvFilter::new(default)),
    };
    let ansi = render::color_enabled(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .without_time()
        .with_target(false)
        .init();
}

fn exit_code(err: &anyhow::Error) -> u8 {
    use freecode_ops::ErrorKind;
    if render::is_broken_pipe(err) {
        return 0;
    }
    for cause in err.chain() {
        if cause.downcast_ref::<Interrupted>().is_some() {
            return 130;
        }
        if cause.downcast_ref::<NoMatch>().is_some() || cause.downcast_ref::<UserError>().is_some()
        {
            return 1;
        }
        // A share server that cannot start: a port in use, an unusable setting.
        if let Some(e) = cause.downcast_ref::<freecode_remote::server::ServerError>() {
            return match e {
                freecode_remote::server::ServerError::Bind { .. }
                | freecode_remote::server::ServerError::Config(_) => 1,
                _ => 2,
            };
        }
        // The operations' errors and those of the layers under them, by kind (the one map
        // every front end has: here an exit status).
        if let Some(kind) = freecode_ops::kind_of(cause) {
            return match kind {
                ErrorKind::Invalid | ErrorKind::NotFound | ErrorKind::Busy | ErrorKind::Failed => 1,
                ErrorKind::Internal => 2,
            };
        }
    }
    2
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    render::set_global(cli.color, cli.quiet);
    init_logging(cli.default_log_level(), cli.flag_log_level());
    match cli.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let code = exit_code(&err);
            let quiet = err.downcast_ref::<NoMatch>().is_some();
            if code != 0 && code != 130 && !quiet {
                // Best effort: a closed stderr must not turn an error into a panic.
                let mut stderr = std::io::stderr().lock();
                let _ = writeln!(stderr, "error: {err:#}");
                if let Some(hint) = render::hint_for(&err) {
                    let _ = writeln!(stderr, "hint: {hint}");
                }
            }
            ExitCode::from(code)
        }
    }
}
