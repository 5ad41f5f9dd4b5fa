-- `session list` in its order (newest activity first) without sorting every session: with
-- `--limit N` only the first N rows (and those a filter passes over) are read.

CREATE INDEX IF NOT EXISTS idx_sessions_activity
  ON idx_sessions(lastTurnAt DESC, createdAt DESC, id);
