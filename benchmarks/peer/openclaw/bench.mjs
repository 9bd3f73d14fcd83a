// sessionwatch's peer benchmark: OpenClaw's session-state signal log (its published npm package) through
// the scenarios `python -m benchmarks.engine` runs, printing the same op names and JSON shape, so
// `python -m benchmarks.compare` can join the two outputs on "op".
//
// run.sh installs the package and starts this file with Node 24 and OPENCLAW_PACKAGE set. Options:
//   --quick            sizes / 10 (the prune keeps 6,000 rows)
//   --only a,b         scenarios: info, append, changes, ack, sweep, prune
//   --no-all           leave out the appends whose watchers are on every session
//   --tmp DIR          where the throwaway state folders go (default: the system's temp folder)
//   --out FILE         also write every line (setup lines too) to FILE
// Each scenario runs in a child process of its own against a fresh OPENCLAW_STATE_DIR, like ours runs
// each against a fresh SQLite file; the sweep's second half is a new process, which is the "restart".
//
// The functions are not in the package's public exports: they live in bundler chunks whose file names
// carry a content hash and whose exports are renamed to short aliases. `locate` finds them by reading the
// chunks' export and import statements, so a rebuilt package with new hashes still resolves.

import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const SCRIPT = fileURLToPath(import.meta.url);
const PACKAGE = process.env.OPENCLAW_PACKAGE;
const AGENT = "main";
const SCENARIOS = ["info", "append", "changes", "ack", "sweep", "prune"];

// ------------------------------------------------------------------------------------------ options
const FLAGS = new Set(["quick", "no-all", "keep"]);
function parseOptions(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith("--")) throw new Error(`unexpected argument ${arg}`);
    const [name, inline] = arg.slice(2).split(/=(.*)/s, 2);
    if (FLAGS.has(name)) opts[name] = true;
    else if (inline !== undefined) opts[name] = inline;
    else if (i + 1 < argv.length) opts[name] = argv[++i];
    else throw new Error(`--${name} needs a value`);
  }
  return opts;
}

// ------------------------------------------------------------------------------------------ output
const lines = [];
function print(line) {
  lines.push(line);
  process.stdout.write(`${JSON.stringify(line)}\n`);
}
const fixed = (x, digits = 6) => (Number.isFinite(x) ? Number(x.toFixed(digits)) : x);
/** A timed line: n calls in `ms` milliseconds, and whatever proves the work was done. */
function timed(op, n, ms, extra = {}) {
  const seconds = ms / 1000;
  print({ op, n, seconds: fixed(seconds), per_sec: seconds ? fixed(n / seconds, 1) : null, ...extra });
}
const setup = (op, extra = {}) => print({ op, meta: true, ...extra });
/** p50 / p99 / max of per-call latencies (milliseconds in, microseconds out). */
function percentiles(ms) {
  const sorted = Float64Array.from(ms).sort();
  const at = (q) => fixed(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] * 1000, 1);
  return { p50_us: at(0.5), p99_us: at(0.99), max_us: fixed(sorted[sorted.length - 1] * 1000, 1) };
}
const clock = () => performance.now();
/** Runs fn(i) for i < n; returns the total milliseconds and each call's. */
function timeCalls(n, fn) {
  const each = new Float64Array(n);
  const begun = clock();
  for (let i = 0; i < n; i++) {
    const t = clock();
    fn(i);
    each[i] = clock() - t;
  }
  return { ms: clock() - begun, each };
}

