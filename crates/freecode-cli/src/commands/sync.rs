//! `freecode sync …`: home sync across this person's machines (`init`, `key`, `join`, `status`,
//! `push`, `pull`, `now`, `rotate`: [`freecode_ops::home_sync`]), and `sync serve`, the server
//! of shares and of home sync ([`freecode_remote::server`]).

use crate::UserError;
use crate::progress::Feedback;
use crate::render::{plural, print_json};
use anyhow::Context;
use clap::{Args, Subcommand};
use freecode_ops::scope::parse_timeout;
use freecode_store::Home;
use std::path::PathBuf;
use std::time::Duration;

/// `freecode sync …`.
#[derive(Debug, Subcommand)]
pub enum SyncCommand {
    /// Run the share server (and sync server) until Ctrl+C or SIGTERM.
    Serve(SyncServeArgs),
    /// Start syncing this home: make the sync key and register with a server.
    Init(SyncInitArgs),
    /// Print the sync key as 24 words, to `sync join` another machine (last line of output).
    Key(SyncJsonArgs),
    /// Join the machines syncing with a server, with the phrase `sync key` printed there: read
    /// from standard input (`freecode sync key | ssh other freecode sync join --server URL`, or
    /// pasted when asked) or `--phrase-file`, never from the command line, where other users
    /// can read it.
    Join(SyncJoinArgs),
    /// What would move: sessions to push, records to pull.
    Status(SyncJsonArgs),
    /// Send this machine's changes.
    Push(SyncJsonArgs),
    /// Take the other machines' changes.
    Pull(SyncJsonArgs),
    /// Pull, then push.
    Now(SyncNowArgs),
    /// Make a new sync key: the server's records get new key wraps (their content is not
    /// sent again); the other machines `sync join` with the new phrase and keep their state.
    Rotate(SyncJsonArgs),
    /// Make room in a group a member filled: remove from the server each other machine's log
    /// of which no record opens as anything a machine writes (garbage, 1-byte records); the
    /// other machines drop their copies. Nothing that opens is touched.
    Compact(SyncJsonArgs),
}

/// `sync now`.
#[derive(Debug, Args)]
pub struct SyncNowArgs {
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
    /// The background sync `sync.auto` starts after a turn: waits for a running sync, does
    /// nothing when another is already waiting, and prints one line with the time to stderr.
    #[arg(long, hide = true)]
    auto: bool,
}

/// `sync init`.
#[derive(Debug, Args)]
pub struct SyncInitArgs {
    /// The sync server (`freecode sync serve`): https://…, or http:// to loopback.
    #[arg(long, value_name = "URL")]
    server: String,
    /// Set up again, with a new key, even if this machine already syncs.
    #[arg(long)]
    force: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

/// `sync join`.
#[derive(Debug, Args)]
pub struct SyncJoinArgs {
    /// The sync server the other machines use.
    #[arg(long, value_name = "URL")]
    server: String,
    /// The 24 words `freecode sync key` printed. Left out, they are read from standard input
    /// (asked for on a terminal). On the command line they still work, with a warning: every
    /// local user can read a command line (`ps`).
    #[arg(value_name = "PHRASE", num_args = 0..)]
    phrase: Vec<String>,
    /// Read the key (its words, or the 64 hex characters of `state/sync/key`) from a file.
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with = "phrase",
        alias = "key-file"
    )]
    phrase_file: Option<PathBuf>,
    /// Set up again even if this machine already syncs.
    #[arg(long)]
    force: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

/// `sync key|status|push|pull|now`.
#[derive(Debug, Args)]
pub struct SyncJsonArgs {
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

fn print_setup(setup: &freecode_ops::home_sync::SyncSetup, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(setup);
    }
    println!("syncing with {} as host {}", setup.server, setup.host);
    println!("sync key id {}", setup.key_id);
    Ok(())
}

fn run_sync(
    json: bool,
    f: impl FnOnce(&mut Feedback) -> freecode_ops::Result<freecode_ops::home_sync::SyncReport>,
) -> anyhow::Result<()> {
    // Asked for, and the first sync of a big home is long: the bar at once (as `index rebuild`).
    let mut feedback = Feedback::with_delay("syncing", std::time::Duration::ZERO);
    let report = f(&mut feedback);
    feedback.finish();
    print_report(&report?, json)
}

