-- 0009: ids belong to their agent (the rules and the reasons: sqlite/0008_agent_scoped_ids.sql). A dedupe
-- key is unique per (agent_id, dedupe_key, client_dedupe) instead of across the whole log; client_dedupe
-- is true for a key a client sent (inbound's dedupeKey), false for one sessionwatch built. Existing keys:
-- a human_direct_message's key not starting 'upstream:' came from a client; the keys of runs, spawns and
-- compactions are rewritten to name their session ('run-terminal:<sessionKey> <runId>'), as new ones do.
-- Every row stays, with its sequence.
ALTER TABLE events ADD COLUMN client_dedupe boolean NOT NULL DEFAULT false;
ALTER TABLE events DROP CONSTRAINT events_dedupe_key_key;
UPDATE events SET client_dedupe = true
 WHERE kind = 'human_direct_message' AND dedupe_key IS NOT NULL AND substr(dedupe_key, 1, 9) <> 'upstream:';
UPDATE events SET dedupe_key = CASE
           WHEN kind = 'child_spawned' THEN 'child-spawned:' || session_key || ' ' || run_id
           WHEN kind = 'compacted' THEN 'compacted:' || session_key || ' ' || substr(dedupe_key, 11)
           ELSE 'run-terminal:' || session_key || ' ' || run_id
       END
 WHERE (kind = 'child_spawned' AND dedupe_key = 'child-spawned:' || run_id)
    OR (kind IN ('run_completed', 'run_failed') AND dedupe_key = 'run-terminal:' || run_id)
    OR (kind = 'compacted' AND substr(dedupe_key, 1, 10) = 'compacted:');
CREATE UNIQUE INDEX events_by_dedupe_key ON events (agent_id, dedupe_key, client_dedupe);
