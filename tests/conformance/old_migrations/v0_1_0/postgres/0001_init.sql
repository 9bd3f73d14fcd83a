-- sessionwatch schema v1 (PostgreSQL): the tables, columns and semantics of migrations/sqlite/0001_init.sql,
-- plus the plpgsql functions that run the hot write paths in one round trip. Applied once under an
-- advisory lock (store/postgres.py); later changes go into new numbered files.
--
-- Key columns use COLLATE "C" (byte order, like SQLite) whatever the database locale.
--
-- Commit order. Every transaction that inserts an event, or moves a cursor or a queue, first takes the
-- store's writer lock: a transaction-level advisory lock whose key the caller passes in (p_lock). So
-- writers are serialized, sequences become visible in commit order, and a reader polling
-- "sequence > last" can never skip a lower sequence that commits late. Readers take no lock.
--
-- The hot writers (sw_record, sw_ack, sw_take_queue, sw_enqueue) commit without waiting for the WAL
-- flush, so the writer lock is not held across an fsync; when the session wants durable commits the
-- caller then waits for the flush outside the lock (store/postgres.py, PostgresStore._flush), where
-- concurrent gateways share one fsync (group commit).

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

-- Wake notifications: {"o": origin, "w": [watchers], "t": [targets], "s": [wake_seqs]} (parallel arrays),
-- split in halves until each payload fits the server's 8000-byte limit (one item is under 4300 bytes:
-- keys are at most 512 characters). Sent in the caller's transaction: delivered on commit only.
CREATE FUNCTION sw_notify(p_channel text, p_origin text, p_watchers text[], p_targets text[],
                          p_positions bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_n       integer := coalesce(cardinality(p_watchers), 0);
    v_half    integer;
    v_payload text;
BEGIN
    IF p_channel IS NULL OR v_n = 0 THEN
        RETURN 0;
    END IF;
    v_payload := '{"o":' || to_json(p_origin)::text || ',"w":' || to_json(p_watchers)::text
                 || ',"t":' || to_json(p_targets)::text || ',"s":' || to_json(p_positions)::text || '}';
    IF octet_length(v_payload) <= 7900 OR v_n = 1 THEN
        PERFORM pg_notify(p_channel, v_payload);
        RETURN 1;
    END IF;
    v_half := v_n / 2;
    RETURN sw_notify(p_channel, p_origin, p_watchers[1:v_half], p_targets[1:v_half], p_positions[1:v_half])
         + sw_notify(p_channel, p_origin, p_watchers[v_half + 1:v_n], p_targets[v_half + 1:v_n],
                     p_positions[v_half + 1:v_n]);
END $$;

CREATE FUNCTION sw_ensure_head(p_session text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO queue_heads (session_key) VALUES (p_session) ON CONFLICT DO NOTHING;
$$;

-- Renumber a queue's live entries to the top of its index range after a removal from the middle, and
-- drop dead generic rows (sqlite_queue._compact). Negative indices first: no transient key collisions.
CREATE FUNCTION sw_compact(p_session text, p_cap integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_app   bigint;
    v_dr    bigint;
    v_moved bigint;
BEGIN
    PERFORM sw_ensure_head(p_session);
    SELECT h.appended, h.drained INTO v_app, v_dr FROM queue_heads h WHERE h.session_key = p_session;
    -- One statement numbers the live entries (one snapshot) and moves both kinds.
    WITH live AS (
        SELECT l.slot, l.ref, l.idx, v_app - count(*) OVER () + row_number() OVER (ORDER BY l.idx) AS new_idx
          FROM (SELECT true AS slot, c.target::text AS ref, c.queued_idx AS idx FROM cursors c
                 WHERE c.watcher = p_session AND c.queued_idx > v_dr AND v_app - c.queued_idx < p_cap
                UNION ALL
                SELECT false, NULL, e.idx FROM system_events e
                 WHERE e.session_key = p_session AND e.idx > v_dr AND v_app - e.idx < p_cap) l),
    slots AS (
        UPDATE cursors c SET queued_idx = l.new_idx FROM live l
         WHERE l.slot AND l.new_idx <> l.idx AND c.watcher = p_session AND c.target = l.ref
        RETURNING 1),
    generic AS (
        UPDATE system_events e SET idx = -l.new_idx FROM live l
         WHERE NOT l.slot AND l.new_idx <> l.idx AND e.session_key = p_session AND e.idx = l.idx
        RETURNING 1)
    SELECT (SELECT count(*) FROM slots) + (SELECT count(*) FROM generic) INTO v_moved;
    UPDATE system_events e SET idx = -e.idx WHERE e.session_key = p_session AND e.idx < 0;
    DELETE FROM system_events e WHERE e.session_key = p_session AND (e.idx <= v_dr OR v_app - e.idx >= p_cap);
END $$;

-- Take the pair's notice out of the queue (the cursor stays); compact when it was live.
CREATE FUNCTION sw_remove_slot(p_watcher text, p_target text, p_cap integer) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_live boolean;
BEGIN
    SELECT c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap INTO v_live
      FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher
     WHERE c.target = p_target AND c.watcher = p_watcher;
    UPDATE cursors c SET queued_idx = 0 WHERE c.target = p_target AND c.watcher = p_watcher;
    IF v_live THEN
        PERFORM sw_compact(p_watcher, p_cap);
    END IF;
    RETURN coalesce(v_live, false);
END $$;

-- Queue the pair's notice quoting p_ls (sqlite_queue.append_notice): dedupe (explicit) or replace
-- (queue-only); one slot per pair. The cursor must exist. Returns the append index, or NULL when
-- nothing was appended. p_wake stamps wake_seq (a waking notice other gateways may poll for).
CREATE FUNCTION sw_append_notice(p_watcher text, p_target text, p_ls bigint, p_ctx text, p_ts bigint,
                                 p_cap integer, p_quiet boolean, p_wake boolean) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_live    boolean;
    v_quoted  bigint;
    v_same    bigint;
    v_removed boolean;
    v_idx     bigint;
    v_wake    bigint;
BEGIN
    SELECT c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap, c.queued_ls INTO v_live, v_quoted
      FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher
     WHERE c.target = p_target AND c.watcher = p_watcher;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NOT p_quiet THEN
        IF v_live AND v_quoted = p_ls THEN
            RETURN NULL;
        END IF;
    ELSE
        SELECT count(*) INTO v_same FROM system_events e JOIN queue_heads h ON h.session_key = e.session_key
         WHERE e.session_key = p_watcher AND e.idx > h.drained AND h.appended - e.idx < p_cap
           AND e.context_key = p_ctx;
        IF v_live AND v_quoted = p_ls AND v_same = 0 THEN
            RETURN NULL;  -- exactly one entry with this context key, and its text is identical
        END IF;
        v_removed := v_live OR v_same > 0;
        IF v_same > 0 THEN
            DELETE FROM system_events e WHERE e.session_key = p_watcher AND e.context_key = p_ctx;
        END IF;
        IF v_live THEN
            UPDATE cursors c SET queued_idx = 0 WHERE c.target = p_target AND c.watcher = p_watcher;
        END IF;
        IF v_removed THEN
            PERFORM sw_compact(p_watcher, p_cap);
        END IF;
    END IF;
    IF NOT p_quiet AND v_live THEN
        -- One slot per pair: a reopen while the older notice is still queued replaces it.
        UPDATE cursors c SET queued_idx = 0 WHERE c.target = p_target AND c.watcher = p_watcher;
        PERFORM sw_compact(p_watcher, p_cap);
    END IF;
    IF p_wake AND NOT p_quiet THEN
        v_wake := nextval('wake_position');
    END IF;
    UPDATE queue_heads h SET appended = h.appended + 1, last_wake = coalesce(v_wake, h.last_wake)
     WHERE h.session_key = p_watcher RETURNING h.appended INTO v_idx;
    UPDATE cursors c SET queued_idx = v_idx, queued_ls = p_ls, queued_ts = p_ts, queued_quiet = p_quiet,
                         wake_seq = coalesce(v_wake, c.wake_seq)
     WHERE c.target = p_target AND c.watcher = p_watcher;
    RETURN v_idx;
END $$;

-- Queue any other entry, deduplicated by context key + exact text (sqlite_queue.append_generic).
CREATE FUNCTION sw_append_generic(p_session text, p_text text, p_ctx text, p_ts bigint, p_cap integer)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_idx bigint;
    v_dr  bigint;
BEGIN
    PERFORM sw_ensure_head(p_session);
    PERFORM 1 FROM system_events e JOIN queue_heads h ON h.session_key = e.session_key
     WHERE e.session_key = p_session AND e.idx > h.drained AND h.appended - e.idx < p_cap
       AND e.context_key IS NOT DISTINCT FROM p_ctx AND e.text = p_text;
    IF FOUND THEN
        RETURN NULL;
    END IF;
    UPDATE queue_heads h SET appended = h.appended + 1 WHERE h.session_key = p_session
    RETURNING h.appended, h.drained INTO v_idx, v_dr;
    INSERT INTO system_events (session_key, idx, context_key, text, ts) VALUES (p_session, v_idx, p_ctx, p_text, p_ts);
    DELETE FROM system_events e WHERE e.session_key = p_session AND (e.idx <= v_dr OR v_idx - e.idx >= p_cap);
    RETURN v_idx;
END $$;

-- The enqueue host operation: a canonical notice goes to its pair's slot when the cursor exists,
-- anything else is a generic entry. Returns (index, whether it went to a slot); index NULL = not queued.
CREATE FUNCTION sw_enqueue(p_lock bigint, p_session text, p_text text, p_ctx text, p_ts bigint, p_cap integer,
                           p_quiet boolean, p_target text, p_ls bigint, OUT o_idx bigint, OUT o_slot boolean)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    o_slot := p_target IS NOT NULL AND EXISTS (
        SELECT 1 FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher
         WHERE c.target = p_target AND c.watcher = p_session);
    IF o_slot THEN
        o_idx := sw_append_notice(p_session, p_target, p_ls, coalesce(p_ctx, ''), p_ts, p_cap, p_quiet, false);
    ELSE
        o_idx := sw_append_generic(p_session, p_text, p_ctx, p_ts, p_cap);
    END IF;
END $$;

-- Queue one notice per row (array order) and NOTIFY the waking ones; returns each row's append index
-- (NULL when deduplicated) and its wake_seq.
CREATE FUNCTION sw_append_notices(p_watchers text[], p_targets text[], p_ls bigint[], p_ctxs text[],
                                  p_quiet boolean[], p_ts bigint, p_cap integer, p_channel text, p_origin text)
RETURNS TABLE (o_idx bigint, o_wake_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_ws text[] := '{}';
    v_ts text[] := '{}';
    v_ps bigint[] := '{}';
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_watchers), 0) LOOP
        o_idx := sw_append_notice(p_watchers[i], p_targets[i], p_ls[i], p_ctxs[i], p_ts, p_cap, p_quiet[i], true);
        SELECT c.wake_seq INTO o_wake_seq FROM cursors c WHERE c.target = p_targets[i] AND c.watcher = p_watchers[i];
        IF NOT p_quiet[i] THEN
            v_ws := v_ws || p_watchers[i];
            v_ts := v_ts || p_targets[i];
            v_ps := v_ps || o_wake_seq;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF cardinality(v_ws) > 0 THEN
        PERFORM sw_notify(p_channel, p_origin, v_ws, v_ts, v_ps);
    END IF;
END $$;

-- Record one event (store.base.Store.record): insert with dedupe, bump the head, seed or move cursors,
-- queue notices with set-based fan-out, NOTIFY the waking watchers. p_mode: 0 log-only, 1 seeding,
-- 2 notify-eligible. No row when p_only_if_watched and nothing watches the session, or when
-- p_link_updated_at is given and the session's upstream link no longer has (updated_at, upstream_ref_json)
-- = (p_link_updated_at, p_link_ref); o_inserted = false with the existing event for a duplicate dedupe key.
CREATE FUNCTION sw_record(p_lock bigint, p_dedupe text, p_key text, p_session_id text, p_agent text, p_kind text,
                          p_actor_type text, p_actor_id text, p_run_id text, p_occurred_at bigint, p_summary text,
                          p_body text, p_watchers text[], p_only_if_watched boolean, p_mode integer, p_ctx text,
                          p_now bigint, p_cap integer, p_channel text, p_origin text,
                          p_link_updated_at bigint, p_link_ref text)
RETURNS TABLE (o_inserted boolean, o_sequence bigint, o_session_key text, o_agent_id text, o_kind text,
               o_actor_type text, o_occurred_at bigint, o_summary text, o_actor_id text, o_session_id text,
               o_run_id text, o_dedupe_key text, o_body text, o_wakes text[], o_wake_seqs bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    v_seq   bigint;
    v_n     bigint;
    v_moved bigint := 0;
    v_wake  bigint;
    v_ws    text[];
    v_ps    bigint[];
    r       record;
BEGIN
    IF p_only_if_watched AND NOT EXISTS (SELECT 1 FROM cursors c WHERE c.target = p_key) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    IF p_link_updated_at IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM upstream_links l WHERE l.session_key = p_key AND l.agent_id = p_agent
              AND l.updated_at = p_link_updated_at AND l.upstream_ref_json = p_link_ref) THEN
        RETURN;
    END IF;
    -- A duplicate dedupe key burns a sequence value, exactly as SQLite's AUTOINCREMENT does, so both
    -- backends number the same history the same way.
    INSERT INTO events (dedupe_key, session_key, session_id, agent_id, kind, actor_type, actor_id, run_id,
                        occurred_at, summary, body)
    VALUES (p_dedupe, p_key, p_session_id, p_agent, p_kind, p_actor_type, p_actor_id, p_run_id, p_occurred_at,
            p_summary, p_body)
    ON CONFLICT (dedupe_key) DO NOTHING
    RETURNING sequence INTO v_seq;
    IF v_seq IS NULL THEN
        RETURN QUERY SELECT false, e.sequence, e.session_key::text, e.agent_id::text, e.kind, e.actor_type,
                            e.occurred_at, e.summary, e.actor_id::text, e.session_id, e.run_id,
                            e.dedupe_key::text, e.body, NULL::text[], NULL::bigint[]
                       FROM events e WHERE e.dedupe_key = p_dedupe;
        IF NOT FOUND THEN
            o_inserted := false;
            RETURN NEXT;
        END IF;
        RETURN;
    END IF;
    INSERT INTO heads (session_key, agent_id, last_sequence, updated_at) VALUES (p_key, p_agent, v_seq, p_now)
    ON CONFLICT (session_key, agent_id) DO UPDATE SET last_sequence = excluded.last_sequence,
                                                      updated_at = excluded.updated_at;
    IF p_mode = 1 THEN
        -- Seed: overwrite the three watermarks (the queued notice stays); a new spawn lifts a mute.
        INSERT INTO queue_heads (session_key) SELECT DISTINCT u.w FROM unnest(p_watchers) AS u(w)
        ON CONFLICT DO NOTHING;
        INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at)
        SELECT DISTINCT u.w, p_key, v_seq, v_seq, v_seq, 'explicit', p_now FROM unnest(p_watchers) AS u(w)
        ON CONFLICT (target, watcher) DO UPDATE SET last_seen = v_seq, notified = v_seq, material = v_seq,
                                                    updated_at = p_now;
        DELETE FROM watch_mutes m WHERE m.target = p_key AND m.watcher = ANY (p_watchers);
    ELSIF p_mode = 2 AND (cardinality(p_watchers) > 0 OR EXISTS (SELECT 1 FROM cursors c WHERE c.target = p_key)) THEN
        -- Explicit rows whose live notice quotes an older last_seen (after a re-seed, or an acknowledge
        -- that consumed nothing) lose that entry first, so the append replacing it evicts nothing older.
        SELECT array_agg(c.watcher::text ORDER BY c.watcher) INTO v_ws
          FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher
         WHERE c.target = p_key AND c.provenance = 'explicit' AND c.watcher IS DISTINCT FROM p_actor_id
           AND c.queued_ls <> c.last_seen AND c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap;
        PERFORM sw_remove_slot(u.w, p_key, p_cap) FROM unnest(coalesce(v_ws, '{}')) AS u(w);
        v_ws := NULL;
        v_wake := nextval('wake_position');
        IF cardinality(p_watchers) > 0 THEN
            -- Producer-known watchers (not the actor, not muted): material update, creating the row.
            -- Explicit rows whose notice must be (re)queued are marked queued_idx = -1 for the fill below.
            INSERT INTO queue_heads (session_key)
            SELECT DISTINCT u.w FROM unnest(p_watchers) AS u(w)
             WHERE u.w IS DISTINCT FROM p_actor_id
               AND NOT EXISTS (SELECT 1 FROM watch_mutes m WHERE m.watcher = u.w AND m.target = p_key)
            ON CONFLICT DO NOTHING;
            INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at, queued_idx)
            SELECT DISTINCT u.w, p_key, 0, v_seq, v_seq, 'explicit', p_now, -1 FROM unnest(p_watchers) AS u(w)
             WHERE u.w IS DISTINCT FROM p_actor_id
               AND NOT EXISTS (SELECT 1 FROM watch_mutes m WHERE m.watcher = u.w AND m.target = p_key)
            ON CONFLICT (target, watcher) DO UPDATE
               SET notified = CASE WHEN cursors.notified = cursors.last_seen THEN v_seq ELSE cursors.notified END,
                   material = v_seq, updated_at = p_now,
                   queued_idx = CASE WHEN cursors.provenance = 'explicit' AND NOT EXISTS (
                                         SELECT 1 FROM queue_heads h WHERE h.session_key = cursors.watcher
                                            AND cursors.queued_idx > h.drained
                                            AND h.appended - cursors.queued_idx < p_cap
                                            AND cursors.queued_ls = cursors.last_seen)
                                     THEN -1 ELSE cursors.queued_idx END;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            v_moved := v_n;
        END IF;
        -- The fan-out, two statements whatever the number of watchers (and no join a bad row estimate
        -- could turn quadratic). Rows moved: every registered watcher except the actor (self-suppression)
        -- and the rows marked above. Those that are explicit and whose notice is not queued live and
        -- current take the next index of their watcher's queue: bump those heads first...
        UPDATE queue_heads h SET appended = h.appended + 1, last_wake = v_wake
         WHERE h.session_key IN (
               SELECT c.watcher FROM cursors c
                WHERE c.target = p_key
                  AND ((c.material < v_seq AND c.watcher IS DISTINCT FROM p_actor_id) OR c.queued_idx = -1)
                  AND c.provenance = 'explicit'
                  AND NOT EXISTS (SELECT 1 FROM queue_heads h2 WHERE h2.session_key = c.watcher
                                     AND c.queued_idx > h2.drained AND h2.appended - c.queued_idx < p_cap
                                     AND c.queued_ls = c.last_seen));
        -- ...then move the cursors (frozen-watermark rule) and fill the requeued slots from their heads.
        -- The requeue test gives the same answer after the bump: a bumped head only ever makes its
        -- slot less live, and heads that were not bumped did not change.
        UPDATE cursors c
           SET notified = CASE WHEN c.notified = c.last_seen THEN v_seq ELSE c.notified END,
               material = v_seq, updated_at = p_now,
               (queued_idx, queued_ls, queued_ts, queued_quiet, wake_seq) = (
                   SELECT CASE WHEN q.requeue THEN q.appended ELSE c.queued_idx END,
                          CASE WHEN q.requeue THEN c.last_seen ELSE c.queued_ls END,
                          CASE WHEN q.requeue THEN p_now ELSE c.queued_ts END,
                          CASE WHEN q.requeue THEN false ELSE c.queued_quiet END,
                          CASE WHEN q.requeue THEN v_wake ELSE c.wake_seq END
                     FROM (SELECT h.appended,
                                  c.provenance = 'explicit' AND NOT coalesce(
                                      c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap
                                      AND c.queued_ls = c.last_seen, false) AS requeue
                             FROM (SELECT 1) one
                             LEFT JOIN queue_heads h ON h.session_key = c.watcher) q)
         WHERE c.target = p_key
           AND ((c.material < v_seq AND c.watcher IS DISTINCT FROM p_actor_id) OR c.queued_idx = -1);
        GET DIAGNOSTICS v_n = ROW_COUNT;  -- rows marked above count twice: only "any moved?" matters
        v_moved := v_moved + v_n;
        IF v_moved > 0 THEN
            -- Queue-only (ambient) notices use replace semantics, one pair at a time.
            FOR r IN SELECT c.watcher, c.last_seen FROM cursors c
                      WHERE c.target = p_key AND c.material = v_seq AND c.provenance = 'ambient-group'
                      ORDER BY c.watcher
            LOOP
                PERFORM sw_append_notice(r.watcher, p_key, r.last_seen, p_ctx, p_now, p_cap, true, false);
            END LOOP;
            SELECT array_agg(c.watcher::text ORDER BY c.watcher), array_agg(c.wake_seq ORDER BY c.watcher)
              INTO v_ws, v_ps
              FROM cursors c WHERE c.target = p_key AND c.material = v_seq AND c.provenance = 'explicit';
            IF v_ws IS NOT NULL THEN
                PERFORM sw_notify(p_channel, p_origin, v_ws, array_fill(p_key, ARRAY[cardinality(v_ws)]), v_ps);
            END IF;
        END IF;
    END IF;
    o_inserted := true;
    o_sequence := v_seq;
    o_wakes := v_ws;
    o_wake_seqs := v_ps;
    RETURN NEXT;
