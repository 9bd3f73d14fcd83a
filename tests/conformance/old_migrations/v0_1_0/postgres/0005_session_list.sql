-- sessions_list pages in the order created_at DESC, session_key, agent_id (see listing.py). One index per
-- filter shape, each walked in that order from the cursor on, so a page reads about `limit` rows whatever
-- the number of sessions: no filter, one agent, one kind, one agent and one kind. Several agents (a scoped
-- token) or several kinds are merged from one index walk each. created_at never changes after the insert,
-- so updating a session (updated_at, goal, run) writes none of these indexes; only kind changes would.
-- Unlike SQLite, sessions_by_created leaves agent_id out: with it, the planner took this index for one
-- agent's page too (agent_id checked inside the index), which walks every other agent's sessions. Ties
-- of (created_at, session_key) across agents are few; an incremental sort orders them.
CREATE INDEX sessions_by_created ON sessions (created_at DESC, session_key);
CREATE INDEX sessions_by_agent_created ON sessions (agent_id, created_at DESC, session_key);
CREATE INDEX sessions_by_kind_created ON sessions (kind, created_at DESC, session_key);
CREATE INDEX sessions_by_agent_kind_created ON sessions (agent_id, kind, created_at DESC, session_key);
