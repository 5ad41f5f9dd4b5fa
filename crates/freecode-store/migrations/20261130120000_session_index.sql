-- The session index: derived from sessions/<p>/<id>/{meta.json,messages.jsonl} and
-- rollout/sessions/<id>/events.jsonl, which stay the source of truth. Everything here can be
-- dropped and rebuilt (`freecode index rebuild`).

CREATE TABLE IF NOT EXISTS idx_sessions (
  id          TEXT PRIMARY KEY,
  projectDir  TEXT NOT NULL,
  projectPath TEXT NOT NULL,
  status      TEXT NOT NULL,
  lastTurnAt  INTEGER NOT NULL,
  createdAt   INTEGER NOT NULL,
  metaJson    TEXT NOT NULL,
  metaMtimeNs INTEGER NOT NULL,
  metaSize    INTEGER NOT NULL,
  metaIno     INTEGER NOT NULL,
  -- watermark of messages.jsonl: bytes indexed (always at a line end), and the file's identity
  logOffset   INTEGER NOT NULL DEFAULT 0,
  logIno      INTEGER NOT NULL DEFAULT 0,
  logLine     INTEGER NOT NULL DEFAULT 0,
  logSeen     INTEGER NOT NULL DEFAULT 0, -- the file's size when last read (a torn tail is not re-read)
  -- the derived thread's current turn
  turnNumber  INTEGER NOT NULL DEFAULT 0,
  toolSeq     INTEGER NOT NULL DEFAULT 0,
  -- watermark of the rollout log
  evOffset    INTEGER NOT NULL DEFAULT 0,
  evIno       INTEGER NOT NULL DEFAULT 0,
  evSeen      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_sessions_order ON idx_sessions(lastTurnAt DESC, createdAt DESC, id);
CREATE INDEX IF NOT EXISTS idx_sessions_project ON idx_sessions(projectPath);

CREATE TABLE IF NOT EXISTS idx_messages (
  rowid     INTEGER PRIMARY KEY,
  sessionId TEXT NOT NULL,
  line      INTEGER NOT NULL,
  msgId     TEXT NOT NULL,
  role      TEXT NOT NULL,
  timestamp INTEGER NOT NULL,
  -- the message's usage, when it carries one
  inputTokens  INTEGER NOT NULL DEFAULT 0,
  outputTokens INTEGER NOT NULL DEFAULT 0,
  cacheRead    INTEGER NOT NULL DEFAULT 0,
  cacheWrite   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_messages_session ON idx_messages(sessionId);

-- Message text and tool output, full-text indexed; rowid = idx_messages.rowid.
CREATE VIRTUAL TABLE IF NOT EXISTS idx_messages_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 0');

CREATE TABLE IF NOT EXISTS idx_tool_spans (
  sessionId  TEXT NOT NULL,
  tool       TEXT NOT NULL,
  durationMs INTEGER NOT NULL,
  failed     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_tool_spans_session ON idx_tool_spans(sessionId);

CREATE TABLE IF NOT EXISTS idx_model_spans (
  sessionId    TEXT NOT NULL,
  durationMs   INTEGER NOT NULL,
  ok           INTEGER NOT NULL,
  inputTokens  INTEGER NOT NULL DEFAULT 0,
  outputTokens INTEGER NOT NULL DEFAULT 0,
  cacheRead    INTEGER NOT NULL DEFAULT 0,
  cacheWrite   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_model_spans_session ON idx_model_spans(sessionId);
