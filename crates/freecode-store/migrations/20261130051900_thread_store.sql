-- The thread store (SPEC §14.4): exactly the original's tables, columns and indexes, camelCase
-- column names included. Every statement is IF NOT EXISTS so that a database the original wrote
-- (which has these tables and no schema_migrations) is adopted as it is.
-- Shipped: never edit this file; change the schema in a new migration.

CREATE TABLE IF NOT EXISTS threads (
  id TEXT PRIMARY KEY,
  title TEXT NOT NULL,
  createdAt INTEGER NOT NULL,
  updatedAt INTEGER NOT NULL,
  lastTurnAt INTEGER NOT NULL,
  status TEXT NOT NULL DEFAULT 'active',
  projectPath TEXT,
  provider TEXT,
  turnCount INTEGER DEFAULT 0,
  iterationCount INTEGER DEFAULT 0,
  goal TEXT,
  goalStatus TEXT,
  goalUpdatedAt INTEGER
);

CREATE TABLE IF NOT EXISTS turns (
  id TEXT PRIMARY KEY,
  threadId TEXT NOT NULL,
  turnNumber INTEGER NOT NULL,
  prompt TEXT NOT NULL,
  response TEXT,
  createdAt INTEGER NOT NULL,
  durationMs INTEGER,
  toolCallCount INTEGER DEFAULT 0,
  FOREIGN KEY (threadId) REFERENCES threads(id)
);

CREATE TABLE IF NOT EXISTS tool_calls (
  id TEXT PRIMARY KEY,
  turnId TEXT NOT NULL,
  toolName TEXT NOT NULL,
  args TEXT,
  result TEXT,
  error TEXT,
  durationMs INTEGER,
  sequence INTEGER NOT NULL,
  FOREIGN KEY (turnId) REFERENCES turns(id)
);

CREATE INDEX IF NOT EXISTS idx_threads_status ON threads(status);
CREATE INDEX IF NOT EXISTS idx_threads_project ON threads(projectPath);
CREATE INDEX IF NOT EXISTS idx_turns_thread ON turns(threadId);
CREATE INDEX IF NOT EXISTS idx_tool_calls_turn ON tool_calls(turnId);
