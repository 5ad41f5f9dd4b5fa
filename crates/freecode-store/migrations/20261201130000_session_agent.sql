-- The agent that wrote each session (`SessionMeta::agent`: `importedFrom.agent` of a session
-- `freecode import` read from another agent, else `freecode`), so that `search --agent` filters
-- in SQL. Rows indexed before this column existed get the default until their meta is read
-- again: every stamp is invalidated, so the next refresh re-reads every `meta.json` (one read
-- each; the message and rollout watermarks are kept, no log is read again).

ALTER TABLE idx_sessions ADD COLUMN agent TEXT NOT NULL DEFAULT 'freecode';
UPDATE idx_sessions SET metaMtimeNs = -1;
CREATE INDEX IF NOT EXISTS idx_sessions_agent ON idx_sessions(agent);
