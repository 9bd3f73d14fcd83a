// sessionwatch's OpenCode plugin, written by `sessionwatch install opencode` (uninstall removes it).
//
// - Notices: before each model call of a session's own turn, it runs `sessionwatch hook opencode` and puts
//   what is pending into that call's system text (experimental.chat.system.transform): the model reads it,
//   OpenCode never stores it. Title and compaction calls get nothing.
// - Who sent a prompt: chat.message sees every prompt before OpenCode stores it; this process's command
//   line says where it came from (the TUI: a person; `opencode run`: a program; a server: unknown). One
//   line per prompt goes next to OpenCode's database, where sessionwatch's monitor reads it.
// - Lifecycle: busy, idle, a permission asked, a session created or deleted, subagent sessions (parentID)
//   as children of their session, each reported through the same hook; when OpenCode shuts the plugin down
//   (`opencode run` done, the TUI closed, the server stopped), every session it served here has ended.
// - Push: in a process that lives on (the TUI, `serve`, `web`), a notice that comes while a session is idle
//   starts a turn there with one short synthetic prompt (once per notice); that turn's model call gets the
//   notice. The session's notices are watched through `sessionwatch mcp` (its notices resource, a peek).
// - Tools: OpenCode starts one `sessionwatch mcp` (the config's `mcp` entry) for all the sessions of its
//   process and tells it nothing of the session calling, so before each call of a sessionwatch tool this
//   plugin adds the session to the call's arguments (`_sessionwatch`, shaped like a hook's input); the
//   server takes it out and runs the call as that session. The models never see it: it is taken out of
//   the conversation each model call gets (OpenCode keeps it in the stored call).
//
// It needs no package (only what OpenCode's runtime provides) and never breaks OpenCode: every call has a
// timeout, every error is swallowed, and a missing `sessionwatch` is not tried again for a minute.

import { spawn } from "node:child_process";
import { appendFileSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";

const SETTINGS = { command: ["sessionwatch"], globalArgs: [], hookArgs: [] }; // sessionwatch:settings

const ANSWER_TIMEOUT_MS = 4000; // a model call waits for this at most
const WRITE_TIMEOUT_MS = 10000;
const END_TIMEOUT_MS = 4000; // OpenCode waits for the plugin's shutdown: the ends are written within this
const REPLAY_CHECK_MS = 2000; // a user message chat.message has not seen by then entered without it
const MISSING_PAUSE_MS = 60000;
const MAX_ANSWER_BYTES = 1 << 20;
const REQUEST_TIMEOUT_MS = 30000; // the watcher's MCP requests (its start loads the MCP SDK)
const MAX_WATCHES = 8; // sessions watched for a push at once in one process (the most recently idle)
const PUSH_PREFIX = "sessionwatch: ";
// Our server's tools as OpenCode names them (<server>_<tool>); the engine's six (a test holds them so)
const TOOLS = new Set(
  ["sessions_spawn", "sessions_send", "session_status", "sessions_list", "sessions_history", "session_unwatch"].map(
    (name) => `sessionwatch_${name}`,
  ),
);
const CALL_ARG = "_sessionwatch"; // where a call names its session (the server's hosts.identity.CALL_ARG)
// OpenCode's commands (1.18): `run` is a program's prompt; the others serve clients we cannot tell apart.
// Anything else on the command line is the TUI's project folder, where a person types.
const COMMANDS = new Set([
  "run", "serve", "web", "acp", "attach", "github", "pr", "completion", "mcp", "debug", "providers", "auth",
  "agent", "upgrade", "uninstall", "models", "stats", "export", "import", "session", "plugin", "plug", "db",
]);
// The TUI's options that take a value: their value is not the folder.
const VALUE_OPTIONS = new Set([
  "--log-level", "--port", "--hostname", "--mdns-domain", "--cors", "-m", "--model", "-s", "--session",
  "--prompt", "--agent", "--replay-limit",
]);

let missingUntil = 0;

/** The first word of this process's command line that is not an option (or an option's value). */
function commandOfProcess() {
  const args = process.argv.slice(2);
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--") return args[i + 1] ?? "";
    if (a.startsWith("-")) {
      if (!a.includes("=") && VALUE_OPTIONS.has(a)) i++;
      continue;
    }
    return a;
  }
  return "";
}

