// sessionwatch's OpenCode plugin, written by `sessionwatch install opencode` (uninstall removes it).
//
// - Notices: before each model call of a session's own turn, it runs `sessionwatch hook opencode` and puts
//   what is pending into that call's system text (experimental.chat.system.transform): the model reads it,
//   OpenCode never stores it. Title and compaction calls get nothing.
// - Who sent a prompt: chat.message sees every prompt before OpenCode stores it; this process's command
//   line says where it came from (the TUI: a person; `opencode run`: a program; a server: unknown). One
//   line per prompt goes next to OpenCode's database, where sessionwatch's monitor reads it.
// - Lifecycle: busy, idle, a permission asked, a session created or deleted, subagent sessions (parentID)
//   as children of their session, each reported through the same hook.
//
// It needs no package (only what OpenCode's runtime provides) and never breaks OpenCode: every call has a
// timeout, every error is swallowed, and a missing `sessionwatch` is not tried again for a minute.

import { spawn } from "node:child_process";
import { appendFileSync, mkdirSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";

const SETTINGS = { command: ["sessionwatch"], globalArgs: [], hookArgs: [] }; // sessionwatch:settings

const ANSWER_TIMEOUT_MS = 4000; // a model call waits for this at most
const WRITE_TIMEOUT_MS = 10000;
const MISSING_PAUSE_MS = 60000;
const MAX_ANSWER_BYTES = 1 << 20;
// The commands whose prompts a program sends; no command at all is the TUI, where a person types.
const PROGRAM_COMMANDS = new Set(["run"]);
const SERVER_COMMANDS = new Set(["serve", "web", "acp", "attach", "github", "pr"]);

let missingUntil = 0;

function commandOfProcess() {
  const args = process.argv.slice(2);
  for (const a of args) {
    if (a === "--") break;
    if (!a.startsWith("-")) return a;
  }
  return "";
}

function promptSource() {
  const cmd = commandOfProcess();
  if (PROGRAM_COMMANDS.has(cmd)) return ["program", `opencode ${cmd}`];
  if (SERVER_COMMANDS.has(cmd)) return ["unknown", `opencode ${cmd}`];
  if (cmd === "" || !/^[a-z-]+$/.test(cmd)) return ["person", "the TUI"]; // `opencode [project folder]`
  return ["unknown", `opencode ${cmd}`];
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

function textOf(parts) {
  return (parts || [])
    .filter((p) => p && p.type === "text" && !p.synthetic && typeof p.text === "string")
    .map((p) => p.text)
    .join(" ")
    .split(/\s+/)
    .join(" ")
    .trim();
}

export const SessionwatchPlugin = async ({ directory }) => {
  const parents = new Map(); // session id -> its parent's (subagent sessions)
  const statuses = new Map(); // session id -> the last status reported
  const compacting = new Set(); // sessions whose next calls are a compaction's
  const lastPrompt = new Map(); // session id -> [text, compacted since]
  const pendingPrompt = new Set(); // a prompt came in: the next delivery also nudges the monitor
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
  const status = (id, state) => {
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
              write({ hook_event_name: "SessionStart", source: "startup", session_id: info.id });
            }
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
          case "session.compacted": {
            compacting.delete(p.sessionID);
            const last = lastPrompt.get(p.sessionID);
            if (last) last[1] = true;
            break;
          }
          case "session.deleted": {
            const info = p.info || {};
            if (!info.id) break;
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
        let [source, why] = promptSource();
        const text = textOf(output?.parts);
        const last = lastPrompt.get(sessionID);
        if (last && last[1] && last[0] === text) [source, why] = ["unknown", "the same prompt again after a compaction"];
        lastPrompt.set(sessionID, [text, false]);
        pendingPrompt.add(sessionID);
        const folder = join(databaseFolder(), "sessionwatch", "prompts");
        mkdirSync(folder, { recursive: true });
        const line = JSON.stringify({ messageID: msg.id, source, why, at: Date.now() });
        appendFileSync(join(folder, `${sessionID}.jsonl`), line + "\n");
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
        if (text) system.push(text);
      } catch {}
    },
  };
};