fn print_report(report: &freecode_ops::home_sync::SyncReport, json: bool) -> anyhow::Result<()> {
    // Warnings, with `--json` too. Each slot once (later pulls try it again quietly); a flood is summed up.
    const SKIPPED_SHOWN: usize = 10;
    for s in report.skipped.iter().take(SKIPPED_SHOWN) {
        eprintln!(
            "warning: record {} of machine {}'s log {} {}: passed over (tried again on later \
             pulls; the records after it still apply)",
            s.index, s.host, s.log, s.why
        );
    }
    if report.skipped.len() > SKIPPED_SHOWN {
        eprintln!(
            "warning: and {} more records that do not open were passed over (`--json` lists them)",
            report.skipped.len() - SKIPPED_SHOWN
        );
    }
    if json {
        return print_json(report);
    }
    for f in &report.forks {
        eprintln!(
            "session {} was continued on another machine too: this machine's changes are kept as {}",
            f.session_id, f.fork_id
        );
    }
    for id in &report.busy {
        eprintln!("session {id} is in use here; it syncs next time");
    }
    if report.refilled > 0 {
        eprintln!(
            "the server had lost {}: sent again from this machine's copies",
            plural(report.refilled, "record", "records")
        );
    }
    if report.mended > 0 {
        eprintln!(
            "mended the key wrap of {} another machine could not open, from this machine's copies",
            plural(report.mended, "record", "records")
        );
    }
    println!(
        "pushed {} ({} bytes sent), pulled {} ({} bytes received), {} purged",
        plural(report.sessions_pushed as u64, "session", "sessions"),
        report.bytes_sent,
        plural(report.sessions_pulled as u64, "session", "sessions"),
        report.bytes_received,
        report.purged.len()
    );
    Ok(())
}

/// `sync serve`.
#[derive(Debug, Args)]
pub struct SyncServeArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    listen: std::net::SocketAddr,
    /// Where blobs live: file:PATH or s3://BUCKET/PREFIX (S3 settings from AWS_* variables)
    /// [default: file:<home>/share-server].
    #[arg(long, value_name = "STORE")]
    store: Option<String>,
    /// Require this bearer token on uploads.
    #[arg(long, env = "FREECODE_SYNC_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// The base of the URLs handed out [default: http://<Host header>].
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// Largest upload, bytes (clients read it from `GET /limits` before they build a share).
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024)]
    max_body: usize,
    /// Longest share lifetime, days.
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    max_expiry_days: u64,
    /// Seconds between sweeps of expired shares.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    sweep_interval: u64,
    /// Close a connection whose request head has not arrived in full this long after the
    /// accept (or after its first byte, on a reused connection): seconds, or 500ms, 10s, 2m
    /// [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    header_timeout: Option<Duration>,
    /// Close a keep-alive connection with no request (or a response its client stops
    /// reading) after this long [default: 60s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    idle_timeout: Option<Duration>,
    /// Answer 408 and close the connection when a request's body has not fully arrived this
    /// long after the request got its slot [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    body_timeout: Option<Duration>,
    /// Most connections open at once; past it a new one evicts the oldest idle connection,
    /// or is closed at once when all are busy [default: 512].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,
    /// Most connections open at once from one client address, enforced the same way
    /// [default: 64].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections_per_ip: Option<u32>,
    /// Most bytes one home-sync group may store (past it, 413 naming the limit)
    /// [default: 10 GiB].
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    group_max_bytes: Option<u64>,
    /// Most objects (records, claims, key rings) one home-sync group may store
    /// [default: 1000000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    group_max_objects: Option<u64>,
    /// Most requests a minute from one home-sync group, per server process (past it, 429
    /// with Retry-After) [default: 6000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    group_requests_per_minute: Option<u32>,
    /// Without --api-key: most new home-sync groups one client address may make an hour
    /// (past it, 429) [default: 20].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    new_groups_per_address: Option<u32>,
    /// Without --api-key: most new home-sync groups this server process makes an hour
    /// [default: 1000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    new_groups_per_hour: Option<u32>,
    /// Most requests a minute from one client address with credentials that name no group
    /// here (or one rotated out) [default: 120].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    unknown_credentials_per_minute: Option<u32>,
}