// ------------------------------------------------------------------------------------------ locating OpenClaw
const chunkCache = new Map();
/** The text of a chunk, its exports (local name -> alias) and its named imports (local -> file, alias). */
function readChunk(file) {
  if (chunkCache.has(file)) return chunkCache.get(file);
  const text = fs.readFileSync(path.join(PACKAGE, "dist", file), "utf8");
  const exported = new Map();
  const tail = text.match(/export\s*\{([^}]*)\}\s*;?\s*$/);
  for (const entry of tail ? tail[1].split(",") : []) {
    const [local, alias] = entry.trim().split(/\s+as\s+/);
    if (local) exported.set(local, alias ?? local);
  }
  const imported = new Map();
  for (const m of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*"\.\/([^"]+)"/g)) {
    for (const entry of m[1].split(",")) {
      const [alias, local] = entry.trim().split(/\s+as\s+/);
      if (alias) imported.set(local ?? alias, { file: m[2], alias });
    }
  }
  const chunk = { file, text, exported, imported };
  chunkCache.set(file, chunk);
  return chunk;
}
async function load(file, alias) {
  const mod = await import(pathToFileURL(path.join(PACKAGE, "dist", file)).href);
  if (typeof mod[alias] !== "function") throw new Error(`${file} exports no function ${alias}`);
  return mod[alias];
}
/** The function `name`: exported by the home chunk, imported by it, or exported by a chunk it imports. */
async function locate(home, name) {
  if (home.exported.has(name)) return { fn: await load(home.file, home.exported.get(name)), file: home.file };
  const dep = home.imported.get(name);
  if (dep) return { fn: await load(dep.file, dep.alias), file: dep.file };
  for (const file of new Set([...home.imported.values()].map((d) => d.file))) {
    const neighbour = readChunk(file);
    if (neighbour.exported.has(name)) return { fn: await load(file, neighbour.exported.get(name)), file };
  }
  throw new Error(`OpenClaw ${name} not found from ${home.file}`);
}
const API = [
  "recordSessionStateEvent", // one event (and its fan-out to the watchers' cursors), one transaction
  "registerSessionStateWatch", // an explicit watch, seeded at the target's head
  "listSessionStateEventsSince", // changesSince
  "getSessionStateVersion",
  "acknowledgeSessionStateNotices", // a watcher's ack of some targets
  "sweepSessionStateWatchNotices", // the restart sweep
  "openOpenClawStateDatabase", // the cached state database handle (for the counts that prove the work)
  "runOpenClawStateWriteTransaction",
  "pruneSessionStateEventsInDatabase", // the prune itself; the public path runs it at most hourly
  "replaceSessionEntrySync", // a watcher's session entry, which the sweep looks up
];
async function openClaw() {
  const begun = clock();
  const marker = "function recordSessionStateEvent(";
  const home = fs
    .readdirSync(path.join(PACKAGE, "dist"))
    .filter((f) => f.startsWith("session-state-events-") && f.endsWith(".mjs"))
    .map(readChunk)
    .find((c) => c.text.includes(marker));
  if (!home) throw new Error(`no chunk of ${PACKAGE}/dist defines recordSessionStateEvent`);
  const oc = { files: {} };
  for (const name of API) {
    const { fn, file } = await locate(home, name);
    oc[name] = fn;
    oc.files[name] = file;
  }
  oc.importSeconds = (clock() - begun) / 1000;
  return oc;
}

// ------------------------------------------------------------------------------------------ scenario helpers
const key = (name) => `agent:${AGENT}:${name}`;
const db = (oc) => oc.openOpenClawStateDatabase().db;
function count(oc, sql, ...params) {
  const row = db(oc).prepare(sql).get(...params);
  return row === undefined ? 0 : Number(Object.values(row)[0]);
}
const pendingCursors = (oc) =>
  count(oc, "SELECT count(*) FROM session_watch_cursors WHERE material_sequence > last_seen_sequence");
/** The same event as ours: a notify-eligible human message on `target`. */
function record(oc, target, i) {
  return oc.recordSessionStateEvent({
    sessionKey: target,
    agentId: AGENT,
    kind: "human_direct_message",
    actorType: "human",
    summary: `bench event ${i}`,
    payload: { i },
  });
}
/** n recordings, target(i) each; returns the milliseconds, each call's, and the recordings that failed. */
function recordMany(oc, n, target) {
  let failures = 0;
  const { ms, each } = timeCalls(n, (i) => {
    if (!record(oc, target(i), i)) failures++;
  });
  return { ms, each, failures };
}
const watch = (oc, watcher, target) =>
  oc.registerSessionStateWatch({ watcherSessionKey: watcher, targetSessionKey: target, targetAgentId: AGENT });
/** The first call opens (and migrates) the state database: timed apart, like ours. */
function firstOpen(oc) {
  const begun = clock();
  oc.getSessionStateVersion(key("warmup"), AGENT);
  return (clock() - begun) / 1000;
}

