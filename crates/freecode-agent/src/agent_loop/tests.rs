//! Unit tests of `agent_loop`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use freecode_core::rollout::Event;
use freecode_store::rollout::{events_path, read_events};
use freecode_store::{Home, SessionStore};

use super::*;

struct Fixture {
    _tmp: tempfile::TempDir,
    store: SessionStore,
    project: String,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("a.txt"), "alpha\n").unwrap();
    let store = SessionStore::open(Home::new(tmp.path().join("h"))).unwrap();
    Fixture {
        project: project.to_str().unwrap().to_owned(),
        store,
        _tmp: tmp,
    }
}

fn config() -> AgentConfig {
    let mut c = AgentConfig::new(ProviderConfig::Scripted {
        chunk_delay: Duration::ZERO,
    });
    c.recorder = RecorderConfig {
        enabled: true,
        ..RecorderConfig::default()
    };
    c
}

fn open(f: &Fixture, target: SessionTarget) -> AgentLoop {
    AgentLoop::open(&f.store, target, config(), Interrupts::new()).unwrap()
}

/// A new session whose turn is stopped (as by Ctrl+C) at the first event `stop` picks.
fn open_stopping_on(f: &Fixture, flag: &InterruptFlag, stop: fn(&AgentEvent) -> bool) -> AgentLoop {
    let raise = flag.clone();
    open(
        f,
        SessionTarget::New {
            project: f.project.clone(),
        },
    )
    .on_event(move |e| {
        if stop(e) {
            raise.raise();
        }
    })
}

fn events(f: &Fixture, id: &SessionId) -> Vec<Event> {
    let mut v = Vec::new();
    read_events(&events_path(f.store.home(), id), |e| v.push(e)).unwrap();
    v
}

fn kinds(ev: &[Event]) -> Vec<&'static str> {
    ev.iter().map(|e| e.kind.type_name()).collect()
}

#[test]
fn a_long_history_is_compacted_before_the_turn_and_recorded() {
    let f = fixture();
    let mut c = config();
    c.compact_at_tokens = Some(1);
    let short = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = short.clone();
    let mut agent = AgentLoop::open(
        &f.store,
        SessionTarget::New {
            project: f.project.clone(),
        },
        c,
        Interrupts::new(),
    )
    .unwrap()
    .on_event(move |e| {
        if let AgentEvent::CompactionShort { reason, .. } = e {
            seen.lock().unwrap().push(reason.clone());
        }
    });
    let flag = InterruptFlag::new();
    for prompt in ["first question", "second question", "third question"] {
        agent.run_turn(prompt, &flag).unwrap();
    }
    let id = agent.session_id().clone();
    assert!(
        !kinds(&events(&f, &id)).contains(&"compact.occurred"),
        "two user turns or fewer: nothing to trim"
    );
    agent.run_turn("fourth question", &flag).unwrap();
    agent.run_turn("fifth question", &flag).unwrap();
    drop(agent);
    // A 1-token threshold cannot be met: said once in the loop's life, not every turn.
    let short = short.lock().unwrap();
    assert_eq!(short.len(), 1, "{short:?}");
    assert!(short[0].contains("last 2 user turns"), "{short:?}");
    let ev = events(&f, &id);
    let k = kinds(&ev);
    let at = k.iter().position(|k| *k == "compact.occurred").unwrap();
    assert_eq!(
        k[at + 1],
        "turn.started",
        "compaction comes before the turn"
    );
    let msgs = f.store.messages(&id).unwrap().messages;
    let users: Vec<String> = msgs
        .iter()
        .filter(|m| m.role == Role::User)
        .map(StoredMessage::text)
        .collect();
    assert_eq!(
        users,
        ["third question", "fourth question", "fifth question"]
    );
    let memory = f.store.compaction_memory(&id).unwrap().unwrap();
    let summary = &memory.latest_summary().unwrap().content;
    assert!(summary.contains("- first question"), "{summary}");
    // The next loop on this session starts from the summary.
    let agent = open(&f, SessionTarget::Resume(id));
    assert!(agent.system_prompt().contains("- first question"));
}

