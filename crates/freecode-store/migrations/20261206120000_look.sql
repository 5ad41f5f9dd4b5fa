-- What the index saw at its last look, so that the next one costs what changed since
-- (`index::look`): the change journal's position, the session directories' mtimes, the sessions
-- to keep re-checking for a while (recently changed), and those skipped as damaged (re-checked
-- at every look, so that they are reported every time and taken in once mended).

CREATE TABLE IF NOT EXISTS idx_look (
  key   TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS idx_dirs (
  name    TEXT PRIMARY KEY,
  mtimeNs INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS idx_recent (
  id         TEXT PRIMARY KEY,
  projectDir TEXT NOT NULL,
  atMs       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_recent_at ON idx_recent(atMs);

CREATE TABLE IF NOT EXISTS idx_skipped (
  id         TEXT PRIMARY KEY,
  projectDir TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS idx_sessions_project_dir ON idx_sessions(projectDir);
