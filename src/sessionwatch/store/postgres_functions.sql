-- The PostgreSQL store's plpgsql functions: the hot write paths (record, acknowledge, drain and
-- acknowledge-by-id, enqueue, reconcile, sweep, prune) in one round trip each.
--
-- Not a migration. store/postgres/connection.py applies this whole file in one transaction on start, after the
-- numbered migrations and under the same advisory lock, whenever the database's copy differs from this
-- one (meta keys functions_sha256 and functions_revision). So a fix is an edit here, never a new
-- migration, and every statement must be idempotent:
--   - CREATE OR REPLACE FUNCTION for every function;
--   - a function whose parameter names or types or result change: DROP FUNCTION IF EXISTS with the old
--     signature just before it (CREATE OR REPLACE cannot change those);
--   - a function no longer used: DROP FUNCTION IF EXISTS with its signature, in the list below,
-- so a database upgraded from any version ends with exactly the functions a new one has
-- (tests/conformance/test_schema.py compares them). A function may use what the migrations created,
-- never the other way round (migrations run first, and on a new database before any function exists).
--
-- revision: 5
-- Bump the revision with every change: a gateway never replaces the functions of a higher revision
-- (an older gateway restarted during a rolling upgrade leaves the newer functions in place).
--
-- The Python side calls these with named notation (sw_record(p_lock => ..., ...)) and reads result
-- columns by name, so parameter and column names are part of the contract, not only their order.
--
-- Commit order. Every transaction that inserts an event, or moves a cursor or a queue, first takes the
-- store's writer lock: a transaction-level advisory lock whose key the caller passes in (p_lock). So
-- writers are serialized, sequences become visible in commit order, and a reader polling
-- "sequence > last" can never skip a lower sequence that commits late. Readers take no lock.
--
-- The hot writers (sw_record, sw_ack, sw_drain, sw_enqueue, sw_reconcile, sw_sweep) commit without
-- waiting for the WAL flush, so the writer lock is not held across an fsync; when the session wants durable commits the
-- caller then waits for the flush outside the lock (store/postgres/connection.py, PostgresConnection._flush), where
-- concurrent gateways share one fsync (group commit).
--
-- Twins. SQLite encodes the same rules in SQL driven from Python (store/sqlite*.py). Each function that
-- has a twin names it ("twin:") and a conformance test that runs both backends through the rule; every
-- one is also bound by the model check sessionwatch/testing/stateful.py. Change both, or neither.

-- Retired functions (none yet): DROP FUNCTION IF EXISTS sw_example(bigint, text);