/// The sync key's text from `source` (a file or standard input), bounded: a key file is 64
/// hex characters and a line per older key, a phrase 24 words.
fn read_phrase(
    source: std::io::Result<impl std::io::Read>,
    what: impl std::fmt::Display,
) -> anyhow::Result<String> {
    use std::io::Read as _;
    const MAX: u64 = 64 * 1024;
    let user = |m: String| anyhow::Error::new(UserError(m));
    let mut text = String::new();
    source
        .and_then(|r| r.take(MAX + 1).read_to_string(&mut text))
        .map_err(|e| user(format!("reading the sync key from {what}: {e}")))?;
    if text.len() as u64 > MAX {
        return Err(user(format!(
            "{what} holds more than {MAX} bytes: not a sync key"
        )));
    }
    if text.trim().is_empty() {
        return Err(user(format!(
            "no sync key on {what}: pipe in the 24 words `freecode sync key` printed on the \
             other machine, or pass --phrase-file"
        )));
    }
    Ok(text)
}

impl SyncCommand {
    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        use freecode_ops::home_sync;
        match self {
            Self::Init(a) => {
                let setup = home_sync::init(home, &a.server, a.force)?;
                print_setup(&setup, a.json)?;
                if !a.json {
                    println!(
                        "on another machine: freecode sync join --server {} (and paste the words `freecode sync key` prints here)",
                        setup.server
                    );
                }
                Ok(())
            }
            Self::Join(a) => {
                let text = match &a.phrase_file {
                    Some(p) => read_phrase(std::fs::File::open(p), p.display())?,
                    None if a.phrase.is_empty() => {
                        use std::io::{BufRead as _, IsTerminal as _, Read as _};
                        if std::io::stdin().is_terminal() {
                            // Pasted: the words end with the line (no Ctrl+D to type).
                            eprint!(
                                "the 24 words `freecode sync key` printed on the other machine: "
                            );
                            let mut line = Vec::new();
                            std::io::stdin()
                                .lock()
                                .take(64 * 1024)
                                .read_until(b'\n', &mut line)
                                .context("reading the sync key from the terminal")?;
                            read_phrase(Ok(&line[..]), "the terminal")?
                        } else {
                            read_phrase(Ok(std::io::stdin()), "standard input")?
                        }
                    }
                    None => {
                        tracing::warn!(
                            "the phrase on the command line can be read by every user of this \
                             machine (ps, /proc): pipe it in instead (`freecode sync key | \
                             freecode sync join --server URL`) or use --phrase-file"
                        );
                        a.phrase.join(" ")
                    }
                };
                let setup = home_sync::join(home, &a.server, &text, a.force)?;
                print_setup(&setup, a.json)
            }
            Self::Key(a) => {
                let phrase = home_sync::key_phrase(home)?;
                if a.json {
                    return print_json(&home_sync::SyncPhrase { phrase });
                }
                eprintln!(
                    "the sync key: anyone with these words can read this home's synced sessions"
                );
                println!("{phrase}");
                Ok(())
            }
            Self::Status(a) => {
                let st = home_sync::status(home)?;
                if a.json {
                    return print_json(&st);
                }
                println!("server {}  host {}  key {}", st.server, st.host, st.key_id);
                println!(
                    "{} on the server; {} synced here, {} to push, {} to pull",
                    plural(st.hosts as u64, "machine", "machines"),
                    plural(st.synced as u64, "session", "sessions"),
                    plural(st.to_push as u64, "session", "sessions"),
                    plural(st.to_pull, "record", "records"),
                );
                Ok(())
            }
            Self::Push(a) => run_sync(a.json, |p| home_sync::push(home, p)),
            Self::Pull(a) => run_sync(a.json, |p| home_sync::pull(home, p)),
            Self::Compact(a) => {
                let r = home_sync::compact(home)?;
                if a.json {
                    return print_json(&r);
                }
                println!(
                    "removed {} ({} bytes) in {} that never opened",
                    plural(r.records, "record", "records"),
                    r.bytes,
                    plural(r.removed.len() as u64, "machine's log", "machines' logs"),
                );
                Ok(())
            }
            Self::Rotate(a) => {
                let r = home_sync::rotate(home)?;
                if a.json {
                    return print_json(&r);
                }
                println!(
                    "new sync key id {}: {} on the server rewrapped ({} bytes of key wraps sent, no content), {} kept here",
                    r.key_id,
                    plural(r.rewrapped, "record", "records"),
                    r.bytes_sent,
                    r.kept_rewrapped
                );
                if r.skipped > 0 {
                    eprintln!(
                        "warning: {} on the server do not open and no copy here mends them: left as they are",
                        plural(r.skipped, "record", "records")
                    );
                }
                println!(
                    "on the other machines: freecode sync join --server {} (and paste the new words `freecode sync key` prints here)",
                    r.server
                );
                Ok(())
            }
            Self::Now(a) if a.auto => {
                let when = freecode_ops::human::local_time(freecode_store::now_ms());
                match home_sync::auto(home) {
                    Ok(Some(r)) => eprintln!(
                        "{when} sync.auto: pushed {} ({} bytes), pulled {} ({} bytes), {} forks, {} busy",
                        plural(r.sessions_pushed as u64, "session", "sessions"),
                        r.bytes_sent,
                        plural(r.sessions_pulled as u64, "session", "sessions"),
                        r.bytes_received,
                        r.forks.len(),
                        r.busy.len()
                    ),
                    Ok(None) => eprintln!("{when} sync.auto: another sync was already waiting"),
                    Err(e) => {
                        eprintln!("{when} sync.auto: error: {e}");
                        return Err(e.into());
                    }
                }
                Ok(())
            }
            Self::Now(a) => run_sync(a.json, |p| home_sync::now(home, p)),
            Self::Serve(a) => {
                let store = match a.store {
                    Some(s) => s
                        .parse::<freecode_remote::blob::StoreSpec>()
                        .map_err(|e| UserError(format!("--store {s:?}: {e}")))?,
                    None => {
                        freecode_remote::blob::StoreSpec::File(home.root().join("share-server"))
                    }
                };
                let defaults = freecode_remote::server::ServerConfig::default();
                let count = |n: Option<u32>, default: usize| {
                    n.map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
                };
                let config = freecode_remote::server::ServerConfig {
                    listen: a.listen,
                    store,
                    api_key: a.api_key.filter(|k| !k.is_empty()),
                    public_url: a.public_url,
                    max_body: a.max_body,
                    max_ttl: Duration::from_secs(a.max_expiry_days.max(1).saturating_mul(86_400)),
                    sweep_interval: Duration::from_secs(a.sweep_interval.max(1)),
                    header_timeout: a.header_timeout.unwrap_or(defaults.header_timeout),
                    idle_timeout: a.idle_timeout.unwrap_or(defaults.idle_timeout),
                    body_timeout: a.body_timeout.unwrap_or(defaults.body_timeout),
                    max_connections: count(a.max_connections, defaults.max_connections),
                    max_connections_per_ip: count(
                        a.max_connections_per_ip,
                        defaults.max_connections_per_ip,
                    ),
                    group_limits: freecode_remote::server::GroupLimits {
                        max_bytes: a.group_max_bytes.unwrap_or(defaults.group_limits.max_bytes),
                        max_objects: a
                            .group_max_objects
                            .unwrap_or(defaults.group_limits.max_objects),
                        requests_per_minute: a
                            .group_requests_per_minute
                            .unwrap_or(defaults.group_limits.requests_per_minute),
                    },
                    stranger_limits: freecode_remote::server::StrangerLimits {
                        new_groups_per_address: a
                            .new_groups_per_address
                            .unwrap_or(defaults.stranger_limits.new_groups_per_address),
                        new_groups_per_hour: a
                            .new_groups_per_hour
                            .unwrap_or(defaults.stranger_limits.new_groups_per_hour),
                        unknown_per_address_per_minute: a
                            .unknown_credentials_per_minute
                            .unwrap_or(defaults.stranger_limits.unknown_per_address_per_minute),
                    },
                    ..defaults
                };
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the async runtime")?;
                rt.block_on(freecode_remote::server::serve(config, shutdown_signal()))?;
                Ok(())
            }
        }
    }
}

/// Resolves on Ctrl+C or SIGTERM: the server then stops gracefully.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down");
}