function isFolder(path) {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function promptSource(directory) {
  const cmd = commandOfProcess();
  if (cmd === "run") return ["program", "opencode run"];
  if (cmd === "") return ["person", "the TUI"];
  if (!COMMANDS.has(cmd)) {
    // `opencode <project folder>`: the TUI in that folder (OpenCode takes the folder from $PWD)
    const base = process.env.PWD || process.cwd();
    const folder = isAbsolute(cmd) ? cmd : resolve(base, cmd);
    if (folder === directory || isFolder(folder)) return ["person", "the TUI"];
  }
  return ["unknown", `opencode ${cmd}`];
}

function recordPrompt(sessionID, messageID, source, why) {
  const folder = join(databaseFolder(), "sessionwatch", "prompts");
  mkdirSync(folder, { recursive: true });
  const line = JSON.stringify({ messageID, source, why, at: Date.now() });
  appendFileSync(join(folder, `${sessionID}.jsonl`), line + "\n");
}

function databaseFolder() {
  const explicit = process.env.OPENCODE_DB;
  if (explicit && explicit !== ":memory:") return dirname(resolve(explicit));
  const data = process.env.XDG_DATA_HOME || join(homedir(), ".local", "share");
  return join(data, "opencode");
}

function runHook(directory, data, { answer = false, nudge = false } = {}) {
  return new Promise((done) => {
    if (Date.now() < missingUntil) return done("");
    let out = "";
    let finished = false;
    const finish = (value) => {
      if (!finished) {
        finished = true;
        clearTimeout(timer);
        done(value);
      }
    };
    let child;
    try {
      const argv = [
        ...SETTINGS.command.slice(1),
        ...SETTINGS.globalArgs,
        "hook",
        "opencode",
        ...SETTINGS.hookArgs,
        ...(nudge ? [] : ["--no-nudge"]),
      ];
      child = spawn(SETTINGS.command[0], argv, {
        cwd: directory || process.cwd(),
        stdio: ["pipe", "pipe", "ignore"],
        env: { ...process.env, PWD: directory || process.cwd() },
      });
    } catch {
      missingUntil = Date.now() + MISSING_PAUSE_MS;
      return done("");
    }
    const timer = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch {}
      finish("");
    }, answer ? ANSWER_TIMEOUT_MS : WRITE_TIMEOUT_MS);
    child.on("error", (err) => {
      if (err && err.code === "ENOENT") missingUntil = Date.now() + MISSING_PAUSE_MS;
      finish("");
    });
    child.stdout.on("data", (chunk) => {
      if (out.length < MAX_ANSWER_BYTES) out += chunk.toString("utf8");
    });
    child.on("close", () => finish(out));
    try {
      child.stdin.on("error", () => {});
      child.stdin.end(JSON.stringify({ ...data, cwd: directory }));
    } catch {
      finish("");
    }
  });
}

function contextOf(stdout) {
  for (const line of stdout.split("\n")) {
    if (!line.trim().startsWith("{")) continue;
    try {
      const text = JSON.parse(line)?.hookSpecificOutput?.additionalContext;
      if (typeof text === "string" && text) return text;
    } catch {}
  }
  return "";
}

function remember(set, id) {
  set.add(id);
  if (set.size > 512) set.delete(set.values().next().value); // the oldest
}

// -- the push ----------------------------------------------------------------------------------------------
// `sessionwatch mcp` for one session, run while the session may be pushed: its notices resource (a peek,
// never an acknowledgment) tells the plugin when the session's pending notices change.
class NoticeWatch {
  constructor(sessionID, directory, onEntries) {
    this.onEntries = onEntries;
    this.buffer = "";
    this.next = 1;
    this.waiting = new Map();
    this.uri = "";
    this.stopped = false;
    const argv = [...SETTINGS.command, ...SETTINGS.globalArgs, "mcp", ...SETTINGS.hookArgs];
    const env = { ...process.env };
    for (const name of Object.keys(env)) if (name.startsWith("CLAUDE_CODE_") || name === "CLAUDE_PROJECT_DIR") delete env[name];
    Object.assign(env, { SESSIONWATCH_OPENCODE_SESSION_ID: sessionID, SESSIONWATCH_PUSH: "0" });
    env.PWD = directory || process.cwd();
    try {
      this.child = spawn(argv[0], argv.slice(1), { cwd: env.PWD, env, stdio: ["pipe", "pipe", "ignore"] });
    } catch {
      this.stopped = true;
      return;
    }
    this.child.on("error", () => this.stop());
    this.child.on("close", () => this.stop());
    this.child.stdin.on("error", () => {});
    this.child.stdout.on("data", (chunk) => this.receive(chunk.toString("utf8")));
    this.begin().catch(() => this.stop());
  }

