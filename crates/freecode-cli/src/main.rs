//! `freecode`: the command-line face of freecode's session store.
//!
//! Data goes to stdout (`--json` for machines), logs and diagnostics to stderr (filtered by
//! `FREECODE_LOG` or `RUST_LOG`), colour only on a terminal and never with `NO_COLOR`. Exit
//! codes are decided once, here: 0 success (a closed pipe counts), 1 a user error (bad id,
//! unknown session, held lock, refused confirmation), 2 anything unexpected.

mod cli;
mod commands;
mod otlp;
mod render;
mod trace_render;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::Cli;

/// An error the user can fix: exit status 1.
#[derive(Debug)]
pub struct UserError(pub String);

impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UserError {}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("FREECODE_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new("warn"));
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
    use freecode_store::StoreError;
    for cause in err.chain() {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::BrokenPipe
        {
            return 0;
        }
        if cause.downcast_ref::<UserError>().is_some()
            || cause.downcast_ref::<freecode_core::IdError>().is_some()
        {
            return 1;
        }
        if let Some(e) = cause.downcast_ref::<StoreError>() {
            return match e {
                StoreError::Io { source, .. }
                    if source.kind() == std::io::ErrorKind::BrokenPipe =>
                {
                    0
                }
                StoreError::Io { .. } | StoreError::BadJson { .. } => 2,
                _ => 1,
            };
        }
    }
    2
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    match cli.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let code = exit_code(&err);
            if code != 0 {
                eprintln!("error: {err:#}");
                if let Some(hint) = render::hint_for(&err) {
                    eprintln!("hint: {hint}");
                }
            }
            ExitCode::from(code)
        }
    }
}
