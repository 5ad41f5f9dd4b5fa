//! `freecode demo`: the whole layer on a fresh machine, offline, in one command.
//!
//! In a fresh home (a new temporary directory unless `--home` is given, so a real
//! `~/.freecode` is never touched) it runs the agent on a prompt against the scripted provider
//! built into the binary (tools, a refused write, streamed answers — all recorded), lists the
//! sessions, prints the run's trace, then shares the session through an embedded share server on
//! loopback (redacted, encrypted, expiring) and imports it back as a new session. Each step is
//! the ordinary command, printed before it runs.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

use crate::cli::Cli;
use crate::render::print_line;

/// Arguments of `freecode demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// The prompt for the scripted agent.
    #[arg(default_value = "Look around this project and tell me what it is.")]
    prompt: String,
    /// The project directory the agent's tools read [default: the current directory].
    #[arg(long, value_name = "PATH")]
    project: Option<PathBuf>,
}

impl DemoArgs {
    /// Runs the demo in `home`, or in a fresh temporary home when `None`.
    pub fn run(self, home: Option<PathBuf>) -> anyhow::Result<()> {
        let home = match home {
            Some(h) => h,
            None => {
                // A new, unpredictable name, created exclusively (0700): never someone else's.
                let dir =
                    std::env::temp_dir().join(format!("freecode-demo-{}", uuid::Uuid::new_v4()));
                freecode_store::fsutil::create_dir_exclusive(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                dir
            }
        };
        let project = match self.project {
            Some(p) => p,
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        print_line(&format!("# a fresh home: {}", home.display()))?;
        let home_s = home.display().to_string();
        let project_s = project.display().to_string();
        let step = |args: &[&str]| -> anyhow::Result<()> {
            print_line(&format!("\n$ freecode {}", args.join(" ")))?;
            let mut argv = vec!["freecode", "--home", home_s.as_str()];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv)?.run()
        };
        step(&[
            "run",
            "--provider",
            "scripted",
            "--project",
            &project_s,
            &self.prompt,
        ])?;
        step(&["session", "list"])?;
        step(&["trace", "--last"])?;

        // Sharing through an embedded share server on loopback, its blobs in the home.
        let server = freecode_remote::server::spawn(freecode_remote::server::ServerConfig {
            listen: "127.0.0.1:0".parse().context("loopback address")?,
            store: freecode_remote::blob::StoreSpec::File(home.join("share-server")),
            ..Default::default()
        })?;
        let home_dir = freecode_store::Home::new(&home);
        let store = freecode_ops::sessions::open(&home_dir)?;
        let listing = freecode_ops::sessions::list(
            &home_dir,
            &freecode_ops::sessions::ListRequest::default(),
        )?;
        let id = listing
            .sessions
            .first()
            .map(|m| m.id.clone())
            .context("the run made no session")?;
        step(&["session", "export", &id, "--to", &server.url, "--dry-run"])?;
        print_line(&format!(
            "\n$ freecode session export {id} --to {}",
            server.url
        ))?;
        let shared = freecode_ops::share::share(
            &store,
            &freecode_core::SessionId::new(id.as_str())?,
            &freecode_ops::share::ExportRequest {
                to: Some(server.url.clone()),
                ..Default::default()
            },
            &mut freecode_ops::Silent,
        )?;
        if let Some(e) = shared.unrecorded {
            return Err(e.into());
        }
        print_line(&shared.exported.url)?;
        step(&["share", "list"])?;
        step(&["session", "import", &shared.exported.url])?;
        step(&["session", "list"])?;
        print_line(&format!(
            "\n# everything is in {}: explore it with `freecode --home {} session show <id>`",
            home.display(),
            home.display()
        ))?;
        Ok(())
    }
}