-- Wake notifications: {"o": origin, "w": [watchers], "t": [targets], "s": [wake_seqs]} (parallel arrays),
-- split in halves until each payload fits the server's 8000-byte limit (one item is under 4300 bytes:
-- keys are at most 512 characters). Sent in the caller's transaction: delivered on commit only.
CREATE OR REPLACE FUNCTION sw_notify(p_channel text, p_origin text, p_watchers text[], p_targets text[],
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

-- The context-key codec of notices.py, for the functions that render or decode a key in the server
-- (sw_drain, sw_sweep) rather than in a second round trip through Python. A key is 'session-state:' and
-- the hex of the target's UTF-8 bytes (lower case, as Python's bytes.hex).
-- twin: notices.py::context_key_for
-- bound by: tests/conformance/test_context_keys.py::test_sql_renders_context_keys_as_python_does
CREATE OR REPLACE FUNCTION sw_context_key(p_target text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT 'session-state:' || encode(convert_to(p_target, 'UTF8'), 'hex');
$$;

-- sw_context_key of each target, in order.
CREATE OR REPLACE FUNCTION sw_context_keys(p_targets text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY(SELECT sw_context_key(u.t) FROM unnest(p_targets) WITH ORDINALITY u(t, n) ORDER BY u.n);
$$;

-- The target a context key names, or NULL for anything else (fail closed), exactly as Python decodes it:
-- the prefix in any ASCII case (translate, not lower(): that follows the locale, and Python's lower() of
-- a non-ASCII letter never yields the prefix), then a non-empty payload of even length made of hex
-- pairs, each maybe preceded by ASCII whitespace and the whole maybe followed by it (bytes.fromhex skips
-- those), spelling valid UTF-8. Invalid UTF-8 is NULL, never an error; so is a NUL byte, valid to
-- Python but not in a PostgreSQL text (no session key holds one). Only a key that passed every check
-- enters the block with the handler (a subtransaction).
-- twin: notices.py::target_from_context_key
-- bound by: tests/conformance/test_context_keys.py::test_sql_decodes_context_keys_as_python_does
CREATE OR REPLACE FUNCTION sw_target_of_context_key(p_ctx text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    v_hex text := substr(p_ctx, 15);
BEGIN
    IF translate(left(p_ctx, 14), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') <> 'session-state:'
       OR v_hex = '' OR length(v_hex) % 2 = 1
       OR v_hex !~ E'^([ \\t\\n\\r\\v\\f]*[0-9A-Fa-f]{2})*[ \\t\\n\\r\\v\\f]*$' THEN
        RETURN NULL;
    END IF;
    BEGIN
        RETURN convert_from(decode(translate(v_hex, E' \t\n\r\x0b\f', ''), 'hex'), 'UTF8');
    EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character THEN
        RETURN NULL;
    END;
END $$;

-- twin: store/sqlite/queue_model.py::ensure_head
-- bound by: sessionwatch/testing/queue.py::test_entries_are_per_session, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_ensure_head(p_session text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO queue_heads (session_key) VALUES (p_session) ON CONFLICT DO NOTHING;
$$;

-- The chain walk of p_session's queue (newest first); p_over steps over slots just taken out
-- (queued_idx = 0, queued_id kept) for sw_compact. o_go: may the walk go on past this node (a row with
-- o_go false ends it). At most p_bound rows.
-- twin: store/sqlite/queue_model.py::_walked_slots
-- bound by: sessionwatch/testing/queue.py::test_queue_of_a_wide_watcher_matches_an_eager_list_under_reappends_drains_and_unwatches, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_walk(p_session text, p_cap integer, p_over boolean, p_bound integer)
RETURNS TABLE (o_target text, o_idx bigint, o_id bigint, o_prev text, o_ls bigint, o_ts bigint, o_quiet boolean,
               o_live boolean, o_go boolean, o_n integer)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE chain AS (
        SELECT c.target::text AS target, c.queued_idx AS idx, c.queued_id AS id, c.queued_prev::text AS prev,
               c.queued_ls AS ls, c.queued_ts AS ts, c.queued_quiet AS quiet,
               c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap AS live,
               (c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap) OR (p_over AND c.queued_idx = 0) AS go,
               1 AS n
          FROM queue_heads h JOIN cursors c ON c.target = h.last_slot AND c.watcher = h.session_key
         WHERE h.session_key = p_session
        UNION ALL
        SELECT c.target::text, c.queued_idx, c.queued_id, c.queued_prev::text, c.queued_ls, c.queued_ts, c.queued_quiet,
               c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap,
               (c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap) OR (p_over AND c.queued_idx = 0),
               w.n + 1
          FROM chain w JOIN cursors c ON c.target = w.prev AND c.watcher = p_session
          JOIN queue_heads h ON h.session_key = p_session
         WHERE w.go AND w.n < p_bound AND c.queued_id < w.id)
    SELECT * FROM chain;
$$;

-- Renumber a queue's live entries to the top of its index range after a removal from the middle, drop
-- dead generic rows, and relink the slot chain over exactly the live slots (store/sqlite/queue_model.py: _compact).
-- The live slots come from the chain walk, which steps over the slots the caller just took out; when
-- the walk meets a deleted cursor row (bulk deletions: delete-session, reset, stale-cursor expiry, an
-- unwatch linked behind a live slot) they come from the watcher's cursors instead.
-- Negative indices first: no transient key collisions.
-- twin: store/sqlite/queue_model.py::_compact
-- bound by: sessionwatch/testing/queue.py::test_a_replaced_notice_does_not_evict_an_older_entry, sessionwatch/testing/queue.py::test_deleting_a_target_keeps_the_older_and_newer_notices_of_its_watcher, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_compact(p_session text, p_cap integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_app    bigint;
    v_dr     bigint;
    v_last   text;
    v_bound  integer := 2 * p_cap + 1;  -- live slots, those just taken out, and the node ending the walk
    v_slots  text[];
    v_prev   text;
    v_go     boolean;
    v_n      integer;
    v_scan   boolean := false;
    v_moved  bigint;
BEGIN
    PERFORM sw_ensure_head(p_session);
    SELECT h.appended, h.drained, h.last_slot INTO v_app, v_dr, v_last FROM queue_heads h WHERE h.session_key = p_session;
    SELECT coalesce(array_agg(w.o_target ORDER BY w.o_n) FILTER (WHERE w.o_live), '{}'),
           (array_agg(w.o_prev ORDER BY w.o_n DESC))[1], (array_agg(w.o_go ORDER BY w.o_n DESC))[1], max(w.o_n)
      INTO v_slots, v_prev, v_go, v_n
      FROM sw_walk(p_session, p_cap, true, v_bound) w;
    IF v_n IS NULL THEN
        v_scan := v_last IS NOT NULL;  -- the newest node was deleted
    ELSIF v_go AND v_prev IS NOT NULL THEN
        v_scan := v_n >= v_bound
                  OR NOT EXISTS (SELECT 1 FROM cursors c WHERE c.target = v_prev AND c.watcher = p_session);
    END IF;
    IF v_scan THEN
        SELECT coalesce(array_agg(c.target::text ORDER BY c.queued_idx DESC), '{}') INTO v_slots FROM cursors c
         WHERE c.watcher = p_session AND c.queued_idx > v_dr AND v_app - c.queued_idx < p_cap;
    END IF;
    -- One statement numbers the live entries (one snapshot), moves both kinds and relinks the slots.
    WITH live AS (
        SELECT l.slot, l.ref, l.idx, l.prev, v_app - count(*) OVER () + row_number() OVER (ORDER BY l.idx) AS new_idx
          FROM (SELECT true AS slot, c.target::text AS ref, c.queued_idx AS idx, c.queued_prev::text AS prev
                  FROM cursors c
                 WHERE c.target = ANY (v_slots) AND c.watcher = p_session
                UNION ALL
                SELECT false, NULL, e.idx, NULL FROM system_events e
                 WHERE e.session_key = p_session AND e.idx > v_dr AND v_app - e.idx < p_cap) l),
    linked AS (
        SELECT l.ref, l.idx, l.prev, l.new_idx, lag(l.ref) OVER (ORDER BY l.idx) AS new_prev FROM live l WHERE l.slot),
    slots AS (
        UPDATE cursors c SET queued_idx = k.new_idx, queued_prev = k.new_prev FROM linked k
         WHERE (k.new_idx <> k.idx OR k.prev IS DISTINCT FROM k.new_prev) AND c.watcher = p_session AND c.target = k.ref
        RETURNING 1),
    generic AS (
        UPDATE system_events e SET idx = -l.new_idx FROM live l
         WHERE NOT l.slot AND l.new_idx <> l.idx AND e.session_key = p_session AND e.idx = l.idx
        RETURNING 1)
    SELECT (SELECT count(*) FROM slots) + (SELECT count(*) FROM generic) INTO v_moved;
    IF v_slots[1] IS DISTINCT FROM v_last THEN
        UPDATE queue_heads h SET last_slot = v_slots[1] WHERE h.session_key = p_session;
    END IF;
    UPDATE system_events e SET idx = -e.idx WHERE e.session_key = p_session AND e.idx < 0;
    DELETE FROM system_events e WHERE e.session_key = p_session AND (e.idx <= v_dr OR v_app - e.idx >= p_cap);
END $$;

-- Take the pair's notice out of the queue (the cursor stays); compact when it was live.
-- twin: store/sqlite/queue_model.py::remove_slot
-- bound by: sessionwatch/testing/delivery.py::test_a_read_covering_a_queued_notice_withdraws_it, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_remove_slot(p_watcher text, p_target text, p_cap integer) RETURNS boolean
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

-- Queue the pair's notice quoting p_ls (store/sqlite/queue_model.py: append_notice): dedupe (explicit) or replace
-- (queue-only); one slot per pair. The cursor must exist. Returns the append index, or NULL when
-- nothing was appended. p_wake stamps wake_seq (a waking notice other gateways may poll for).
-- twin: store/sqlite/queue_model.py::append_notice
-- bound by: sessionwatch/testing/watchers.py::test_material_updates_while_pending_keep_one_byte_identical_notice, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_append_notice(p_watcher text, p_target text, p_ls bigint, p_ctx text, p_ts bigint,
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
    -- The slot takes the head's next index and, as its predecessor in the chain, the head's newest slot;
    -- then the head moves on (the same two row writes as without the chain).
    UPDATE cursors c SET queued_idx = h.appended + 1, queued_id = h.appended + 1, queued_prev = h.last_slot,
                         queued_ls = p_ls, queued_ts = p_ts, queued_quiet = p_quiet,
                         wake_seq = coalesce(v_wake, c.wake_seq)
      FROM queue_heads h
     WHERE h.session_key = p_watcher AND c.target = p_target AND c.watcher = p_watcher
    RETURNING c.queued_idx INTO v_idx;
    UPDATE queue_heads h SET appended = h.appended + 1, last_wake = coalesce(v_wake, h.last_wake),
                             last_slot = p_target
     WHERE h.session_key = p_watcher;
    RETURN v_idx;
END $$;

-- Queue any other entry, deduplicated by context key + exact text (store/sqlite/queue_model.py: append_generic).
-- twin: store/sqlite/queue_model.py::append_generic
-- bound by: sessionwatch/testing/queue.py::test_dedupe_is_by_context_key_and_exact_text, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_append_generic(p_session text, p_text text, p_ctx text, p_ts bigint, p_cap integer)
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
    INSERT INTO system_events (session_key, idx, eid, context_key, text, ts)
    VALUES (p_session, v_idx, v_idx, p_ctx, p_text, p_ts);
    DELETE FROM system_events e WHERE e.session_key = p_session AND (e.idx <= v_dr OR v_idx - e.idx >= p_cap);
    RETURN v_idx;
END $$;

-- The enqueue host operation: a canonical notice goes to its pair's slot when the cursor exists,
-- anything else is a generic entry. Returns (index, whether it went to a slot); index NULL = not queued.
-- twin: store/sqlite/queue.py::SQLiteQueue.enqueue
-- bound by: sessionwatch/testing/queue.py::test_a_hand_queued_copy_of_a_pending_notice_is_deduped, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_enqueue(p_lock bigint, p_session text, p_text text, p_ctx text, p_ts bigint, p_cap integer,
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
-- twin: store/sqlite/queue.py::SQLiteQueue.sweep
-- bound by: sessionwatch/testing/sweep_prune.py::test_sweep_rematerializes_a_notice_evicted_by_the_cap, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_append_notices(p_watchers text[], p_targets text[], p_ls bigint[], p_ctxs text[],
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

-- The sweep (store.base.Store.sweep), whole: under the writer lock, every pair whose material moved
-- past last_seen and whose watcher session exists is marked notified and queues its notice quoting
-- last_seen (sw_append_notices, which NOTIFYs the waking ones), in (watcher, target) order by code
-- point (COLLATE "C", as SQLite sorts). One row per pair: o_quiet (ambient-group), o_wake_seq.
-- twin: store/sqlite/queue.py::SQLiteQueue.sweep
-- bound by: sessionwatch/testing/sweep_prune.py::test_sweep_rematerializes_a_notice_evicted_by_the_cap, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_sweep(p_lock bigint, p_now bigint, p_cap integer, p_channel text, p_origin text)
RETURNS TABLE (o_watcher text, o_target text, o_quiet boolean, o_wake_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_ws text[];
    v_ts text[];
    v_ls bigint[];
    v_qs boolean[];
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    WITH swept AS (  -- lagging is material > last_seen, stored (migration 0008): the partial index's predicate
        UPDATE cursors c SET notified = c.material, updated_at = p_now
         WHERE c.lagging AND EXISTS (SELECT 1 FROM sessions s WHERE s.session_key = c.watcher)
        RETURNING c.watcher::text AS w, c.target::text AS t, c.last_seen AS ls, c.provenance = 'ambient-group' AS q)
    SELECT array_agg(s.w ORDER BY s.w COLLATE "C", s.t COLLATE "C"),
           array_agg(s.t ORDER BY s.w COLLATE "C", s.t COLLATE "C"),
           array_agg(s.ls ORDER BY s.w COLLATE "C", s.t COLLATE "C"),
           array_agg(s.q ORDER BY s.w COLLATE "C", s.t COLLATE "C")
      INTO v_ws, v_ts, v_ls, v_qs
      FROM swept s;
    IF v_ws IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY  -- a join, not subscripts: a subscript into a text[] walks it from the start
        SELECT u.w, u.t, u.q, a.wake_seq
          FROM unnest(v_ws, v_ts, v_qs) WITH ORDINALITY u(w, t, q, n)
          JOIN sw_append_notices(v_ws, v_ts, v_ls, sw_context_keys(v_ts), v_qs, p_now, p_cap, p_channel, p_origin)
               WITH ORDINALITY a(idx, wake_seq, n) ON a.n = u.n
         ORDER BY u.n;
END $$;

-- sw_record of revision 3 (before p_client_dedupe):
DROP FUNCTION IF EXISTS sw_record(bigint, text, text, text, text, text, text, text, text, bigint, text, text, text[],
                                  boolean, integer, text, bigint, integer, text, text, bigint, text);
-- Record one event (store.base.Store.record): insert with dedupe, bump the head, seed or move cursors,
-- queue notices with set-based fan-out, NOTIFY the waking watchers. p_mode: 0 log-only, 1 seeding,
-- 2 notify-eligible. No row when p_only_if_watched and nothing watches the session, or when
-- p_link_updated_at is given and the session's upstream link no longer has (updated_at, upstream_ref_json)
-- = (p_link_updated_at, p_link_ref); o_inserted = false with the existing event for a duplicate dedupe key:
-- one of the same agent and origin (p_client_dedupe: a client sent the key; migration 0009). p_client_dedupe
-- comes last with a default, so a gateway of revision 3 (a rolling upgrade) still finds the function.
-- twin: store/sqlite/log.py::SQLiteLog.record
-- bound by: sessionwatch/testing/watchers.py::test_acknowledge_on_drain_reopens_exactly_once,
--   sessionwatch/testing/agent_scope.py, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_record(p_lock bigint, p_dedupe text, p_key text, p_session_id text, p_agent text, p_kind text,
                          p_actor_type text, p_actor_id text, p_run_id text, p_occurred_at bigint, p_summary text,
                          p_body text, p_watchers text[], p_only_if_watched boolean, p_mode integer, p_ctx text,
                          p_now bigint, p_cap integer, p_channel text, p_origin text,
                          p_link_updated_at bigint, p_link_ref text, p_client_dedupe boolean DEFAULT false)
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
    INSERT INTO events (dedupe_key, client_dedupe, session_key, session_id, agent_id, kind, actor_type, actor_id,
                        run_id, occurred_at, summary, body)
    VALUES (p_dedupe, p_client_dedupe, p_key, p_session_id, p_agent, p_kind, p_actor_type, p_actor_id, p_run_id,
            p_occurred_at, p_summary, p_body)
    ON CONFLICT (agent_id, dedupe_key, client_dedupe) DO NOTHING
    RETURNING sequence INTO v_seq;
    IF v_seq IS NULL THEN
        RETURN QUERY SELECT false, e.sequence, e.session_key::text, e.agent_id::text, e.kind, e.actor_type,
                            e.occurred_at, e.summary, e.actor_id::text, e.session_id, e.run_id,
                            e.dedupe_key::text, e.body, NULL::text[], NULL::bigint[]
                       FROM events e
                      WHERE e.agent_id = p_agent AND e.dedupe_key = p_dedupe AND e.client_dedupe = p_client_dedupe;
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
        -- current are requeued: each takes its head's next index and, as its predecessor in the slot
        -- chain (see sw_compact), the head's newest slot; its wake_seq becomes v_wake, which no other
        -- row holds...
        UPDATE cursors c
           SET notified = CASE WHEN c.notified = c.last_seen THEN v_seq ELSE c.notified END,
               material = v_seq, updated_at = p_now,
               (queued_idx, queued_id, queued_prev, queued_ls, queued_ts, queued_quiet, wake_seq) = (
                   SELECT CASE WHEN q.requeue THEN q.appended + 1 ELSE c.queued_idx END,
                          CASE WHEN q.requeue THEN q.appended + 1 ELSE c.queued_id END,
                          CASE WHEN q.requeue THEN q.last_slot ELSE c.queued_prev END,
                          CASE WHEN q.requeue THEN c.last_seen ELSE c.queued_ls END,
                          CASE WHEN q.requeue THEN p_now ELSE c.queued_ts END,
                          CASE WHEN q.requeue THEN false ELSE c.queued_quiet END,
                          CASE WHEN q.requeue THEN v_wake ELSE c.wake_seq END
                     FROM (SELECT h.appended, h.last_slot,
                                  c.provenance = 'explicit' AND NOT coalesce(
                                      c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap
                                      AND c.queued_ls = c.last_seen, false) AS requeue
                             FROM (SELECT 1) one
                             LEFT JOIN queue_heads h ON h.session_key = c.watcher) q)
         WHERE c.target = p_key
           AND ((c.material < v_seq AND c.watcher IS DISTINCT FROM p_actor_id) OR c.queued_idx = -1);
        GET DIAGNOSTICS v_n = ROW_COUNT;  -- rows marked above count twice: only "any moved?" matters
        v_moved := v_moved + v_n;
        -- ...then the heads of the slots just requeued (found by their wake_seq) take that index, and
        -- p_key becomes their newest slot.
        IF v_n > 0 THEN
            UPDATE queue_heads h SET appended = h.appended + 1, last_wake = v_wake, last_slot = p_key
             WHERE h.session_key IN (SELECT c.watcher FROM cursors c WHERE c.target = p_key AND c.wake_seq = v_wake);
        END IF;
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
-- twin: store/sqlite/queue.py::SQLiteQueue._ack
-- bound by: sessionwatch/testing/watchers.py::test_acknowledge_on_drain_reopens_exactly_once, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_ack(p_lock bigint, p_watcher text, p_targets text[], p_ctxs text[], p_now bigint,
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
-- twin: store/sqlite/queue.py::SQLiteQueue.register_watch
-- bound by: sessionwatch/testing/watchers.py::test_an_explicit_watch_promotes_ambient_and_keeps_watermarks, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_register(p_lock bigint, p_watcher text, p_target text, p_agent text, p_provenance text,
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
-- twin: store/sqlite/queue.py::SQLiteQueue.unwatch
-- bound by: sessionwatch/testing/watchers.py::test_unwatch_drops_cursor_and_pending_notice_and_mutes_the_spawn_parent, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_unwatch(p_lock bigint, p_watcher text, p_target text, p_ctx text, p_now bigint, p_cap integer)
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
-- twin: store/sqlite/sessions.py::SQLiteSessions.delete_session
-- bound by: sessionwatch/testing/watchers.py::test_delete_removes_events_head_and_cursors_both_ways, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_delete_session(p_lock bigint, p_key text, p_agent text, p_ctx text, p_cap integer)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_found   boolean;
    v_touched text[];
    v_gone    bigint[];
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    DELETE FROM sessions s WHERE s.session_key = p_key AND s.agent_id = p_agent;
    v_found := FOUND;
    DELETE FROM upstream_links l WHERE l.session_key = p_key AND l.agent_id = p_agent;
    WITH d AS (DELETE FROM events e WHERE e.session_key = p_key AND e.agent_id = p_agent RETURNING e.sequence)
    SELECT array_agg(d.sequence) INTO v_gone FROM d;
    IF v_gone IS NOT NULL THEN
        PERFORM sw_forget_rows(v_gone);
    END IF;
    DELETE FROM heads h WHERE h.session_key = p_key AND h.agent_id = p_agent;
    DELETE FROM messages m WHERE m.session_key = p_key AND m.agent_id = p_agent;
    WITH a AS (DELETE FROM cursors c WHERE c.target = p_key RETURNING c.watcher::text AS w),
         b AS (DELETE FROM system_events e WHERE e.context_key = p_ctx RETURNING e.session_key::text AS w)
    SELECT array_agg(DISTINCT u.w) INTO v_touched FROM (SELECT w FROM a UNION SELECT w FROM b) u WHERE u.w <> p_key;
    DELETE FROM cursors c WHERE c.watcher = p_key;
    DELETE FROM watch_mutes m WHERE m.watcher = p_key OR m.target = p_key;
    DELETE FROM system_events e WHERE e.session_key = p_key;
    UPDATE queue_heads h SET drained = h.appended WHERE h.session_key = p_key;
    PERFORM sw_compact(t.w, p_cap) FROM unnest(coalesce(v_touched, '{}')) AS t(w);
    RETURN v_found;
END $$;

-- A watcher's live queue, oldest first: notice slots (o_target set) and generic entries. o_idx carries
-- the entry's stable id (named before ids existed; kept so the signature stays); the order is the
-- live append index. Slots: the chain walk (sw_walk), at most p_cap + 1 key lookups.
-- twin: store/sqlite/queue_model.py::entries
-- bound by: sessionwatch/testing/delivery.py::test_ids_stay_put_when_the_queue_is_renumbered, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_queue(p_session text, p_cap integer)
RETURNS TABLE (o_idx bigint, o_target text, o_ls bigint, o_ts bigint, o_quiet boolean, o_ctx text, o_text text)
LANGUAGE sql STABLE AS $$
    SELECT q.id, q.target, q.ls, q.ts, q.quiet, q.ctx, q.text FROM (
        SELECT w.o_idx AS pos, w.o_id AS id, w.o_target AS target, w.o_ls AS ls, w.o_ts AS ts,
               w.o_quiet AS quiet, NULL::text AS ctx, NULL::text AS text
          FROM sw_walk(p_session, p_cap, false, p_cap + 1) w WHERE w.o_live
        UNION ALL
        SELECT e.idx, e.eid, NULL, NULL, e.ts, false, e.context_key::text, e.text
          FROM system_events e JOIN queue_heads h ON h.session_key = e.session_key
         WHERE e.session_key = p_session AND e.idx > h.drained AND h.appended - e.idx < p_cap) q
    ORDER BY q.pos;
$$;

-- The first half of a drain: under the writer lock, return the live queue and empty it. sw_drain then
-- acknowledges the consumed session-state entries (sw_ack) in the same transaction.
-- twin: store/sqlite/queue_model.py::drain
-- bound by: sessionwatch/testing/queue.py::test_drain_returns_system_lines_and_empties_the_queue, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_take_queue(p_lock bigint, p_session text, p_cap integer)
RETURNS TABLE (o_idx bigint, o_target text, o_ls bigint, o_ts bigint, o_quiet boolean, o_ctx text, o_text text)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    RETURN QUERY SELECT * FROM sw_queue(p_session, p_cap);
    UPDATE queue_heads h SET drained = h.appended WHERE h.session_key = p_session;
    DELETE FROM system_events e WHERE e.session_key = p_session;
    DELETE FROM queue_leases l WHERE l.session_key = p_session;  -- sw_drain calls this only when none is live
END $$;

-- The prune's claim: one prune at a time across gateways, the shared
-- interval unless p_force. It deletes nothing: the caller then runs sw_prune_step until done, each
-- step its own short transaction.
-- twin: store/sqlite/log.py::SQLiteLog.prune
-- bound by: sessionwatch/testing/sweep_prune.py::test_pruning_after_recording_is_throttled_to_once_an_hour, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_prune(p_prune_lock bigint, p_lock bigint, p_now bigint, p_cutoff bigint, p_max_rows bigint,
                                    p_force boolean, p_interval bigint, p_cap integer,
                                    OUT o_skipped boolean, OUT o_rows_deleted bigint, OUT o_cursors_deleted bigint,
                                    OUT o_heads_stamped bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_last text;
BEGIN
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
END $$;

-- Acknowledge by id, first half: under the writer lock, return the live entries with these stable ids
-- and take them out of the queue (other entries stay; unknown ids are skipped). sw_drain then
-- acknowledges the session-state ones (sw_ack) in the same transaction, as for a drain.
-- twin: store/sqlite/queue_model.py::remove_ids
-- bound by: sessionwatch/testing/delivery.py::test_ack_removes_exactly_the_given_entries, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_take_entries(p_lock bigint, p_session text, p_ids bigint[], p_cap integer)
RETURNS TABLE (o_idx bigint, o_target text, o_ls bigint, o_ts bigint, o_quiet boolean, o_ctx text, o_text text)
LANGUAGE plpgsql AS $$
DECLARE
    v_live bigint[];
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    SELECT array_agg(q.o_idx) INTO v_live FROM sw_queue(p_session, p_cap) q WHERE q.o_idx = ANY (p_ids);
    IF v_live IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM sw_queue(p_session, p_cap) q WHERE q.o_idx = ANY (v_live);
    UPDATE cursors c SET queued_idx = 0 WHERE c.watcher = p_session AND c.queued_id = ANY (v_live);
    DELETE FROM system_events e WHERE e.session_key = p_session AND e.eid = ANY (v_live);
    DELETE FROM queue_leases l WHERE l.session_key = p_session AND l.eid = ANY (v_live);  -- delivered: whoever held them
    PERFORM sw_compact(p_session, p_cap);
END $$;

-- A drain (p_ids NULL) or an acknowledgement by id (store.base.Store.drain, acknowledge_entries), whole:
-- take the entries (sw_take_queue, sw_take_entries) and acknowledge their targets (sw_ack) in one call.
-- The targets are the slots' own, or for a generic entry the one its context key names
-- (sw_target_of_context_key), each once, in the order first taken. Rows: the taken entries in queue
-- order (o_kind 'entry', the columns of sw_queue), then the reopens sw_ack queued (o_kind 'reopen':
-- o_target, o_ls its last_seen, o_quiet, o_wake_seq).
-- twin: store/sqlite/queue.py::SQLiteQueue.drain and store/sqlite/queue.py::SQLiteQueue.acknowledge_entries
-- bound by: sessionwatch/testing/watchers.py::test_acknowledge_on_drain_reopens_exactly_once, sessionwatch/testing/delivery.py::test_ack_removes_exactly_the_given_entries, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_drain(p_lock bigint, p_session text, p_ids bigint[], p_cap integer, p_now bigint,
                                    p_channel text, p_origin text)
RETURNS TABLE (o_kind text, o_idx bigint, o_target text, o_ls bigint, o_ts bigint, o_quiet boolean, o_ctx text,
               o_text text, o_wake_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_taken   refcursor;
    v_target  text;
    v_targets text[] := '{}';
    v_n       integer := 0;
BEGIN
    IF p_ids IS NULL THEN
        -- A drain leaves the entries another delivery holds under a live lease (sw_lease): it takes the others.
        PERFORM pg_advisory_xact_lock(p_lock);
        IF EXISTS (SELECT 1 FROM queue_leases l WHERE l.session_key = p_session AND l.until > p_now) THEN
            SELECT coalesce(array_agg(q.o_idx), '{}') INTO p_ids FROM sw_queue(p_session, p_cap) q
             WHERE NOT EXISTS (SELECT 1 FROM queue_leases l
                                WHERE l.session_key = p_session AND l.eid = q.o_idx AND l.until > p_now);
            DELETE FROM queue_leases l WHERE l.session_key = p_session AND l.until <= p_now;
        END IF;
    END IF;
    IF p_ids IS NULL THEN
        OPEN v_taken FOR SELECT * FROM sw_take_queue(p_lock, p_session, p_cap);
    ELSE
        OPEN v_taken FOR SELECT * FROM sw_take_entries(p_lock, p_session, p_ids, p_cap);
    END IF;
    o_kind := 'entry';
    LOOP
        FETCH v_taken INTO o_idx, o_target, o_ls, o_ts, o_quiet, o_ctx, o_text;
        EXIT WHEN NOT FOUND;
        v_n := v_n + 1;
        v_target := coalesce(o_target, sw_target_of_context_key(o_ctx));
        IF v_target IS NOT NULL AND v_target <> ALL (v_targets) THEN
            v_targets := v_targets || v_target;
        END IF;
        RETURN NEXT;
    END LOOP;
    CLOSE v_taken;
    IF cardinality(v_targets) > 0 THEN
        RETURN QUERY
            SELECT 'reopen', NULL::bigint, a.o_target, a.o_last_seen, NULL::bigint, a.o_quiet, NULL::text,
                   NULL::text, a.o_wake_seq
              FROM sw_ack(p_lock, p_session, v_targets, sw_context_keys(v_targets), p_now, p_cap, p_channel,
                          p_origin) a;
    END IF;
    -- Something was taken: is a lagging pair left with no live notice (the cap evicted it)? The engine then
    -- queues those again (engine/evicted.py). Reads the watcher's lagging cursors only, up to the first.
    -- twin: store/sqlite/queue_model.py::has_withheld
    -- bound by: sessionwatch/testing/queue.py::test_a_notice_the_cap_evicted_is_back_after_a_drain_of_a_queue_no_longer_full
    IF v_n > 0 AND EXISTS (
        SELECT 1 FROM cursors c LEFT JOIN queue_heads h ON h.session_key = c.watcher
         WHERE c.watcher = p_session AND c.lagging
           AND NOT coalesce(c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap, false)) THEN
        RETURN QUERY SELECT 'withheld'::text, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint,
                            NULL::boolean, NULL::text, NULL::text, NULL::bigint;
    END IF;
END $$;

-- Delivery leases (store.base.CursorQueue.lease and the three after it; migration 0011). A lease row
-- (session, stable id) -> (holder, until) marks an entry handed to one delivery; a row whose until has
-- passed is void (the entry is back in the queue) and is deleted by the next lease or drain of the session.

-- Lease to p_holder until p_until the live entries no other live lease holds; rows: those entries (the
-- columns of sw_queue), in queue order. Under the writer lock: two leases never return one entry.
-- twin: store/sqlite/queue.py::SQLiteQueue.lease
-- bound by: sessionwatch/testing/leases.py::test_two_leases_never_share_an_entry
CREATE OR REPLACE FUNCTION sw_lease(p_lock bigint, p_session text, p_holder text, p_now bigint, p_until bigint,
                                    p_cap integer)
RETURNS TABLE (o_idx bigint, o_target text, o_ls bigint, o_ts bigint, o_quiet boolean, o_ctx text, o_text text)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    DELETE FROM queue_leases l WHERE l.session_key = p_session AND l.until <= p_now;
    RETURN QUERY
        WITH free AS (
            SELECT q.* FROM sw_queue(p_session, p_cap) q
             WHERE NOT EXISTS (SELECT 1 FROM queue_leases l
                                WHERE l.session_key = p_session AND l.eid = q.o_idx AND l.holder <> p_holder)
        ), taken AS (
            INSERT INTO queue_leases AS l (session_key, eid, holder, until)
            SELECT p_session, f.o_idx, p_holder, p_until FROM free f
            ON CONFLICT (session_key, eid) DO UPDATE SET holder = excluded.holder, until = excluded.until
            RETURNING l.eid
        )
        SELECT f.* FROM free f WHERE f.o_idx IN (SELECT t.eid FROM taken t);
END $$;

-- Does p_holder hold a lease row (live or expired, not taken over) for every one of p_ids?
CREATE OR REPLACE FUNCTION sw_holds(p_session text, p_holder text, p_ids bigint[]) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT count(*) = cardinality(ARRAY(SELECT DISTINCT unnest(p_ids)))
      FROM queue_leases l WHERE l.session_key = p_session AND l.holder = p_holder AND l.eid = ANY (p_ids);
$$;

-- Extend p_holder's lease on p_ids to p_until if it still holds every one; false, changing nothing, if not.
-- twin: store/sqlite/queue.py::SQLiteQueue.renew_lease
-- bound by: sessionwatch/testing/leases.py::test_a_lease_taken_over_cannot_be_renewed_or_acknowledged
CREATE OR REPLACE FUNCTION sw_renew_lease(p_lock bigint, p_session text, p_holder text, p_ids bigint[], p_until bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- a renewal lost with a crash: the old until stands
    IF NOT sw_holds(p_session, p_holder, p_ids) THEN
        RETURN false;
    END IF;
    UPDATE queue_leases l SET until = p_until
     WHERE l.session_key = p_session AND l.holder = p_holder AND l.eid = ANY (p_ids);
    RETURN true;
END $$;

-- A delivery that completed: when p_holder still holds every one of p_ids, its leases end and the entries
-- are taken and acknowledged as sw_drain does by id (its rows); otherwise one row of o_kind 'lost' and
-- nothing changes.
-- twin: store/sqlite/queue.py::SQLiteQueue.acknowledge_leased
-- bound by: sessionwatch/testing/leases.py::test_acknowledging_a_lease_is_a_drain_of_its_entries
CREATE OR REPLACE FUNCTION sw_settle(p_lock bigint, p_session text, p_holder text, p_ids bigint[], p_cap integer,
                                     p_now bigint, p_channel text, p_origin text)
RETURNS TABLE (o_kind text, o_idx bigint, o_target text, o_ls bigint, o_ts bigint, o_quiet boolean, o_ctx text,
               o_text text, o_wake_seq bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    IF NOT sw_holds(p_session, p_holder, p_ids) THEN
        RETURN QUERY SELECT 'lost'::text, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint, NULL::boolean, NULL::text,
                            NULL::text, NULL::bigint;
        RETURN;
    END IF;
    DELETE FROM queue_leases l WHERE l.session_key = p_session AND l.holder = p_holder AND l.eid = ANY (p_ids);
    RETURN QUERY SELECT * FROM sw_drain(p_lock, p_session, p_ids, p_cap, p_now, p_channel, p_origin);
END $$;

-- A watcher's session_status read of p_target covered (p_after, p_last] (store.base.Store.reconcile):
-- when the read starts at or before the cursor and reaches past it, last_seen moves to p_last and the
-- pair's notice is withdrawn, or replaced by one quoting p_last when notify-eligible events lie beyond
-- the page. o_changed: the cursor moved; o_wake: a notice was queued where none was live (it wakes, as a reopen does).
-- twin: store/sqlite/queue.py::SQLiteQueue.reconcile
-- bound by: sessionwatch/testing/delivery.py::test_a_truncated_page_leaves_one_notice_quoting_the_new_last_seen, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_reconcile(p_lock bigint, p_watcher text, p_target text, p_after bigint,
                                        p_last bigint, p_ctx text, p_now bigint, p_cap integer, p_channel text,
                                        p_origin text, OUT o_changed boolean, OUT o_wake boolean,
                                        OUT o_wake_seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_ls    bigint;
    v_mat   bigint;
    v_prov  text;
    v_live  boolean;
    v_quiet boolean;
BEGIN
    o_changed := false;
    o_wake := false;
    -- Most reads are not a watcher's: answer those without the writer lock.
    SELECT c.last_seen INTO v_ls FROM cursors c WHERE c.target = p_target AND c.watcher = p_watcher;
    IF NOT FOUND OR p_after > v_ls OR p_last <= v_ls THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(p_lock);
    PERFORM set_config('synchronous_commit', 'off', true);  -- the caller waits for the flush
    SELECT c.last_seen, c.material, c.provenance INTO v_ls, v_mat, v_prov
      FROM cursors c WHERE c.target = p_target AND c.watcher = p_watcher;
    IF NOT FOUND OR p_after > v_ls OR p_last <= v_ls THEN
        RETURN;  -- not a watcher, a page that skipped events, or nothing new in it
    END IF;
    o_changed := true;
    v_quiet := v_prov = 'ambient-group';
    SELECT c.queued_idx > h.drained AND h.appended - c.queued_idx < p_cap INTO v_live
      FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher
     WHERE c.target = p_target AND c.watcher = p_watcher;
    v_live := coalesce(v_live, false);
    IF v_mat > p_last THEN
        UPDATE cursors c SET last_seen = p_last, notified = c.material, updated_at = p_now
         WHERE c.target = p_target AND c.watcher = p_watcher;
        PERFORM sw_append_notice(p_watcher, p_target, p_last, p_ctx, p_now, p_cap, v_quiet, NOT v_live);
        IF NOT v_live AND NOT v_quiet THEN
            o_wake := true;
            SELECT c.wake_seq INTO o_wake_seq FROM cursors c WHERE c.target = p_target AND c.watcher = p_watcher;
            PERFORM sw_notify(p_channel, p_origin, ARRAY[p_watcher], ARRAY[p_target], ARRAY[o_wake_seq]);
        END IF;
    ELSE
        UPDATE cursors c SET last_seen = p_last, notified = p_last, material = p_last, updated_at = p_now
         WHERE c.target = p_target AND c.watcher = p_watcher;
        PERFORM sw_remove_slot(p_watcher, p_target, p_cap);
    END IF;
END $$;

-- The number of events, kept in meta so the row cap never counts the whole log: event_rows rows
-- with a sequence up to event_rows_upto; rows recorded since are counted here (the newest rows only),
-- deletes subtract what they removed (sw_forget_rows). Call under the writer lock.
-- twin: store/sqlite/upkeep.py::event_rows
-- bound by: sessionwatch/testing/flat_costs.py::test_the_cap_keeps_exactly_the_newest_rows_across_batches_and_deletes, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_event_rows() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_hi    bigint;
    v_kept  bigint;
    v_upto  bigint;
    v_total bigint;
BEGIN
    v_hi := coalesce((SELECT e.sequence FROM events e ORDER BY e.sequence DESC LIMIT 1), 0);
    SELECT m.value::bigint INTO v_kept FROM meta m WHERE m.key = 'event_rows';
    SELECT m.value::bigint INTO v_upto FROM meta m WHERE m.key = 'event_rows_upto';
    IF v_kept IS NULL OR v_upto IS NULL THEN  -- the first prune on this store counts once
        v_total := (SELECT count(*) FROM events e WHERE e.sequence <= v_hi);
        v_upto := v_hi;
    ELSIF v_hi > v_upto THEN
        v_total := v_kept + (SELECT count(*) FROM events e WHERE e.sequence > v_upto AND e.sequence <= v_hi);
        v_upto := v_hi;
    ELSE
        RETURN v_kept;
    END IF;
    INSERT INTO meta (key, value) VALUES ('event_rows', v_total::text), ('event_rows_upto', v_upto::text)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
    RETURN v_total;
END $$;

-- twin: store/sqlite/upkeep.py::forget_rows
-- bound by: sessionwatch/testing/flat_costs.py::test_the_cap_keeps_exactly_the_newest_rows_across_batches_and_deletes, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_forget_rows(p_sequences bigint[]) RETURNS void
LANGUAGE sql AS $$
    UPDATE meta m SET value = (m.value::bigint - (SELECT count(*) FROM unnest(p_sequences) s
                                                  WHERE s <= (SELECT u.value::bigint FROM meta u
                                                               WHERE u.key = 'event_rows_upto')))::text
     WHERE m.key = 'event_rows';
$$;

-- One bounded prune step: at most p_batch events (age first, then the row cap, the boundary found by
-- walking from the old end), or when p_slice > 0 the stale-cursor cleanup over the next p_slice
-- cursor rows (resuming at meta cursor_prune_at). o_more: call again. Skipped (o_more false) while
-- another gateway prunes.
-- twin: store/sqlite/log.py::SQLiteLog.prune and store/sqlite/upkeep.py::expire_cursors
-- bound by: sessionwatch/testing/flat_costs.py::test_stale_cursors_go_a_slice_per_prune, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_prune_step(p_prune_lock bigint, p_lock bigint, p_cutoff bigint, p_max_rows bigint,
                              p_batch integer, p_slice integer, p_cap integer,
                              OUT o_rows_deleted bigint, OUT o_cursors_deleted bigint, OUT o_heads_stamped bigint,
                              OUT o_more boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_seqs     bigint[];
    v_over     bigint;
    v_boundary bigint;
    v_n        bigint;
    v_at       text;
    v_t        text;
    v_w        text;
    v_rows     bigint;
    v_expired  text[];
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- a lost step is redone by the next prune
    o_rows_deleted := 0;
    o_cursors_deleted := 0;
    o_heads_stamped := 0;
    o_more := false;
    IF NOT pg_try_advisory_xact_lock(p_prune_lock) THEN
        RETURN;
    END IF;
    IF p_slice > 0 THEN
        PERFORM pg_advisory_xact_lock(p_lock);
        SELECT m.value INTO v_at FROM meta m WHERE m.key = 'cursor_prune_at';
        IF v_at IS NOT NULL THEN
            v_t := (v_at::jsonb) ->> 0;
            v_w := (v_at::jsonb) ->> 1;
        END IF;
        -- the slice in key order from the saved position, wrapping to the start for the rest
        CREATE TEMP TABLE IF NOT EXISTS sw_slice (n bigint, target text, watcher text, updated_at bigint)
            ON COMMIT DROP;
        INSERT INTO sw_slice
        SELECT row_number() OVER (ORDER BY s.part, s.target, s.watcher), s.target, s.watcher, s.updated_at FROM (
            (SELECT c.target::text AS target, c.watcher::text AS watcher, c.updated_at, 0 AS part FROM cursors c
              WHERE v_at IS NULL OR (c.target, c.watcher) > (v_t, v_w) ORDER BY c.target, c.watcher LIMIT p_slice)
            UNION ALL
            (SELECT c.target::text, c.watcher::text, c.updated_at, 1 FROM cursors c
              WHERE v_at IS NOT NULL AND (c.target, c.watcher) <= (v_t, v_w) ORDER BY c.target, c.watcher
              LIMIT p_slice)
            ORDER BY part, target, watcher LIMIT p_slice) s;
        SELECT count(*) INTO v_rows FROM sw_slice;
        WITH d AS (DELETE FROM cursors c USING sw_slice s
                    WHERE c.target = s.target AND c.watcher = s.watcher AND s.updated_at < p_cutoff
                   RETURNING c.watcher::text AS w)
        SELECT count(*), array_agg(DISTINCT d.w) INTO o_cursors_deleted, v_expired FROM d;
        PERFORM sw_compact(x.w, p_cap) FROM unnest(coalesce(v_expired, '{}')) AS x(w);
        IF v_rows < p_slice THEN
            DELETE FROM meta m WHERE m.key = 'cursor_prune_at';
        ELSE
            INSERT INTO meta (key, value)
            SELECT 'cursor_prune_at', jsonb_build_array(s.target, s.watcher)::text FROM sw_slice s WHERE s.n = v_rows
            ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        END IF;
        RETURN;
    END IF;
    -- Age: the time index finds the old rows (an index probe when nothing is old).
    SELECT array_agg(x.sequence) INTO v_seqs
      FROM (SELECT e.sequence FROM events e WHERE e.occurred_at < p_cutoff ORDER BY e.occurred_at LIMIT p_batch) x;
    IF v_seqs IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(p_lock);
        UPDATE heads h SET pruned_max_sequence = m.mx
          FROM (SELECT e.session_key, e.agent_id, max(e.sequence) AS mx FROM events e
                 WHERE e.sequence = ANY (v_seqs) GROUP BY e.session_key, e.agent_id) m
         WHERE h.session_key = m.session_key AND h.agent_id = m.agent_id AND m.mx > h.pruned_max_sequence;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        o_heads_stamped := v_n;
        DELETE FROM events e WHERE e.sequence = ANY (v_seqs);
        GET DIAGNOSTICS v_n = ROW_COUNT;
        o_rows_deleted := v_n;
        PERFORM sw_forget_rows(v_seqs);
        o_more := true;
        RETURN;
    END IF;
    -- Cap: the kept count says how many are over; the boundary is that many rows from the old end.
    PERFORM pg_advisory_xact_lock(p_lock);
    v_over := sw_event_rows() - p_max_rows;
    IF v_over <= 0 THEN
        RETURN;
    END IF;
    SELECT e.sequence INTO v_boundary FROM events e ORDER BY e.sequence LIMIT 1 OFFSET least(v_over, p_batch) - 1;
    UPDATE heads h SET pruned_max_sequence = m.mx
      FROM (SELECT e.session_key, e.agent_id, max(e.sequence) AS mx FROM events e
             WHERE e.sequence <= v_boundary GROUP BY e.session_key, e.agent_id) m
     WHERE h.session_key = m.session_key AND h.agent_id = m.agent_id AND m.mx > h.pruned_max_sequence;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    o_heads_stamped := v_n;
    WITH d AS (DELETE FROM events e WHERE e.sequence <= v_boundary RETURNING e.sequence)
    SELECT array_agg(d.sequence) INTO v_seqs FROM d;
    o_rows_deleted := coalesce(array_length(v_seqs, 1), 0);
    IF v_seqs IS NOT NULL THEN
        PERFORM sw_forget_rows(v_seqs);
    END IF;
    o_more := v_over > p_batch;
END $$;

-- One session's events after p_after (at most p_limit, oldest first) as a JSON array text, how many
-- there are, the session's head and prune mark, and its oldest retained sequence.
-- A function for its plan, not for its writes: left to the plan cache, a statement filtering on
-- `sequence > $n` goes back to a custom plan for every call once the log is large (500k events: 156 µs
-- instead of 44, most of it planning). Its only good plan is the ordered index walk of events_by_session,
-- whatever the values, so the generic plan is forced for it alone (for the whole connection it made
-- other lookups slower: a generic plan made while a table was small is kept).
-- twin: store/sqlite/log.py::SQLiteLog.changes_since
-- bound by: sessionwatch/testing/reconciliation.py::test_history_gap_and_earliest_through_the_tool, sessionwatch/testing/stateful.py
CREATE OR REPLACE FUNCTION sw_changes(p_key text, p_agent text, p_after bigint, p_limit bigint,
    OUT o_page text, OUT o_count bigint, OUT o_last bigint, OUT o_pruned bigint, OUT o_earliest bigint)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    WITH p AS (SELECT e.sequence, e.body FROM events e
                WHERE e.session_key = p_key AND e.agent_id = p_agent AND e.sequence > p_after
                ORDER BY e.sequence LIMIT p_limit)
    SELECT (SELECT '[' || string_agg('{"sequence":' || p.sequence || ',' || substr(p.body, 2), ',' ORDER BY p.sequence)
                   || ']' FROM p),
           (SELECT count(*) FROM p)
      INTO o_page, o_count;
    SELECT h.last_sequence, h.pruned_max_sequence INTO o_last, o_pruned
      FROM heads h WHERE h.session_key = p_key AND h.agent_id = p_agent;
    SELECT e.sequence INTO o_earliest FROM events e
     WHERE e.session_key = p_key AND e.agent_id = p_agent ORDER BY e.sequence LIMIT 1;
END $$;
