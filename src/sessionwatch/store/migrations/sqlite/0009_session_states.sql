-- 0009: each session's lifecycle state (docs/lifecycle.md), one row per session, written by lifecycle
-- reports and the lost timer. Kept apart from sessions so a report (a heartbeat on every tool call)
-- rewrites a small row and none of the listing indexes. Deleting a session deletes its row.
CREATE TABLE session_states (
    session_key TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('working', 'waiting', 'idle', 'ended', 'lost')),
    since       INTEGER NOT NULL,
    seen_at     INTEGER NOT NULL,
    pid         INTEGER,
    machine     TEXT,
    host        TEXT,
    outcome     TEXT,
    PRIMARY KEY (session_key, agent_id)
) STRICT, WITHOUT ROWID;
-- The lost timer's walk: only the rows it can act on, oldest seen first.
CREATE INDEX session_states_live ON session_states (seen_at) WHERE state IN ('working', 'waiting');
