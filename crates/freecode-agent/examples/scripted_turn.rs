//! An agent that links freecode as a library: one scripted turn in a fresh temporary home,
//! then the session listed, its trace folded and its stats read, all through
//! `freecode-agent` and `freecode-ops` (no binary, no front end).
//!
//! `cargo run -p freecode-agent --example scripted_turn` prints what it did; `cargo test`
//! runs it too (this example is built as a test and its test calls the same `run`).

use std::time::Duration;

use freecode_agent::provider::ProviderConfig;
use freecode_agent::{AgentConfig, AgentLoop, InterruptFlag, Interrupts, SessionTarget};
use freecode_ops::sessions::{self, ListRequest};
use freecode_ops::{Home, Silent};

/// What the run found, for `main` to print and the test to check.
#[derive(Debug)]
struct Report {
    session_id: String,
    turn: freecode_agent::TurnOutcome,
    listed: Vec<String>,
    model_calls: u64,
    tool_calls: usize,
}

/// Runs one scripted turn in `home` on the project `project`, then reads it back.
fn run(home: &Home, project: &std::path::Path) -> freecode_ops::Result<Report> {
    let store = sessions::open(home)?;
    let mut config = AgentConfig::new(ProviderConfig::Scripted {
        chunk_delay: Duration::ZERO,
    });
    config.max_iterations = 4;
    let target = SessionTarget::New {
        project: freecode_ops::scope::project_directory(Some(project))?,
    };
    // No signal handler here: this program has none to route. A host would feed SIGINT to
    // `Interrupts::on_sigint`; a raised flag stops the turn the same way.
    let mut agent = AgentLoop::open(&store, target, config, Interrupts::new())?;
    let turn = agent.run_turn("Look around this project.", &InterruptFlag::new())?;
    let session_id = agent.session_id().to_string();
    drop(agent);

    let listed = sessions::list(home, &ListRequest::default())?
        .sessions
        .into_iter()
        .map(|m| m.id)
        .collect();
    let id = freecode_core::SessionId::new(session_id.as_str())?;
    let trace = freecode_ops::trace::trace(home, &id)?
        .ok_or_else(|| freecode_ops::trace::no_events(&id))?;
    let stats = freecode_ops::search::stats(
        home,
        &freecode_store::index::StatsScope::Session(id),
        &mut Silent,
    )?;
    Ok(Report {
        session_id,
        turn,
        listed,
        model_calls: stats.stats.model_calls,
        // Calls that ran, and calls refused (the scripted turn tries a write in read-only mode).
        tool_calls: trace.tool_spans.len() + trace.denied_spans.len(),
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let home = Home::new(dir.path().join("home"));
    let report = run(&home, dir.path())?;
    println!("home      {}", home.root().display());
    println!("session   {} ({:?})", report.session_id, report.turn.status);
    println!(
        "answer    {}",
        report.turn.text.lines().next().unwrap_or("")
    );
    println!(
        "listed    {} session(s); {} model call(s), {} tool call(s) traced (run or refused)",
        report.listed.len(),
        report.model_calls,
        report.tool_calls
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_scripted_turn_is_listed_traced_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("home"));
        let report = run(&home, dir.path()).unwrap();
        assert_eq!(report.turn.status, freecode_agent::TurnStatus::Completed);
        assert_eq!(report.listed, std::slice::from_ref(&report.session_id));
        assert!(!report.turn.text.is_empty());
        assert_eq!(u64::from(report.turn.model_calls), report.model_calls);
        assert_eq!(report.turn.tool_calls.len(), report.tool_calls);
        assert!(
            report.turn.denied() > 0 && report.turn.denied() < report.tool_calls,
            "the scripted turn runs a tool and is refused a write"
        );
    }
}