#[test]
fn ctrl_c_while_a_tool_runs_closes_the_call_and_marks_its_line() {
    let f = fixture();
    let flag = InterruptFlag::new();
    let mut agent = open_stopping_on(&f, &flag, |e| matches!(e, AgentEvent::ToolStarted { .. }));
    let out = agent.run_turn("look", &flag).unwrap();
    assert_eq!(out.status, TurnStatus::Interrupted);
    assert_eq!(out.tool_calls[0].outcome, "interrupted");
    let id = agent.session_id().clone();
    drop(agent);

    let msgs = f.store.messages(&id).unwrap().messages;
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[1].text(), "I'll look around the project first.");
    assert!(!msgs[1].is_interrupted());
    let tool = &msgs[2];
    assert!(tool.is_interrupted(), "the stopped tool's line is marked");
    assert_eq!(tool.parts[0].result.as_deref(), Some(INTERRUPTED_OUTPUT));
    assert_eq!(
        out.interrupted_message_id.as_deref(),
        Some(tool.id.as_str())
    );
    let meta = f.store.meta(&id).unwrap();
    assert_eq!(meta.status, SessionStatus::Interrupted);
    assert_eq!(meta.turn_count, 1);

    let ev = events(&f, &id);
    assert_eq!(
        kinds(&ev),
        [
            "turn.started",
            "model.request",
            "model.first_token",
            "model.response",
            "function.call",
            "function.output",
            "turn.aborted"
        ]
    );
    match &ev[5].kind {
        EventKind::FunctionOutput { output, failed, .. } => {
            assert_eq!(output, INTERRUPTED_OUTPUT);
            assert_eq!(*failed, Some(true));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ctrl_c_between_steps_marks_the_last_assistant_line_in_place() {
    let f = fixture();
    let flag = InterruptFlag::new();
    let mut agent = open_stopping_on(&f, &flag, |e| matches!(e, AgentEvent::ToolFinished { .. }));
    let out = agent.run_turn("look", &flag).unwrap();
    assert_eq!(out.status, TurnStatus::Interrupted);
    assert_eq!(out.model_calls, 1, "no model call after the interrupt");
    let id = agent.session_id().clone();
    drop(agent);
    let msgs = f.store.messages(&id).unwrap().messages;
    assert_eq!(msgs.len(), 3, "nothing appended: the target was marked");
    assert!(msgs[2].is_interrupted());
    assert_eq!(msgs[2].parts[0].result.as_deref(), Some("a.txt"));
    assert!(!msgs[1].is_interrupted());
    assert_eq!(
        out.interrupted_message_id.as_deref(),
        Some(msgs[2].id.as_str())
    );
    assert_eq!(
        f.store.meta(&id).unwrap().status,
        SessionStatus::Interrupted
    );
}

#[test]
fn a_raised_flag_is_lowered_when_the_next_turn_starts_and_idle_marks_nothing() {
    let f = fixture();
    let flag = InterruptFlag::new();
    flag.raise();
    let mut agent = open(
        &f,
        SessionTarget::New {
            project: f.project.clone(),
        },
    );
    let out = agent.run_turn("look", &flag).unwrap();
    assert_eq!(out.status, TurnStatus::Completed);
    // After the turn: a Ctrl+C finds nothing to interrupt.
    let ints = agent.interrupts.clone();
    assert_eq!(
        ints.on_sigint(freecode_store::now_ms()),
        freecode_core::interrupt::Action::Ignore
    );
    assert!(!flag.is_raised());
    let id = agent.session_id().clone();
    drop(agent);
    let msgs = f.store.messages(&id).unwrap().messages;
    assert!(msgs.iter().all(|m| !m.is_interrupted()));
    assert_eq!(f.store.meta(&id).unwrap().status, SessionStatus::Active);
}

#[test]
fn turn_ids_continue_past_a_turn_that_never_ended() {
    let f = fixture();
    let mut agent = open(
        &f,
        SessionTarget::New {
            project: f.project.clone(),
        },
    );
    agent.run_turn("one", &InterruptFlag::new()).unwrap();
    let id = agent.session_id().clone();
    drop(agent);
    // A run that died mid-turn: its turn is in the log, turnCount never moved.
    let mut rec = Recorder::open(f.store.home(), &id, config().recorder).unwrap();
    rec.turn_started("turn-2-0").unwrap();
    drop(rec);
    assert_eq!(f.store.meta(&id).unwrap().turn_count, 1);

    let mut agent = open(&f, SessionTarget::Resume(id.clone()));
    let out = agent.run_turn("two", &InterruptFlag::new()).unwrap();
    assert_eq!(out.turn, 2);
    drop(agent);
    let started: Vec<String> = events(&f, &id)
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::TurnStarted { turn_id } => Some(turn_id),
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        [
            "turn-1-0", "turn-1-1", "turn-1-2", "turn-1-3", "turn-2-0", "turn-3-0", "turn-3-1",
            "turn-3-2", "turn-3-3"
        ]
    );
}

#[test]
fn a_pinned_session_keeps_its_provider_and_model() {
    let f = fixture();
    let agent = open(
        &f,
        SessionTarget::New {
            project: f.project.clone(),
        },
    );
    let id = agent.session_id().clone();
    assert_eq!(agent.meta().model.as_deref(), Some("scripted-1"));
    drop(agent);
    // Resumed on another provider: refused, with the reason, and nothing changes.
    let mut cfg = config();
    cfg.provider = ProviderConfig::OpenAi {
        name: crate::provider::OPENAI_COMPATIBLE,
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: None,
        default_model: None,
    };
    let err = AgentLoop::open(
        &f.store,
        SessionTarget::Resume(id.clone()),
        cfg,
        Interrupts::new(),
    )
    .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("pinned to provider scripted/scripted-1, not openai-compatible"),
        "{msg}"
    );
    let meta = f.store.meta(&id).unwrap();
    assert_eq!(meta.provider, "scripted");
    assert_eq!(meta.model.as_deref(), Some("scripted-1"));
    // An explicit model is pinned, and kept by the next resume.
    let mut cfg = config();
    cfg.model = Some("m-2".into());
    drop(
        AgentLoop::open(
            &f.store,
            SessionTarget::Resume(id.clone()),
            cfg.clone(),
            Interrupts::new(),
        )
        .unwrap(),
    );
    cfg.model = None;
    let agent = AgentLoop::open(
        &f.store,
        SessionTarget::Resume(id.clone()),
        cfg,
        Interrupts::new(),
    )
    .unwrap();
    assert_eq!(agent.meta().model.as_deref(), Some("m-2"));
    assert_eq!(f.store.meta(&id).unwrap().model.as_deref(), Some("m-2"));
}
