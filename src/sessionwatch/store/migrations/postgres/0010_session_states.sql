-- 0010: each session's lifecycle state (docs/lifecycle.md), one row per session, written by lifecycle
-- reports and the lost timer. Kept apart from sessions so a report (a heartbeat on every tool call)
-- rewrites a small row and none of the listing indexes. The foreign key deletes the row with its session
-- (sw_delete_session needs no change).
CREATE TABLE session_states (
    session_key text COLLATE "C" NOT NULL,
    agent_id    text COLLATE "C" NOT NULL,
    state       text NOT NULL CHECK (state IN ('working', 'waiting', 'idle', 'ended', 'lost')),
    since       bigint NOT NULL,
    seen_at     bigint NOT NULL,
    pid         bigint,
    machine     text,
    host        text,
    outcome     text,
    PRIMARY KEY (session_key, agent_id),
    FOREIGN KEY (session_key, agent_id) REFERENCES sessions (session_key, agent_id) ON DELETE CASCADE
);
-- The lost timer's walk: only the rows it can act on, oldest seen first.
CREATE INDEX session_states_live ON session_states (seen_at) WHERE state IN ('working', 'waiting');
