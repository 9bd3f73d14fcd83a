-- 0008: ids belong to their agent. A dedupe key was unique across the whole log, and the keys clients send
-- (inbound's dedupeKey) shared one value space with the keys sessionwatch builds (run-terminal:, compacted:,
-- child-spawned:, created:, adopted:, upstream:, upstream-missing:): one agent could claim a key another
-- agent, or sessionwatch itself, was about to use, and be answered with that event. Now a key is unique per
-- (agent_id, dedupe_key, client_dedupe): client_dedupe is 1 for a key a client sent, 0 for one sessionwatch
-- built (kinds.py). Run and operation ids also belong to their session: their keys now name it
-- ('run-terminal:<sessionKey> <runId>'; a session key holds no space), and the existing ones are rewritten
-- so, which keeps a retry from before the upgrade a duplicate after it.
--
-- SQLite cannot drop the index of a column's UNIQUE clause, so the table is rebuilt: every row is copied
-- with its sequence, and the AUTOINCREMENT high-water mark is carried over (a sequence is never reused).
-- Which existing keys did a client send? Only inbound records a client's key, always as a
-- human_direct_message; the upstream monitor records that kind too, with keys 'upstream:...'. Same rules
-- as postgres/0009_agent_scoped_ids.sql.
CREATE TABLE events_scoped (
    sequence      INTEGER PRIMARY KEY AUTOINCREMENT,
    dedupe_key    TEXT,
    client_dedupe INTEGER NOT NULL DEFAULT 0 CHECK (client_dedupe IN (0, 1)),
    session_key   TEXT NOT NULL,
    session_id    TEXT,
    agent_id      TEXT NOT NULL,
    kind          TEXT NOT NULL,
    actor_type    TEXT NOT NULL,
    actor_id      TEXT,
    run_id        TEXT,
    occurred_at   INTEGER NOT NULL,
    summary       TEXT NOT NULL,
    body          TEXT NOT NULL
) STRICT;
INSERT INTO events_scoped (sequence, dedupe_key, client_dedupe, session_key, session_id, agent_id, kind,
                           actor_type, actor_id, run_id, occurred_at, summary, body)
SELECT sequence,
       CASE
           WHEN kind = 'child_spawned' AND dedupe_key = 'child-spawned:' || run_id
               THEN 'child-spawned:' || session_key || ' ' || run_id
           WHEN kind IN ('run_completed', 'run_failed') AND dedupe_key = 'run-terminal:' || run_id
               THEN 'run-terminal:' || session_key || ' ' || run_id
           WHEN kind = 'compacted' AND substr(dedupe_key, 1, 10) = 'compacted:'
               THEN 'compacted:' || session_key || ' ' || substr(dedupe_key, 11)
           ELSE dedupe_key
       END,
       CASE
           WHEN kind = 'human_direct_message' AND dedupe_key IS NOT NULL
                AND substr(dedupe_key, 1, 9) <> 'upstream:' THEN 1
           ELSE 0
       END,
       session_key, session_id, agent_id, kind, actor_type, actor_id, run_id, occurred_at, summary, body
  FROM events;
DELETE FROM sqlite_sequence WHERE name = 'events_scoped';
INSERT INTO sqlite_sequence (name, seq) SELECT 'events_scoped', seq FROM sqlite_sequence WHERE name = 'events';
DROP TABLE events;
ALTER TABLE events_scoped RENAME TO events;
CREATE INDEX events_by_session ON events (session_key, agent_id, sequence);
CREATE INDEX events_by_time ON events (occurred_at);
CREATE UNIQUE INDEX events_by_dedupe_key ON events (agent_id, dedupe_key, client_dedupe)
