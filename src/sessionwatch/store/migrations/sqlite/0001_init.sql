-- sessionwatch schema v1 (SQLite). Applied once; later changes go into new numbered files.

-- The signal log. AUTOINCREMENT: a sequence is never reused, also after pruning.
CREATE TABLE events (
    sequence     INTEGER PRIMARY KEY AUTOINCREMENT,
    dedupe_key   TEXT UNIQUE,
    session_key  TEXT NOT NULL,
    session_id   TEXT,
    agent_id     TEXT NOT NULL,
    kind         TEXT NOT NULL,
    actor_type   TEXT NOT NULL,
    actor_id     TEXT,
    run_id       TEXT,
    occurred_at  INTEGER NOT NULL,
    summary      TEXT NOT NULL,
    -- The event as changesSince serves it, minus its sequence: {kind, actorType, occurredAt, summary,
    -- actorId?, runId?, payload?}. Stored once at insert so reads are one concatenation, not per-row work.
    body         TEXT NOT NULL
) STRICT;
CREATE INDEX events_by_session ON events (session_key, agent_id, sequence);
CREATE INDEX events_by_time ON events (occurred_at);

-- Durable per-(session, agent) version head; survives pruning, removed only by session deletion.
CREATE TABLE heads (
    session_key         TEXT NOT NULL,
    agent_id            TEXT NOT NULL,
    last_sequence       INTEGER NOT NULL,
    pruned_max_sequence INTEGER NOT NULL DEFAULT 0,
    updated_at          INTEGER NOT NULL,
    PRIMARY KEY (session_key, agent_id)
) STRICT, WITHOUT ROWID;

-- One cursor per (watcher, target): last_seen = acknowledged, notified = frozen notice watermark,
-- material = latest notify-eligible event. A pair's stale-state notice lives in its cursor row
-- (queued_*: the append index in the watcher's queue, the last_seen its text quotes, when, and whether
-- it is queue-only); see system_events below for how the queue is derived.
CREATE TABLE cursors (
    watcher      TEXT NOT NULL,
    target       TEXT NOT NULL,
    last_seen    INTEGER NOT NULL DEFAULT 0,
    notified     INTEGER NOT NULL DEFAULT 0,
    material     INTEGER NOT NULL DEFAULT 0,
    provenance   TEXT NOT NULL DEFAULT 'explicit' CHECK (provenance IN ('explicit', 'ambient-group')),
    updated_at   INTEGER NOT NULL,
    queued_idx   INTEGER NOT NULL DEFAULT 0,
    queued_ls    INTEGER NOT NULL DEFAULT 0,
    queued_ts    INTEGER NOT NULL DEFAULT 0,
    queued_quiet INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (target, watcher)  -- clustered by target: one event's fan-out touches adjacent rows
) STRICT, WITHOUT ROWID;
CREATE INDEX cursors_by_watcher ON cursors (watcher);
-- No index on updated_at: every fan-out and ack touches it, while only the hourly prune reads it.

-- Pairs muted by session_unwatch: implicit (spawn-parent, ambient) notices stay off until a new
-- explicit watch or a new spawn run.
CREATE TABLE watch_mutes (
    watcher    TEXT NOT NULL,
    target     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (watcher, target)
) STRICT, WITHOUT ROWID;

-- The durable system-event queue, one per session key, capped at N entries (oldest evicted).
-- Every append to a session's queue takes the next append index from queue_heads.appended; an entry
-- with index i is live while i > drained and appended - i < N. Eviction therefore needs no write:
-- the N newest appends are the queue. Removing a live entry from the middle renumbers the remaining
-- live ones to the top of the range, so later appends evict exactly what an eager queue would.
-- Stale-state notices are stored in their cursor row (one per pair); other entries live here.
-- Migration 0007 chains the notice slots (queue_heads.last_slot, cursors.queued_prev), so reading a
-- queue needs no walk of the watcher's cursors (see store/sqlite/queue_model.py).
CREATE TABLE queue_heads (
    session_key TEXT PRIMARY KEY,
    appended    INTEGER NOT NULL DEFAULT 0,
    drained     INTEGER NOT NULL DEFAULT 0
) STRICT, WITHOUT ROWID;

CREATE TABLE system_events (
    session_key TEXT NOT NULL,
    idx         INTEGER NOT NULL,
    context_key TEXT,
    text        TEXT NOT NULL,
    ts          INTEGER NOT NULL,
    PRIMARY KEY (session_key, idx)
) STRICT, WITHOUT ROWID;

-- Sessions owned by the host runtime, and their transcripts.
CREATE TABLE sessions (
    session_key   TEXT NOT NULL,
    agent_id      TEXT NOT NULL,
    session_id    TEXT NOT NULL,
    kind          TEXT NOT NULL,
    spawned_by    TEXT,
    label         TEXT,
    active_run_id TEXT,
    goal_json     TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (session_key, agent_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX sessions_by_parent ON sessions (spawned_by);

CREATE TABLE messages (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key        TEXT NOT NULL,
    agent_id           TEXT NOT NULL,
    role               TEXT NOT NULL,
    text               TEXT NOT NULL,
    provenance         TEXT,
    source_session_key TEXT,
    channel            TEXT,
    imported           INTEGER NOT NULL DEFAULT 0,
    created_at         INTEGER NOT NULL
) STRICT;
CREATE INDEX messages_by_session ON messages (session_key, agent_id, id);

-- Adopted catalog threads (upstream monitoring). updated_at strictly increases on every change and
-- is the optimistic-lock token; the miss streak is persisted so a restart does not reset it.
CREATE TABLE upstream_links (
    session_key          TEXT NOT NULL,
    agent_id             TEXT NOT NULL,
    catalog_id           TEXT NOT NULL,
    host_id              TEXT NOT NULL,
    thread_id            TEXT NOT NULL,
    upstream_kind        TEXT NOT NULL,
    upstream_ref_json    TEXT NOT NULL,
    last_marker_json     TEXT NOT NULL,
    last_scanned_at      INTEGER,
    miss_count           INTEGER NOT NULL DEFAULT 0,
    miss_link_updated_at INTEGER,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    PRIMARY KEY (session_key, agent_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX upstream_links_by_catalog ON upstream_links (catalog_id);

CREATE TABLE nodes (
    node_id    TEXT PRIMARY KEY,
    url        TEXT NOT NULL,
    token      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Small process-shared bookkeeping (for example the last prune time).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value ANY NOT NULL
) STRICT, WITHOUT ROWID;