// ------------------------------------------------------------------------------------------ scenarios
// Each takes the loaded API and its parameters (the same names and sizes our engine scenarios use).
const PHASES = {
  info(oc) {
    const open = firstOpen(oc);
    const handle = oc.openOpenClawStateDatabase();
    const pragma = (p) => Object.values(handle.db.prepare(`PRAGMA ${p}`).get() ?? { v: null })[0];
    setup("info", {
      node: process.version,
      sqlite_version: handle.db.prepare("SELECT sqlite_version() AS v").get().v,
      openclaw_version: JSON.parse(fs.readFileSync(path.join(PACKAGE, "package.json"), "utf8")).version,
      chunks: oc.files,
      import_seconds: fixed(oc.importSeconds, 3),
      first_open_seconds: fixed(open, 3),
      pragmas: Object.fromEntries(
        ["journal_mode", "synchronous", "busy_timeout", "foreign_keys", "page_size", "cache_size", "mmap_size"].map(
          (p) => [p, pragma(p)],
        ),
      ),
    });
  },

  append(oc, { n, watchers, mode, sessions }) {
    const keys = Array.from({ length: sessions }, (_, i) => key(`bench-s${i}`));
    const open = firstOpen(oc);
    const watched = mode === "all" ? keys : keys.slice(0, 1);
    let registered = 0;
    const reg = timeCalls(watched.length * watchers, (i) => {
      if (watch(oc, key(`bench-w${i % watchers}`), watched[Math.floor(i / watchers)])) registered++;
    });
    if (registered) timed("register_watch", registered, reg.ms, { meta: true });
    const run = recordMany(oc, n, (i) => keys[i % sessions]);
    timed(watchers === 0 ? "append_w0" : `append_w${watchers}_${mode}`, n, run.ms, {
      watchers,
      watch_mode: watchers === 0 ? "none" : mode,
      sessions,
      failures: run.failures,
      rows_after: count(oc, "SELECT count(*) FROM session_state_events"),
      cursor_fanout_updates: watchers * (mode === "all" ? n : Math.ceil(n / sessions)),
      pending_cursors_after: pendingCursors(oc),
      first_open_seconds: fixed(open, 3),
      ...percentiles(run.each),
    });
  },

  changes(oc, { rows, calls }) {
    const big = key("bench-big");
    firstOpen(oc);
    const seed = recordMany(oc, rows, () => big);
    timed("seed_append_single_session", rows, seed.ms, { meta: true, failures: seed.failures });
    const retained = count(oc, "SELECT count(*) FROM session_state_events WHERE session_key = ?", big);
    const oldest = count(oc, "SELECT min(sequence) FROM session_state_events WHERE session_key = ?", big);
    const head = oc.getSessionStateVersion(big, AGENT);
    setup("changes_setup", { session_rows: retained, head, min_sequence: oldest });
    let state = 7; // a small fixed-seed generator, so every run reads the same "random" points
    const random = () => {
      state = (Math.imul(state, 48271) + 11) >>> 0;
      return state / 2 ** 32;
    };
    const reads = [
      ["changes_since_oldest_limit200", () => oldest - 1, 200],
      ["changes_since_random_limit200", () => oldest - 1 + Math.floor(random() * (retained - 200)), 200],
      ["changes_since_tail50_limit200", () => head - 50, 50],
      ["changes_since_at_head_limit200", () => head, 0],
    ];
    for (const [op, after, expected] of reads) {
      let returned = 0;
      let unexpected = 0;
      const run = timeCalls(calls, () => {
        const page = oc.listSessionStateEventsSince(big, AGENT, after(), 200);
        returned += page.events.length;
        if (page.events.length !== expected) unexpected++;
      });
      timed(op, calls, run.ms, {
        limit: 200,
        session_rows: retained,
        events_returned_avg: fixed(returned / calls, 1),
        unexpected_results: unexpected,
        ...percentiles(run.each),
      });
    }
    const versions = timeCalls(calls * 10, () => oc.getSessionStateVersion(big, AGENT));
    timed("get_session_state_version", calls * 10, versions.ms, { session_rows: retained });
  },

  ack(oc, { targets: t }) {
    const watcher = key("bench-watcher");
    const targets = Array.from({ length: t }, (_, i) => key(`bench-t${i}`));
    firstOpen(oc);
    for (const target of targets) watch(oc, watcher, target);
    const makePending = () => {
      recordMany(oc, t, (i) => targets[i]);
      return pendingCursors(oc);
    };
    let before = makePending();
    let run = timeCalls(t, (i) => oc.acknowledgeSessionStateNotices(watcher, [targets[i]]));
    timed("ack_single_target", t, run.ms, {
      pending_before: before,
      pending_after: pendingCursors(oc),
      transactions: t,
      ...percentiles(run.each),
    });
    run = timeCalls(t, (i) => oc.acknowledgeSessionStateNotices(watcher, [targets[i]]));
    timed("ack_single_target_nothing_pending", t, run.ms, { pending_before: 0, transactions: t, ...percentiles(run.each) });
    before = makePending();
    run = timeCalls(1, () => oc.acknowledgeSessionStateNotices(watcher, targets));
    timed(`ack_batch_${t}_targets_one_call`, t, run.ms, {
      pending_before: before,
      pending_after: pendingCursors(oc),
      transactions: 1,
      note: "n = targets acknowledged in one call",
    });
  },

  "sweep-setup"(oc, { pending, targets: tn }) {
    firstOpen(oc);
    const targets = Array.from({ length: tn }, (_, i) => key(`bench-t${i}`));
    // The sweep skips watchers whose session it cannot find, so every watcher gets a session entry first.
    const entries = timeCalls(pending, (j) =>
      oc.replaceSessionEntrySync({ sessionKey: key(`bench-w${j}`) }, { sessionId: randomUUID(), updatedAt: Date.now() }),
    );
    timed("create_watcher_session_entries", pending, entries.ms, { meta: true });
    const reg = timeCalls(pending, (j) => watch(oc, key(`bench-w${j}`), targets[j % tn]));
    timed("register_watch", pending, reg.ms, { meta: true });
    recordMany(oc, tn, (i) => targets[i]);
    setup("sweep_setup", { pending_cursors: pendingCursors(oc), targets: tn, watchers: pending });
  },

  "sweep-run"(oc) {
    timed("open_state_db_after_restart", 1, firstOpen(oc) * 1000, { meta: true });
    const pending = pendingCursors(oc);
    let run = timeCalls(1, () => oc.sweepSessionStateWatchNotices());
    const renotified = count(
      oc,
      "SELECT count(*) FROM session_watch_cursors " +
        "WHERE material_sequence > last_seen_sequence AND notified_sequence = material_sequence",
    );
    timed("sweep_after_restart", pending, run.ms, {
      pending_cursors: pending,
      renotified,
      note: "n = pending cursors; OpenClaw's sweep also looks up each watcher's session and runs a prune pass",
    });
    run = timeCalls(1, () => oc.sweepSessionStateWatchNotices());
    timed("sweep_repeat_same_process", pending, run.ms, {
      pending_cursors: pendingCursors(oc),
      note: "the sweep leaves the cursors pending, so this one redoes the same rows",
    });
  },

  prune(oc, { rows, sessions, calls }) {
    const keys = Array.from({ length: sessions }, (_, i) => key(`bench-s${i}`));
    firstOpen(oc);
    const seed = recordMany(oc, rows, (i) => keys[i % sessions]);
    timed(`seed_append_${sessions}_sessions`, rows, seed.ms, { meta: true, failures: seed.failures });
    const total = () => count(oc, "SELECT count(*) FROM session_state_events");
    const before = total();
    const prune = () => oc.runOpenClawStateWriteTransaction(({ db: tx }) => oc.pruneSessionStateEventsInDatabase(tx, Date.now()));
    const once = timeCalls(1, prune);
    const after = total();
    timed(`prune_${before}_to_cap`, 1, once.ms, {
      rows_before: before,
      rows_after: after,
      rows_deleted: before - after,
      heads_stamped: count(oc, "SELECT count(*) FROM session_state_heads WHERE pruned_max_sequence > 0"),
      deleted_per_sec: fixed((before - after) / (once.ms / 1000), 1),
      note: "n = prune calls (one write transaction)",
    });
    const idle = timeCalls(calls, prune);
    timed("prune_at_cap_nothing_to_delete", calls, idle.ms, { rows: total() });
  },
};