  send(message) {
    try {
      this.child.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");
    } catch {}
  }

  request(method, params = {}) {
    return new Promise((done) => {
      if (this.stopped) return done(null);
      const id = this.next++;
      const timer = setTimeout(() => this.waiting.delete(id) && done(null), REQUEST_TIMEOUT_MS);
      this.waiting.set(id, (result) => {
        clearTimeout(timer);
        done(result);
      });
      this.send({ id, method, params });
    });
  }

  receive(text) {
    this.buffer += text;
    if (this.buffer.length > MAX_ANSWER_BYTES) this.buffer = ""; // not what this server sends: start over
    let end;
    while ((end = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 1);
      try {
        const message = JSON.parse(line);
        const done = typeof message?.id === "number" ? this.waiting.get(message.id) : undefined;
        if (done) {
          this.waiting.delete(message.id);
          done(message.result ?? null);
        } else if (message?.method === "notifications/resources/updated" && message.params?.uri === this.uri) {
          this.read().catch(() => {});
        }
      } catch {}
    }
  }

  async begin() {
    const hello = await this.request("initialize", {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "sessionwatch-opencode", version: "1" },
    });
    if (!hello) return this.stop();
    this.send({ method: "notifications/initialized" });
    const listed = await this.request("resources/list");
    const uri = listed?.resources?.find((r) => typeof r?.uri === "string" && r.uri.endsWith("/notices"))?.uri;
    if (!uri) return this.stop();
    this.uri = uri;
    await this.request("resources/subscribe", { uri });
    await this.read();
  }

  async read() {
    const out = await this.request("resources/read", { uri: this.uri });
    try {
      const body = JSON.parse(out?.contents?.[0]?.text ?? "null");
      if (Array.isArray(body?.entries)) this.onEntries(body.entries);
    } catch {}
  }

  stop() {
    if (this.stopped) return;
    this.stopped = true;
    for (const done of this.waiting.values()) done(null);
    this.waiting.clear();
    try {
      this.child.stdin.end();
      this.child.kill("SIGTERM");
    } catch {}
  }
}

/** The notice ids already pushed into one session (at most one push per notice, across restarts). */
function pushedFile(sessionID) {
  const base =
    process.env.SESSIONWATCH_STATE_DIR ||
    join(process.env.XDG_STATE_HOME || join(homedir(), ".local", "state"), "sessionwatch");
  return join(base, "push", `opencode-${sessionID.replace(/[^A-Za-z0-9_.-]/g, "_")}.json`);
}

function loadPushed(sessionID) {
  try {
    const ids = JSON.parse(readFileSync(pushedFile(sessionID), "utf8"));
    return new Set(Array.isArray(ids) ? ids.filter((i) => Number.isInteger(i)) : []);
  } catch {
    return new Set();
  }
}

function savePushed(sessionID, ids) {
  try {
    const path = pushedFile(sessionID);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(`${path}.${process.pid}.tmp`, JSON.stringify([...ids]));
    renameSync(`${path}.${process.pid}.tmp`, path);
  } catch {}
}

function pushText(count) {
  const what = count === 1 ? "a session you rely on has" : `${count} sessions you rely on have`;
  return `${PUSH_PREFIX}${what} changed since you last looked. Reconcile before acting; the notice follows.`;
}

function isPush(parts) {
  return (
    Array.isArray(parts) &&
    parts.length > 0 &&
    parts.every((p) => p?.type === "text" && p.synthetic && typeof p.text === "string" && p.text.startsWith(PUSH_PREFIX))
  );
}

