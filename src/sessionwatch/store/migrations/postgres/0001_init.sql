-- sessionwatch schema v1 (PostgreSQL): the tables, columns and semantics of migrations/sqlite/0001_init.sql.
-- Applied once under an advisory lock (store/postgres/connection.py); later changes go into new numbered files.
-- Migrations hold schema only: the plpgsql functions live in store/postgres_functions.sql, applied after
-- the migrations on every start. (Until version 0.1.0 this file and 0002/0006 also defined them; the
-- runner records version numbers only, no checksums, so databases that ran those versions are unaffected,
-- and their functions are replaced from postgres_functions.sql at the next start.)
--
-- Key columns use COLLATE "C" (byte order, like SQLite) whatever the database locale.

-- The signal log. An identity sequence: never reused, also after pruning.
CREATE TABLE events (
    sequence     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dedupe_key   text COLLATE "C" UNIQUE,
    session_key  text COLLATE "C" NOT NULL,
    session_id   text,
    agent_id     text COLLATE "C" NOT NULL,
    kind         text NOT NULL,
    actor_type   text NOT NULL,
    actor_id     text COLLATE "C",
    run_id       text,
    occurred_at  bigint NOT NULL,
    summary      text NOT NULL,
    -- The event as changesSince serves it, minus its sequence (see the SQLite schema).
    body         text NOT NULL
);
CREATE INDEX events_by_session ON events (session_key, agent_id, sequence);
CREATE INDEX events_by_time ON events (occurred_at);

-- Durable per-(session, agent) version head. fillfactor leaves room for HOT updates: every recording
-- rewrites one head.
CREATE TABLE heads (
    session_key         text COLLATE "C" NOT NULL,
    agent_id            text COLLATE "C" NOT NULL,
    last_sequence       bigint NOT NULL,
    pruned_max_sequence bigint NOT NULL DEFAULT 0,
    updated_at          bigint NOT NULL,
    PRIMARY KEY (session_key, agent_id)
) WITH (fillfactor = 80);

-- One cursor per (watcher, target), holding the pair's queued notice (queued_*), as on SQLite.
-- wake_seq (PostgreSQL only) stamps a waking notice from the global wake_position sequence when it is
-- queued (queue_heads.last_wake keeps the newest per watcher); other gateways poll "wake_seq > last"
-- for their subscribed watchers when a NOTIFY went missing.
CREATE SEQUENCE wake_position AS bigint;
CREATE TABLE cursors (
    watcher      text COLLATE "C" NOT NULL,
    target       text COLLATE "C" NOT NULL,
    last_seen    bigint NOT NULL DEFAULT 0,
    notified     bigint NOT NULL DEFAULT 0,
    material     bigint NOT NULL DEFAULT 0,
    provenance   text NOT NULL DEFAULT 'explicit' CHECK (provenance IN ('explicit', 'ambient-group')),
    updated_at   bigint NOT NULL,
    queued_idx   bigint NOT NULL DEFAULT 0,
    queued_ls    bigint NOT NULL DEFAULT 0,
    queued_ts    bigint NOT NULL DEFAULT 0,
    queued_quiet boolean NOT NULL DEFAULT false,
    wake_seq     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (target, watcher)
) WITH (fillfactor = 80);
-- Only the two key orders are indexed: the fan-out then rewrites cursor rows as HOT updates (no index
-- entries). Prune's "updated_at < cutoff" scan runs at most hourly and reads the table instead.
CREATE INDEX cursors_by_watcher ON cursors (watcher, target);

CREATE TABLE watch_mutes (
    watcher    text COLLATE "C" NOT NULL,
    target     text COLLATE "C" NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (watcher, target)
);

-- The durable, capped system-event queue (see the SQLite schema): an entry with append index i is live
-- while i > drained and appended - i < N.
-- Migration 0007 chains the notice slots: queue_heads.last_slot and cursors.queued_prev.
CREATE TABLE queue_heads (
    session_key text COLLATE "C" PRIMARY KEY,
    appended    bigint NOT NULL DEFAULT 0,
    drained     bigint NOT NULL DEFAULT 0,
    last_wake   bigint NOT NULL DEFAULT 0
) WITH (fillfactor = 80);

CREATE TABLE system_events (
    session_key text COLLATE "C" NOT NULL,
    idx         bigint NOT NULL,
    context_key text COLLATE "C",
    text        text NOT NULL,
    ts          bigint NOT NULL,
    PRIMARY KEY (session_key, idx)
);

CREATE TABLE sessions (
    session_key   text COLLATE "C" NOT NULL,
    agent_id      text COLLATE "C" NOT NULL,
    session_id    text NOT NULL,
    kind          text NOT NULL,
    spawned_by    text COLLATE "C",
    label         text,
    active_run_id text,
    goal_json     text,
    created_at    bigint NOT NULL,
    updated_at    bigint NOT NULL,
    PRIMARY KEY (session_key, agent_id)
);
CREATE INDEX sessions_by_parent ON sessions (spawned_by);

CREATE TABLE messages (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_key        text COLLATE "C" NOT NULL,
    agent_id           text COLLATE "C" NOT NULL,
    role               text NOT NULL,
    text               text NOT NULL,
    provenance         text,
    source_session_key text,
    channel            text,
    imported           boolean NOT NULL DEFAULT false,
    created_at         bigint NOT NULL
);
CREATE INDEX messages_by_session ON messages (session_key, agent_id, id);

CREATE TABLE upstream_links (
    session_key          text COLLATE "C" NOT NULL,
    agent_id             text COLLATE "C" NOT NULL,
    catalog_id           text COLLATE "C" NOT NULL,
    host_id              text NOT NULL,
    thread_id            text NOT NULL,
    upstream_kind        text NOT NULL,
    upstream_ref_json    text NOT NULL,
    last_marker_json     text NOT NULL,
    last_scanned_at      bigint,
    miss_count           integer NOT NULL DEFAULT 0,
    miss_link_updated_at bigint,
    created_at           bigint NOT NULL,
    updated_at           bigint NOT NULL,
    PRIMARY KEY (session_key, agent_id)
);
CREATE INDEX upstream_links_by_catalog ON upstream_links (catalog_id);

CREATE TABLE nodes (
    node_id    text COLLATE "C" PRIMARY KEY,
    url        text NOT NULL,
    token      text NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);

-- Process-shared bookkeeping (last_prune_at).
CREATE TABLE meta (
    key   text COLLATE "C" PRIMARY KEY,
    value text NOT NULL
);