// ------------------------------------------------------------------------------------------ the run
/** The phases and parameters of a run, in order; each entry is [state folder label, phase, parameters]. */
function plan(opts) {
  const scale = (n) => (opts.quick ? Math.max(1, Math.floor(n / 10)) : n);
  const only = opts.only ? new Set(String(opts.only).split(",")) : new Set(SCENARIOS);
  const unknown = [...only].filter((s) => !SCENARIOS.includes(s));
  if (unknown.length) throw new Error(`unknown scenario(s) ${unknown.join(",")}; known: ${SCENARIOS.join(",")}`);
  const steps = [];
  if (only.has("info")) steps.push(["info", "info", {}]);
  if (only.has("append")) {
    const runs = [[0, "target"], [10, "target"], [100, "target"]];
    if (!opts["no-all"]) runs.push([10, "all"], [100, "all"]);
    for (const [watchers, mode] of runs) {
      steps.push([`append-w${watchers}-${mode}`, "append", { n: scale(20000), watchers, mode, sessions: 100 }]);
    }
  }
  if (only.has("changes")) steps.push(["changes", "changes", { rows: scale(50000), calls: scale(1000) }]);
  if (only.has("ack")) steps.push(["ack", "ack", { targets: scale(1000) }]);
  if (only.has("sweep")) {
    steps.push(["sweep", "sweep-setup", { pending: scale(1000), targets: scale(100) }]);
    steps.push(["sweep", "sweep-run", {}]); // the same folder: a restart over the state the setup left
  }
  if (only.has("prune")) steps.push(["prune", "prune", { rows: opts.quick ? 6000 : 60000, sessions: 100, calls: 20 }]);
  return steps;
}