export const SessionwatchPlugin = async ({ directory, client }) => {
  const parents = new Map(); // session id -> its parent's (subagent sessions)
  const statuses = new Map(); // session id -> the last status reported
  const compacting = new Set(); // sessions whose next calls are a compaction's
  const pendingPrompt = new Set(); // a prompt came in: the next delivery also nudges the monitor
  const served = new Set(); // top-level sessions this process has run: ended when OpenCode shuts down
  const recorded = new Set(); // user messages chat.message has recorded (the last few hundred)
  const checked = new Set(); // user messages looked at for a missing record
  const unrecorded = new Map(); // user message id -> its session, until chat.message records it (or not)
  const watches = new Map(); // session id -> {watch, entries, pushed}: sessions that may be pushed
  const delivered = new Map(); // session id -> notice lines its calls were given (acknowledged at the next)
  // a process that lives on after its prompt; SESSIONWATCH_PUSH=0 turns the push off (as for the other hosts)
  const pushes = commandOfProcess() !== "run" && process.env.SESSIONWATCH_PUSH !== "0";
  let chain = Promise.resolve(); // lifecycle writes in the order OpenCode sent them

  const root = (id) => {
    let at = id;
    for (let i = 0; i < 16 && parents.has(at); i++) at = parents.get(at);
    return at;
  };
  const who = (id) => (parents.has(id) ? { session_id: root(id), agent_id: id } : { session_id: id });
  const write = (data) => {
    chain = chain.then(() => runHook(directory, data)).catch(() => {});
  };
  const recordUnseen = (id) => {
    const sessionID = unrecorded.get(id);
    unrecorded.delete(id);
    try {
      if (sessionID && !recorded.has(id)) recordPrompt(sessionID, id, "unknown", "entered without chat.message");
    } catch {}
  };
  // A notice pending while the session is idle that no call was given and no push told: one synthetic
  // prompt that starts a turn (best effort; the notice itself stays queued and reaches that turn's call).
  const maybePush = (id) => {
    try {
      const w = watches.get(id);
      if (!w || w.watch.stopped || statuses.get(id) !== "idle" || !client?.session?.promptAsync) return;
      const given = delivered.get(id) || new Set();
      const fresh = w.entries.filter((e) => Number.isInteger(e?.id) && !w.pushed.has(e.id) && !given.has(e?.line));
      if (!fresh.length) return;
      for (const e of fresh) w.pushed.add(e.id);
      const live = new Set(w.entries.map((e) => e?.id));
      w.pushed = new Set([...w.pushed].filter((i) => live.has(i))); // what left the queue is never pushed again
      savePushed(id, w.pushed);
      statuses.set(id, "pushed"); // the turn it starts reports itself busy
      const parts = [{ type: "text", text: pushText(fresh.length), synthetic: true }];
      Promise.resolve(client.session.promptAsync({ path: { id }, body: { parts } })).catch(() => {});
    } catch {}
  };
  const watchFor = (id) => {
    if (!pushes) return;
    const known = watches.get(id);
    if (known && (!known.watch.stopped || Date.now() - known.at < MISSING_PAUSE_MS)) {
      watches.delete(id); // the most recently idle go last: the oldest is stopped first
      watches.set(id, known);
      return;
    }
    watches.delete(id);
    try {
      const w = { entries: [], pushed: loadPushed(id), watch: null, at: Date.now() };
      w.watch = new NoticeWatch(id, directory, (entries) => {
        w.entries = entries;
        maybePush(id);
      });
      watches.set(id, w);
      while (watches.size > MAX_WATCHES) {
        const [oldest, ow] = watches.entries().next().value;
        ow.watch.stop();
        watches.delete(oldest);
      }
    } catch {}
  };
  const given = (id, text) => {
    const lines = delivered.get(id) || new Set();
    delivered.set(id, lines);
    for (const line of text.split("\n")) lines.add(line);
    while (lines.size > 512) lines.delete(lines.values().next().value);
    while (delivered.size > 64) delivered.delete(delivered.keys().next().value);
  };

  const status = (id, state) => {
    if (id && !parents.has(id)) served.add(id);
    if (id && state === "idle" && !parents.has(id)) {
      watchFor(id);
      setTimeout(() => maybePush(id), 0); // after the state below is noted
    }
    if (!id || statuses.get(id) === state) return;
    statuses.set(id, state);
    if (state === "working") write({ hook_event_name: "PostToolUse", ...who(id) });
    else if (state === "waiting") write({ hook_event_name: "PermissionRequest", ...who(id) });
    else if (state === "idle" && parents.has(id)) write({ hook_event_name: "SubagentStop", agent_type: "task", ...who(id) });
    else if (state === "idle") write({ hook_event_name: "Stop", ...who(id) });
  };

  return {
    event: async ({ event }) => {
      try {
        const p = event?.properties || {};
        switch (event?.type) {
          case "session.created": {
            const info = p.info || {};
            if (!info.id) break;
            if (info.parentID) {
              parents.set(info.id, info.parentID);
              write({ hook_event_name: "SubagentStart", agent_type: "task", ...who(info.id) });
            } else {
              served.add(info.id);
              write({ hook_event_name: "SessionStart", source: "startup", session_id: info.id });
            }
            break;
          }
          case "message.updated": {
            // A prompt that enters without chat.message (OpenCode's replay of the pending prompt after a
            // compaction) gets a record all the same: "unknown", so the monitor decides it at once (the
            // conservative rule drops the repeat) instead of waiting for a record that never comes.
            const info = p.info || {};
            const sessionID = info.sessionID || p.sessionID;
            if (info.role !== "user" || !info.id || !sessionID || checked.has(info.id)) break;
            remember(checked, info.id);
            unrecorded.set(info.id, sessionID);
            setTimeout(() => recordUnseen(info.id), REPLAY_CHECK_MS).unref?.();
            break;
          }
          case "session.updated": {
            const info = p.info || {};
            if (info.id && info.parentID) parents.set(info.id, info.parentID);
            break;
          }
          case "session.status": {
            const type = p.status?.type;
            if (type === "busy" || type === "retry") status(p.sessionID, "working");
            else if (type === "idle") status(p.sessionID, "idle");
            break;
          }
          case "session.idle":
            status(p.sessionID, "idle");
            break;
          case "permission.asked":
          case "permission.updated":
            status(p.sessionID, "waiting");
            break;
          case "permission.replied":
            status(p.sessionID, "working");
            break;
          case "session.compacted":
            compacting.delete(p.sessionID);
            break;
          case "session.deleted": {
            const info = p.info || {};
            if (!info.id) break;
            served.delete(info.id);
            watches.get(info.id)?.watch.stop();
            watches.delete(info.id);
            if (parents.has(info.id)) write({ hook_event_name: "SubagentStop", agent_type: "task", ...who(info.id) });
            else write({ hook_event_name: "SessionEnd", reason: "deleted", session_id: info.id });
            break;
          }
        }
      } catch {}
    },

    "chat.message": async (input, output) => {
      try {
        const msg = output?.message || {};
        const sessionID = msg.sessionID || input?.sessionID;
        if (!sessionID || !msg.id) return;
        const [source, why] = isPush(output?.parts) ? ["program", "sessionwatch's push"] : promptSource(directory);
        remember(recorded, msg.id);
        pendingPrompt.add(sessionID);
        recordPrompt(sessionID, msg.id, source, why);
      } catch {}
    },

    // A sessionwatch tool call names the session that makes it (and the subagent, inside one).
    "tool.execute.before": async (input, output) => {
      try {
        const id = input?.sessionID;
        const args = output?.args;
        if (!id || !TOOLS.has(String(input?.tool ?? "")) || !args || typeof args !== "object") return;
        args[CALL_ARG] = { ...who(id), cwd: directory }; // in place: OpenCode hands the server this object
      } catch {}
    },

    // ... and the model never reads that in its earlier calls (the copy each model call gets).
    "experimental.chat.messages.transform": async (_input, output) => {
      try {
        for (const message of output?.messages ?? []) {
          for (const part of message?.parts ?? []) {
            const input = part?.type === "tool" ? part.state?.input : undefined;
            if (!input || typeof input !== "object" || !(CALL_ARG in input)) continue;
            const { [CALL_ARG]: _named, ...rest } = input;
            part.state = { ...part.state, input: rest };
          }
        }
      } catch {}
    },

    "experimental.session.compacting": async (input) => {
      try {
        if (input?.sessionID) compacting.add(input.sessionID);
      } catch {}
    },

    "experimental.chat.system.transform": async (input, output) => {
      try {
        const id = input?.sessionID;
        const system = output?.system;
        if (!id || !Array.isArray(system) || compacting.has(id)) return;
        // A turn's own calls carry the environment block; a title or summary call does not.
        if (!system.join("\n").includes("<env>")) return;
        const nudge = pendingPrompt.delete(id);
        const stdout = await runHook(directory, { hook_event_name: "UserPromptSubmit", ...who(id) }, { answer: true, nudge });
        const text = contextOf(stdout);
        if (text) {
          given(id, text);
          system.push(text);
        }
      } catch {}
    },

    // OpenCode shuts the plugin down and waits for this: the process is done with its sessions.
    dispose: async () => {
      try {
        for (const w of watches.values()) w.watch.stop();
        watches.clear();
        for (const id of [...unrecorded.keys()]) recordUnseen(id);
        for (const id of served) write({ hook_event_name: "SessionEnd", reason: "exit", session_id: id });
        served.clear();
        let timer;
        const late = new Promise((done) => {
          timer = setTimeout(done, END_TIMEOUT_MS);
        });
        await Promise.race([chain, late]);
        clearTimeout(timer);
      } catch {}
    },
  };
};
