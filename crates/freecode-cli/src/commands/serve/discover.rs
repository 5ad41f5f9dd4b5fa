//! `rpc.discover`: the OpenRPC document of every method `freecode serve` answers, its params
//! and results, with the types under `components.schemas` (the same ones `docs/schemas` is
//! generated from, [`freecode_ops::types`]).

use freecode_core::SessionMeta;
use freecode_core::rollout::trace::Trace;
use freecode_ops::types::{
    Compaction, Exported, InterruptedRef, Resumed, SessionDetail, SessionRef, Stopped, TurnOutcome,
};
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};

/// A param of an RPC method.
struct Param {
    name: &'static str,
    required: bool,
    schema: fn(&mut SchemaGenerator) -> Schema,
}

/// An RPC method: its name, summary, params and result.
struct Method {
    name: &'static str,
    summary: &'static str,
    params: &'static [Param],
    result: fn(&mut SchemaGenerator) -> Schema,
}

fn sub<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

fn any_object(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"type": "object"})
}

const fn p(
    name: &'static str,
    required: bool,
    schema: fn(&mut SchemaGenerator) -> Schema,
) -> Param {
    Param {
        name,
        required,
        schema,
    }
}

const SESSION_ID: Param = p("sessionId", true, sub::<String>);

/// Every method `freecode serve` answers, as `rpc.discover` describes them.
const METHODS: &[Method] = &[
    Method {
        name: "session.start",
        summary: "Create a session (title default: \"Session <id>\")",
        params: &[
            p("projectPath", false, sub::<String>),
            p("provider", false, sub::<String>),
            p("model", false, sub::<String>),
            p("title", false, sub::<String>),
            p("agentMode", false, sub::<String>),
        ],
        result: sub::<SessionRef>,
    },
    Method {
        name: "session.list",
        summary: "Sessions not deleted, newest activity first (as `session list --json`)",
        params: &[
            p("projectPath", false, sub::<String>),
            p("status", false, sub::<String>),
            p("agent", false, sub::<String>),
        ],
        result: sub::<Vec<SessionMeta>>,
    },
    Method {
        name: "session.get",
        summary: "One session's meta and messages (as `session show --json`)",
        params: &[SESSION_ID],
        result: sub::<SessionDetail>,
    },
    Method {
        name: "session.resume",
        summary: "Resume a session: its provider, model, messages and summary",
        params: &[SESSION_ID],
        result: sub::<Resumed>,
    },
    Method {
        name: "session.send",
        summary: "Run one agent turn; answered when the turn ends",
        params: &[
            SESSION_ID,
            p("message", true, sub::<String>),
            p("model", false, sub::<String>),
            p("agentMode", false, sub::<String>),
        ],
        result: sub::<TurnOutcome>,
    },
    Method {
        name: "session.stop",
        summary: "Stop the turn running in a session",
        params: &[SESSION_ID],
        result: sub::<Stopped>,
    },
    Method {
        name: "session.delete",
        summary: "Soft-delete a session, or erase it with purge",
        params: &[SESSION_ID, p("purge", false, sub::<bool>)],
        result: sub::<()>,
    },
    Method {
        name: "session.archive",
        summary: "Archive a session",
        params: &[SESSION_ID],
        result: sub::<()>,
    },
    Method {
        name: "session.move",
        summary: "Move a session to another project (an absolute directory), keeping its id; the updated meta",
        params: &[SESSION_ID, p("project", true, sub::<String>)],
        result: sub::<SessionMeta>,
    },
    Method {
        name: "session.handoff",
        summary: "Write a session as a new Claude Code or Codex transcript in the agent's home; the agent, its new id, the file and the command that resumes it",
        params: &[
            SESSION_ID,
            p("to", true, sub::<String>),
            p("project", false, sub::<String>),
            p("redact", false, sub::<bool>),
        ],
        result: sub::<freecode_ops::types::Handoff>,
    },
    Method {
        name: "session.fork",
        summary: "Copy a session; the new id as a bare string (the original's protocol)",
        params: &[SESSION_ID],
        result: sub::<String>,
    },
    Method {
        name: "session.compact",
        summary: "Trim to the last keep user turns (default 2), recording a summary",
        params: &[
            SESSION_ID,
            p("keep", false, sub::<u64>),
            p("summary", false, sub::<String>),
        ],
        result: sub::<Compaction>,
    },
    Method {
        name: "session.getInterrupted",
        summary: "The latest interrupted session and its interrupted message, or null",
        params: &[],
        result: sub::<Option<InterruptedRef>>,
    },
    Method {
        name: "session.export",
        summary: "Share a session: redacted, encrypted end to end, expiring",
        params: &[
            SESSION_ID,
            p("to", false, sub::<String>),
            p("plain", false, sub::<bool>),
            p("expiresInDays", false, sub::<u64>),
            p("includeRollout", false, sub::<bool>),
        ],
        result: sub::<Exported>,
    },
    Method {
        name: "session.import",
        summary: "Import a shared session (URL with its #key) as a new session of projectPath",
        params: &[
            p("url", true, sub::<String>),
            p("projectPath", false, sub::<String>),
        ],
        result: sub::<SessionRef>,
    },
    Method {
        name: "session.trace",
        summary: "The session's trace (as `trace --json`), or null without a rollout log",
        params: &[SESSION_ID],
        result: sub::<Option<Trace>>,
    },
    Method {
        name: "sync.status",
        summary: "Home sync: sessions to push and records to pull (as `sync status --json`)",
        params: &[],
        result: sub::<freecode_ops::home_sync::SyncStatus>,
    },
    Method {
        name: "sync.now",
        summary: "Home sync: pull, then push (as `sync now --json`)",
        params: &[],
        result: sub::<freecode_ops::home_sync::SyncReport>,
    },
    Method {
        name: "rpc.discover",
        summary: "This document",
        params: &[],
        result: any_object,
    },
];

/// The OpenRPC document `rpc.discover` answers: every method with its params and result, the
/// types under `components.schemas` (the same ones `docs/schemas` is generated from).
pub fn openrpc_document() -> serde_json::Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator();
    let methods: Vec<serde_json::Value> = METHODS
        .iter()
        .map(|m| {
            let params: Vec<serde_json::Value> = m
                .params
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "name": p.name,
                        "required": p.required,
                        "schema": (p.schema)(&mut generator),
                    })
                })
                .collect();
            serde_json::json!({
                "name": m.name,
                "summary": m.summary,
                "paramStructure": "by-name",
                "params": params,
                "result": {"name": "result", "schema": (m.result)(&mut generator)},
            })
        })
        .collect();
    serde_json::json!({
        "openrpc": "1.3.2",
        "info": {"title": "freecode serve", "version": env!("CARGO_PKG_VERSION")},
        "methods": methods,
        "components": {"schemas": generator.take_definitions(true)},
    })
}