/** Folders outside the state folder that OpenClaw writes into: its lock files (in the temp directory) and
 * its daily log (a fixed folder). What is there before the run stays; what the run adds is removed. */
function outsideFolders() {
  const uid = process.getuid?.();
  const locks = path.join(os.tmpdir(), uid === undefined ? "openclaw-state-locks" : `openclaw-state-locks-${uid}`);
  return [locks, path.join("/tmp", "openclaw")].map((dir) => ({
    dir,
    existed: fs.existsSync(dir),
    names: new Set(fs.existsSync(dir) ? fs.readdirSync(dir) : []),
  }));
}
function removeWhatTheRunAdded(folders) {
  for (const { dir, existed, names } of folders) {
    if (!fs.existsSync(dir)) continue;
    for (const name of fs.readdirSync(dir)) if (!names.has(name)) fs.rmSync(path.join(dir, name), { force: true });
    if (!existed && fs.readdirSync(dir).length === 0) fs.rmdirSync(dir);
  }
}

function runPhase(phase, stateDir, params) {
  const child = spawnSync(process.execPath, [SCRIPT, "--phase", phase, "--params", JSON.stringify(params)], {
    env: { ...process.env, OPENCLAW_STATE_DIR: stateDir },
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 64 << 20,
  });
  for (const text of (child.stdout ?? "").split("\n")) {
    if (text.startsWith("{")) print(JSON.parse(text));
  }
  if (child.status !== 0) throw new Error(`phase ${phase} failed (status ${child.status}, signal ${child.signal})`);
}

async function orchestrate(opts) {
  const steps = plan(opts);
  const tmp = path.resolve(opts.tmp ?? os.tmpdir());
  const outside = outsideFolders();
  const folders = new Map();
  const begun = clock();
  print({ op: "run", meta: true, peer: "openclaw", quick: Boolean(opts.quick), pid: process.pid });
  try {
    for (const [label, phase, params] of steps) {
      if (!folders.has(label)) folders.set(label, fs.mkdtempSync(path.join(tmp, `sw-peer-${label}-`)));
      runPhase(phase, folders.get(label), params);
    }
  } finally {
    if (opts.out) fs.writeFileSync(path.resolve(opts.out), lines.map((l) => `${JSON.stringify(l)}\n`).join(""));
    if (opts.keep) console.error(`# kept ${[...folders.values()].join(" ")}`);
    else {
      for (const dir of folders.values()) fs.rmSync(dir, { recursive: true, force: true });
      removeWhatTheRunAdded(outside);
    }
    console.error(`# peer done in ${((clock() - begun) / 1000).toFixed(1)} s`);
  }
}

async function main() {
  if (!PACKAGE) throw new Error("OPENCLAW_PACKAGE is not set: start this through run.sh");
  const [major] = process.versions.node.split(".").map(Number);
  if (major < 24) throw new Error(`OpenClaw needs Node 24 or newer; this is ${process.version} (run.sh brings one)`);
  const opts = parseOptions(process.argv.slice(2));
  if (!opts.phase) return orchestrate(opts);
  if (!process.env.OPENCLAW_STATE_DIR) throw new Error("a phase runs in a state folder of its own (OPENCLAW_STATE_DIR)");
  const run = PHASES[opts.phase];
  if (!run) throw new Error(`unknown phase ${opts.phase}`);
  run(await openClaw(), JSON.parse(opts.params ?? "{}"));
  process.exit(0); // OpenClaw leaves timers running that would keep the process alive
}

main().catch((error) => {
  console.error(error?.stack ?? String(error));
  process.exit(1);
});