END $$;

-- Acknowledge the frozen watermark of each target; queue exactly one reopen where material moved on.
-- p_targets are distinct (the caller dedupes) and in the order the notices were consumed, which is
-- the order reopens are queued in; p_ctxs are their context keys.
CREATE FUNCTION sw_ack(p_lock bigint, p_watcher text, p_targets text[], p_ctxs text[], p_now bigint,
                       p_cap integer, p_channel text, p_origin text)
RETURNS TABLE (o_target text, o_last_seen bigint, o_quiet boolean, o_wake_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_targets text[];
    v_seen    bigint[];
    v_provs   text[];
    v_ctxs    text[];
    v_ls      bigint;
    v_mat     bigint;
    v_prov    text;
    v_ws      text[] := '{}';
    v_ts      text[] := '{}';
    v_ps      bigint[] := '{}';
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    IF cardinality(p_targets) = 1 THEN  -- the common case: one notice consumed, a plain update
        UPDATE cursors c SET last_seen = c.notified, notified = greatest(c.material, c.notified), updated_at = p_now
         WHERE c.watcher = p_watcher AND c.target = p_targets[1]
        RETURNING c.last_seen, c.material, c.provenance INTO v_ls, v_mat, v_prov;
        IF NOT FOUND OR v_mat <= v_ls THEN
            RETURN;
        END IF;
        v_targets := p_targets;
        v_seen := ARRAY[v_ls];
        v_provs := ARRAY[v_prov];
        v_ctxs := p_ctxs;
    ELSE
        WITH acked AS (
            UPDATE cursors c SET last_seen = c.notified, notified = greatest(c.material, c.notified),
                                 updated_at = p_now
             WHERE c.watcher = p_watcher AND c.target = ANY (p_targets)
            RETURNING c.target::text AS target, c.last_seen, c.material, c.provenance),
        reopen AS (
            SELECT a.target, a.last_seen, a.provenance, array_position(p_targets, a.target) AS pos
              FROM acked a WHERE a.material > a.last_seen)
        SELECT array_agg(r.target ORDER BY r.pos), array_agg(r.last_seen ORDER BY r.pos),
               array_agg(r.provenance ORDER BY r.pos), array_agg(p_ctxs[r.pos] ORDER BY r.pos)
          INTO v_targets, v_seen, v_provs, v_ctxs
          FROM reopen r;
    END IF;
    -- Material moved on after these notices froze: exactly one reopen each, in consumption order.
    FOR i IN 1 .. coalesce(cardinality(v_targets), 0) LOOP
        o_target := v_targets[i];
        o_last_seen := v_seen[i];
        o_quiet := v_provs[i] = 'ambient-group';
        PERFORM sw_append_notice(p_watcher, o_target, o_last_seen, v_ctxs[i], p_now, p_cap, o_quiet, true);
        SELECT c.wake_seq INTO o_wake_seq FROM cursors c WHERE c.target = o_target AND c.watcher = p_watcher;
        IF NOT o_quiet THEN
            v_ws := v_ws || p_watcher;
            v_ts := v_ts || o_target;
            v_ps := v_ps || o_wake_seq;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF cardinality(v_ws) > 0 THEN
        PERFORM sw_notify(p_channel, p_origin, v_ws, v_ts, v_ps);
    END IF;
END $$;

-- Explicit or ambient watch seeded at the target's head; never clobbers an existing row.
CREATE FUNCTION sw_register(p_lock bigint, p_watcher text, p_target text, p_agent text, p_provenance text,
                            p_now bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_prov text;
    v_head bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    IF p_provenance <> 'explicit'
       AND EXISTS (SELECT 1 FROM watch_mutes m WHERE m.watcher = p_watcher AND m.target = p_target) THEN
        RETURN false;
    END IF;
    SELECT c.provenance INTO v_prov FROM cursors c WHERE c.watcher = p_watcher AND c.target = p_target;
    IF p_provenance = 'explicit' THEN
        DELETE FROM watch_mutes m WHERE m.watcher = p_watcher AND m.target = p_target;
    END IF;
    IF v_prov IS NOT NULL THEN
        IF v_prov = 'ambient-group' AND p_provenance = 'explicit' THEN
            UPDATE cursors c SET provenance = 'explicit', queued_quiet = false  -- its queued notice wakes now
            WHERE c.watcher = p_watcher AND c.target = p_target;
        END IF;
        RETURN true;
    END IF;
    SELECT h.last_sequence INTO v_head FROM heads h WHERE h.session_key = p_target AND h.agent_id = p_agent;
    v_head := coalesce(v_head, 0);
    PERFORM sw_ensure_head(p_watcher);
    INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at)
    VALUES (p_watcher, p_target, v_head, v_head, v_head, p_provenance, p_now);
    RETURN true;
END $$;

-- Delete the cursor and its queued notice, and mute implicit notices for the pair.
CREATE FUNCTION sw_unwatch(p_lock bigint, p_watcher text, p_target text, p_ctx text, p_now bigint, p_cap integer)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_deleted bigint;
    v_n       bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM sw_remove_slot(p_watcher, p_target, p_cap);
    DELETE FROM cursors c WHERE c.target = p_target AND c.watcher = p_watcher;
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    DELETE FROM system_events e WHERE e.session_key = p_watcher AND e.context_key = p_ctx;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n > 0 THEN
        PERFORM sw_compact(p_watcher, p_cap);
    END IF;
    INSERT INTO watch_mutes (watcher, target, created_at) VALUES (p_watcher, p_target, p_now) ON CONFLICT DO NOTHING;
    RETURN v_deleted > 0;
END $$;

-- Remove a session: its log, head, link, transcript, queue, and every cursor to or from it.
CREATE FUNCTION sw_delete_session(p_lock bigint, p_key text, p_agent text, p_ctx text, p_cap integer)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_found   boolean;
    v_touched text[];
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    DELETE FROM sessions s WHERE s.session_key = p_key AND s.agent_id = p_agent;
    v_found := FOUND;
    DELETE FROM upstream_links l WHERE l.session_key = p_key AND l.agent_id = p_agent;
    DELETE FROM events e WHERE e.session_key = p_key AND e.agent_id = p_agent;
    DELETE FROM heads h WHERE h.session_key = p_key AND h.agent_id = p_agent;
    DELETE FROM messages m WHERE m.session_key = p_key AND m.agent_id = p_agent;
    WITH a AS (DELETE FROM cursors c WHERE c.target = p_key RETURNING c.watcher::text AS w),
         b AS (DELETE FROM system_events e WHERE e.context_key = p_ctx RETURNING e.session_key::text AS w)
    SELECT array_agg(DISTINCT u.w) INTO v_touched FROM (SELECT w FROM a UNION SELECT w FROM b) u WHERE u.w <> p_key;
    DELETE FROM cursors c WHERE c.watcher = p_key;
    DELETE FROM watch_mutes m WHERE m.watcher = p_key OR m.target = p_key;
    DELETE FROM system_events e WHERE e.session_key = p_key;
    DELETE FROM queue_heads h WHERE h.session_key = p_key;
    PERFORM sw_compact(t.w, p_cap) FROM unnest(coalesce(v_touched, '{}')) AS t(w);
    RETURN v_found;
END $$;

-- A watcher's live queue, oldest first: notice slots (o_target set) and generic entries.
CREATE FUNCTION sw_queue(p_session text, p_cap integer)
RETURNS TABLE (o_idx bigint, o_target text, o_ls bigint, o_ts bigint, o_quiet boolean, o_ctx text, o_text text)
LANGUAGE sql STABLE AS $$
    SELECT c.queued_idx, c.target::text, c.queued_ls, c.queued_ts, c.queued_quiet, NULL::text, NULL::text
      FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher
     WHERE c.watcher = p_session AND c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap
    UNION ALL
    SELECT e.idx, NULL, NULL, e.ts, false, e.context_key::text, e.text
      FROM system_events e JOIN queue_heads h ON h.session_key = e.session_key
     WHERE e.session_key = p_session AND e.idx > h.drained AND h.appended - e.idx < p_cap
    ORDER BY 1;
$$;

-- The first half of a drain: under the writer lock, return the live queue and empty it. The caller
-- acknowledges the consumed session-state entries (sw_ack) in the same transaction.
CREATE FUNCTION sw_take_queue(p_lock bigint, p_session text, p_cap integer)
RETURNS TABLE (o_idx bigint, o_target text, o_ls bigint, o_ts bigint, o_quiet boolean, o_ctx text, o_text text)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    RETURN QUERY SELECT * FROM sw_queue(p_session, p_cap);
    UPDATE queue_heads h SET drained = h.appended WHERE h.session_key = p_session;
    DELETE FROM system_events e WHERE e.session_key = p_session;
END $$;

-- Retention prune (store.base.Store.prune), one call. One prune at a time across gateways: a prune
-- that finds another running is skipped. Unless p_force, skipped when one ran within p_interval (the
-- time is shared in meta). The writer lock is taken only when something is due for deletion.
CREATE FUNCTION sw_prune(p_prune_lock bigint, p_lock bigint, p_now bigint, p_cutoff bigint, p_max_rows bigint,
                         p_force boolean, p_interval bigint, p_cap integer,
                         OUT o_skipped boolean, OUT o_rows_deleted bigint, OUT o_cursors_deleted bigint,
                         OUT o_heads_stamped bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_last     text;
    v_old      boolean;
    v_stale    boolean;
    v_lo       bigint;
    v_hi       bigint;
    v_boundary bigint;
    v_n        bigint;
    v_expired  text[];
BEGIN
    -- Losing a prune to a server crash is harmless (the next one redoes it, and stamps and deletes
    -- commit together): do not wait for the WAL flush.
    PERFORM set_config('synchronous_commit', 'off', true);
    o_skipped := false;
    o_rows_deleted := 0;
    o_cursors_deleted := 0;
    o_heads_stamped := 0;
    IF NOT pg_try_advisory_xact_lock(p_prune_lock) THEN
        o_skipped := true;
        RETURN;
    END IF;
    IF NOT p_force THEN
        SELECT m.value INTO v_last FROM meta m WHERE m.key = 'last_prune_at';
        IF v_last IS NOT NULL AND p_now - v_last::bigint < p_interval THEN
            o_skipped := true;
            RETURN;
        END IF;
    END IF;
    INSERT INTO meta (key, value) VALUES ('last_prune_at', p_now::text)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
    -- The cheap path: index probes only, and no writer lock when nothing is due.
    -- (the oldest event by index, whatever the planner thinks of "occurred_at < cutoff")
    v_old := coalesce((SELECT e.occurred_at FROM events e ORDER BY e.occurred_at LIMIT 1) < p_cutoff, false);
    v_lo := (SELECT e.sequence FROM events e ORDER BY e.sequence LIMIT 1);
    v_hi := (SELECT e.sequence FROM events e ORDER BY e.sequence DESC LIMIT 1);
    v_stale := EXISTS (SELECT 1 FROM cursors c WHERE c.updated_at < p_cutoff);
    IF NOT (v_old OR (v_lo IS NOT NULL AND v_hi - v_lo + 1 > p_max_rows) OR v_stale) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(p_lock);
    IF v_old THEN  -- age: stamp the pruned watermarks first, then delete
        UPDATE heads h SET pruned_max_sequence = m.mx
          FROM (SELECT e.session_key, e.agent_id, max(e.sequence) AS mx FROM events e
                 WHERE e.occurred_at < p_cutoff GROUP BY e.session_key, e.agent_id) m
         WHERE h.session_key = m.session_key AND h.agent_id = m.agent_id AND m.mx > h.pruned_max_sequence;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        o_heads_stamped := o_heads_stamped + v_n;
        DELETE FROM events e WHERE e.occurred_at < p_cutoff;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        o_rows_deleted := o_rows_deleted + v_n;
        v_lo := (SELECT e.sequence FROM events e ORDER BY e.sequence LIMIT 1);
        v_hi := (SELECT e.sequence FROM events e ORDER BY e.sequence DESC LIMIT 1);
    END IF;
    -- Cap: sequences are dense except for holes, so max - min + 1 bounds the row count cheaply.
    IF v_lo IS NOT NULL AND v_hi - v_lo + 1 > p_max_rows THEN
        SELECT e.sequence INTO v_boundary FROM events e ORDER BY e.sequence DESC LIMIT 1 OFFSET p_max_rows;
        IF v_boundary IS NOT NULL THEN
            UPDATE heads h SET pruned_max_sequence = m.mx
              FROM (SELECT e.session_key, e.agent_id, max(e.sequence) AS mx FROM events e
                     WHERE e.sequence <= v_boundary GROUP BY e.session_key, e.agent_id) m
             WHERE h.session_key = m.session_key AND h.agent_id = m.agent_id AND m.mx > h.pruned_max_sequence;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            o_heads_stamped := o_heads_stamped + v_n;
            DELETE FROM events e WHERE e.sequence <= v_boundary;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            o_rows_deleted := o_rows_deleted + v_n;
        END IF;
    END IF;
    -- Expired cursors take their queued notices with them.
    WITH d AS (DELETE FROM cursors c WHERE c.updated_at < p_cutoff RETURNING c.watcher::text AS w)
    SELECT count(*), array_agg(DISTINCT d.w) INTO o_cursors_deleted, v_expired FROM d;
    PERFORM sw_compact(x.w, p_cap) FROM unnest(coalesce(v_expired, '{}')) AS x(w);
END $$;
