// sessionwatch for Pi: pending notices reach the next model call (in the system prompt of a prompt's first
// call, as the last message of every later call of the run; never stored in the session), each prompt is
// told to sessionwatch with who sent it (a person typing in the TUI, or a program), and the session's
// lifecycle is reported (working, idle, ended). In a session with a UI (the TUI, RPC) a notice that comes
// while the session is idle starts a turn: one short message per new notice (a push), and the turn's model
// call gets the notice itself. The model gets sessionwatch's six tools (Pi has no MCP: they are registered
// here), each call run as this session by `sessionwatch tool NAME --host pi`.
//
// Written by `sessionwatch install pi`, removed by `sessionwatch uninstall pi`; a new install overwrites it.
// It runs the `sessionwatch hook pi` command below and never lets sessionwatch break Pi: a missing command,
// a slow or failing run, or an answer it cannot read means "nothing to add"; for a tool call it is the
// call's error, which the model reads.

import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

const COMMAND: string[] = __SESSIONWATCH_COMMAND__;
type ToolSpec = { name: string; label: string; description: string; parameters: Record<string, unknown> };
const TOOLS: ToolSpec[] = __SESSIONWATCH_TOOLS__;
const TIMEOUT_MS = 5000; // one run at most; the store or gateway being down costs at most this
const MAX_ANSWER = 1 << 20;
const REQUEST_TIMEOUT_MS = 30000; // the watcher's MCP requests (its start loads the MCP SDK)
const PUSH_TYPE = "sessionwatch";
const TOOL_TIMEOUT_MS = 30000; // one tool run at most, beside the reply a sessions_send waits for
const GUIDELINE =
  "When a 'System: ... changed (other actor)' line says a session you rely on changed, call session_status " +
  "with the sessionKey and changesSince from that line before acting on it.";

type Answer = { hookSpecificOutput?: { additionalContext?: unknown } } | null;

function run(payload: Record<string, unknown>, cwd: string | undefined): Promise<Answer> {
  return new Promise((resolve) => {
    let done = false;
    let out = "";
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finish = (value: Answer) => {
      if (done) return;
      done = true;
      if (timer !== undefined) clearTimeout(timer);
      resolve(value);
    };
    try {
      const child = spawn(COMMAND[0], COMMAND.slice(1), {
        cwd: cwd || undefined,
        env: process.env,
        stdio: ["pipe", "pipe", "ignore"],
      });
      timer = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch {}
        finish(null);
      }, TIMEOUT_MS);
      child.on("error", () => finish(null));
      child.stdout?.on("data", (chunk: Buffer) => {
        if (out.length < MAX_ANSWER) out += chunk.toString("utf8");
      });
      child.on("close", () => {
        try {
          finish(out.trim() ? (JSON.parse(out) as Answer) : null);
        } catch {
          finish(null);
        }
      });
      child.stdin?.on("error", () => {});
      child.stdin?.end(JSON.stringify(payload));
    } catch {
      finish(null);
    }
  });
}

// -- the tools -------------------------------------------------------------------------------------------
// `sessionwatch [its options] --json tool NAME --host pi [--session KEY] [--agent ID]`: the hook's command
// line with `tool NAME` for `hook pi`, so the same store or gateway and the same session as the hook's.
function toolArgv(name: string): string[] {
  const at = COMMAND.indexOf("hook");
  return [...COMMAND.slice(1, at), "--json", "tool", name, "--host", "pi", ...COMMAND.slice(at + 2)];
}

function runTool(name: string, input: Record<string, unknown>, cwd: string | undefined, signal?: AbortSignal): Promise<any> {
  return new Promise((resolve, reject) => {
    let out = "";
    let done = false;
    let child: any;
    const wait = Number((input.arguments as any)?.timeoutSeconds) || 0; // sessions_send waits for a reply
    const finish = (error: Error | null, value?: any) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", stop);
      if (error) reject(error);
      else resolve(value);
    };
    const stop = () => {
      try {
        child?.kill("SIGKILL");
      } catch {}
      finish(new Error(`sessionwatch ${name} was cancelled`));
    };
    const timer = setTimeout(() => {
      try {
        child?.kill("SIGKILL");
      } catch {}
      finish(new Error(`sessionwatch did not answer ${name} in time`));
    }, TOOL_TIMEOUT_MS + wait * 1000);
    try {
      child = spawn(COMMAND[0], toolArgv(name), { cwd: cwd || undefined, env: process.env, stdio: ["pipe", "pipe", "pipe"] });
    } catch (err) {
      return finish(new Error(`sessionwatch cannot start: ${String(err)}`));
    }
    if (signal?.aborted) return stop();
    signal?.addEventListener("abort", stop);
    child.on("error", (err: any) =>
      finish(new Error(err?.code === "ENOENT" ? `${COMMAND[0]} is not installed where Pi runs` : `sessionwatch failed: ${String(err)}`)),
    );
    child.stderr?.on("data", () => {});
    child.stdout?.on("data", (chunk: Buffer) => {
      if (out.length < MAX_ANSWER) out += chunk.toString("utf8");
    });
    child.on("close", (code: number | null) => {
      let body: any = null;
      try {
        body = JSON.parse(out);
      } catch {}
      const error = body?.error;
      if (code === 0 && body && typeof body === "object" && !error) return finish(null, body);
      const message = typeof error?.message === "string" ? `${error.code ?? "error"}: ${error.message}` : `exit ${code}`;
      finish(new Error(`sessionwatch ${name} failed (${message})`));
    });
    child.stdin?.on("error", () => {});
    child.stdin?.end(JSON.stringify(input));
  });
}

function registerTools(pi: any): void {
  for (const spec of TOOLS) {
    try {
      pi.registerTool({
        name: spec.name,
        label: spec.label,
        description: spec.description,
        parameters: spec.parameters, // a JSON Schema: Pi validates a call against it as it is
        ...(spec.name === "session_status" ? { promptGuidelines: [GUIDELINE] } : {}),
        async execute(_id: string, params: any, signal: AbortSignal | undefined, _update: unknown, ctx: any) {
          const sm = ctx?.sessionManager;
          const input = {
            session_id: sm?.getSessionId?.() ?? null,
            transcript_path: sm?.getSessionFile?.() ?? null,
            cwd: ctx?.cwd ?? process.cwd(),
            arguments: params ?? {},
          };
          const result = await runTool(spec.name, input, input.cwd, signal); // an error: the call's error
          const text = typeof result.text === "string" && result.text ? result.text : JSON.stringify(result);
          const { text: _text, ...details } = result;
          return { content: [{ type: "text", text }], details };
        },
      });
    } catch {}
  }
}

// -- the push --------------------------------------------------------------------------------------------
// `sessionwatch mcp` for the session, run for as long as the session: its notices resource (a peek, never
// an acknowledgment) tells this extension when the session's pending notices change.
class NoticeWatch {
  private child: any;
  private buffer = "";
  private next = 1;
  private waiting = new Map<number, (result: any) => void>();
  private uri = "";
  stopped = false;

  constructor(sessionId: string, cwd: string | undefined, private onEntries: (entries: any[]) => void) {
    const at = COMMAND.indexOf("hook");
    const argv = [...COMMAND.slice(0, at), "mcp", ...COMMAND.slice(at + 2)];
    const env: Record<string, string | undefined> = { ...process.env };
    for (const name of Object.keys(env)) if (name.startsWith("CLAUDE_CODE_") || name === "CLAUDE_PROJECT_DIR") delete env[name];
    Object.assign(env, { SESSIONWATCH_PI_SESSION_ID: sessionId, SESSIONWATCH_PUSH: "0" });
    this.child = spawn(argv[0], argv.slice(1), { cwd: cwd || undefined, env, stdio: ["pipe", "pipe", "ignore"] });
    this.child.on("error", () => this.stop());
    this.child.on("close", () => this.stop());
    this.child.stdin?.on("error", () => {});
    this.child.stdout?.on("data", (chunk: Buffer) => this.receive(chunk.toString("utf8")));
    void this.begin();
  }

  private send(message: Record<string, unknown>): void {
    try {
      this.child.stdin?.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");
    } catch {}
  }

  private request(method: string, params: Record<string, unknown> = {}): Promise<any> {
    return new Promise((resolve) => {
      if (this.stopped) return resolve(null);
      const id = this.next++;
      const timer = setTimeout(() => this.waiting.delete(id) && resolve(null), REQUEST_TIMEOUT_MS);
      this.waiting.set(id, (result) => {
        clearTimeout(timer);
        resolve(result);
      });
      this.send({ id, method, params });
    });
  }

  private receive(text: string): void {
    this.buffer += text;
    if (this.buffer.length > MAX_ANSWER) this.buffer = ""; // not what this server sends: start over
    let end: number;
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
          void this.read();
        }
      } catch {}
    }
  }

  private async begin(): Promise<void> {
    const hello = await this.request("initialize", {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "sessionwatch-pi", version: "1" },
    });
    if (!hello) return this.stop();
    this.send({ method: "notifications/initialized" });
    const listed = await this.request("resources/list");
    const uri = listed?.resources?.find((r: any) => typeof r?.uri === "string" && r.uri.endsWith("/notices"))?.uri;
    if (!uri) return this.stop();
    this.uri = uri;
    await this.request("resources/subscribe", { uri });
    await this.read();
  }

  private async read(): Promise<void> {
    const out = await this.request("resources/read", { uri: this.uri });
    try {
      const body = JSON.parse(out?.contents?.[0]?.text ?? "null");
      if (Array.isArray(body?.entries)) this.onEntries(body.entries);
    } catch {}
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const done of this.waiting.values()) done(null);
    this.waiting.clear();
    try {
      this.child.stdin?.end();
      this.child.kill("SIGTERM");
    } catch {}
  }
}

/** The notice ids already pushed into one Pi session (at most one push per notice, across restarts). */
function pushedFile(sessionId: string): string {
  const base =
    process.env.SESSIONWATCH_STATE_DIR ||
    join(process.env.XDG_STATE_HOME || join(homedir(), ".local", "state"), "sessionwatch");
  return join(base, "push", `pi-${sessionId.replace(/[^A-Za-z0-9_.-]/g, "_")}.json`);
}

function loadPushed(sessionId: string): Set<number> {
  try {
    const ids = JSON.parse(readFileSync(pushedFile(sessionId), "utf8"));
    return new Set(Array.isArray(ids) ? ids.filter((i: unknown) => Number.isInteger(i)) : []);
  } catch {
    return new Set();
  }
}

function savePushed(sessionId: string, ids: Set<number>): void {
  try {
    const path = pushedFile(sessionId);
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(`${path}.${process.pid}.tmp`, JSON.stringify([...ids]));
    renameSync(`${path}.${process.pid}.tmp`, path);
  } catch {}
}

function pushText(count: number): string {
  const what = count === 1 ? "a session you rely on has" : `${count} sessions you rely on have`;
  return `sessionwatch: ${what} changed since you last looked. Reconcile before acting; the notice follows.`;
}

export default function sessionwatch(pi: any) {
  registerTools(pi);
  // One run at a time, in the order the events came: a later state never lands before an earlier one.
  let queue: Promise<unknown> = Promise.resolve();
  let lastInput: { source?: string; text?: string } = {};
  let firstCallServed = false; // before_agent_start gave this run's first model call its notices
  let busy = false; // a run is going on (agent_start .. agent_end)
  let watch: NoticeWatch | null = null;
  let watchedSession = "";
  let entries: any[] = []; // the session's pending notices, as the watcher last read them
  let pushed = new Set<number>();
  const delivered = new Set<string>(); // notice lines a model call was given (acknowledged at the next run)

  const given = (text: string) => {
    for (const line of text.split("\n")) delivered.add(line);
    while (delivered.size > 512) delivered.delete(delivered.values().next().value as string);
  };

  // A notice pending while the session is idle that no call was given and no push told: one message
  // that starts a turn (best effort; the notice itself stays queued and reaches that turn's model call).
  const maybePush = () => {
    try {
      if (busy || !watch || watch.stopped) return;
      const fresh = entries.filter((e) => Number.isInteger(e?.id) && !pushed.has(e.id) && !delivered.has(e?.line));
      if (!fresh.length) return;
      for (const e of fresh) pushed.add(e.id);
      const live = new Set(entries.map((e) => e?.id));
      pushed = new Set([...pushed].filter((id) => live.has(id))); // what left the queue is never pushed again
      savePushed(watchedSession, pushed);
      pi.sendMessage({ customType: PUSH_TYPE, content: pushText(fresh.length), display: true }, { triggerTurn: true });
    } catch {}
  };

  const startWatch = (ctx: any) => {
    try {
      const sessionId = ctx?.sessionManager?.getSessionId?.();
      if (!ctx?.hasUI || process.env.SESSIONWATCH_PUSH === "0") return; // no idle session to push into, or off
      if (typeof sessionId !== "string" || !sessionId || sessionId === watchedSession) return;
      watch?.stop();
      watchedSession = sessionId;
      pushed = loadPushed(sessionId);
      entries = [];
      watch = new NoticeWatch(sessionId, ctx?.cwd, (now) => {
        entries = now;
        maybePush();
      });
    } catch {}
  };

  const hook = (event: string, ctx: any, extra: Record<string, unknown> = {}): Promise<Answer> => {
    let payload: Record<string, unknown>;
    try {
      const sm = ctx?.sessionManager;
      payload = {
        hook_event_name: event,
        session_id: sm?.getSessionId?.() ?? null,
        transcript_path: sm?.getSessionFile?.() ?? null,
        cwd: ctx?.cwd ?? process.cwd(),
        ...extra,
      };
    } catch {
      return Promise.resolve(null);
    }
    const next = queue.then(() => run(payload, payload.cwd as string | undefined)).catch(() => null);
    queue = next;
    return next as Promise<Answer>;
  };

  pi.on("session_start", (event: any, ctx: any) => {
    void hook("SessionStart", ctx, { source: event?.reason ?? null });
    startWatch(ctx);
  });

  pi.on("agent_start", () => {
    busy = true;
  });

  pi.on("input", (event: any, ctx: any) => {
    // The only place that knows who sent a prompt: "interactive" is typed in the TUI.
    try {
      lastInput = { source: String(event?.source ?? ""), text: String(event?.text ?? "") };
    } catch {
      lastInput = {};
    }
    return { action: "continue" };
  });

  pi.on("before_agent_start", async (event: any, ctx: any) => {
    try {
      const source = lastInput.source || "unknown";
      lastInput = {};
      const answer = await hook("UserPromptSubmit", ctx, {
        prompt: typeof event?.prompt === "string" ? event.prompt : "",
        prompt_source: source,
        has_ui: Boolean(ctx?.hasUI),
      });
      firstCallServed = true;
      const text = answer?.hookSpecificOutput?.additionalContext;
      if (typeof text === "string" && text && typeof event?.systemPrompt === "string") {
        given(text);
        return { systemPrompt: `${event.systemPrompt}\n\n${text}` };
      }
    } catch {}
    return undefined;
  });

  pi.on("context", async (event: any, ctx: any) => {
    // Before each model call. The prompt's first call has had its notices (before_agent_start); every
    // later one (after a tool ran, a steered or extension-started turn) gets what became pending since,
    // as one more message of this call only: Pi passes a copy, so nothing of it is stored.
    try {
      if (firstCallServed) {
        firstCallServed = false;
        return undefined;
      }
      const answer = await hook("PostToolUse", ctx);
      const text = answer?.hookSpecificOutput?.additionalContext;
      if (typeof text === "string" && text && Array.isArray(event?.messages)) {
        given(text);
        const notice = { role: "user", content: [{ type: "text", text }], timestamp: Date.now() };
        return { messages: [...event.messages, notice] };
      }
    } catch {}
    return undefined;
  });

  pi.on("agent_end", (_event: any, ctx: any) => {
    busy = false;
    firstCallServed = false;
    void hook("Stop", ctx);
    maybePush(); // a notice that came during the run's last call
  });

  pi.on("session_shutdown", async (event: any, ctx: any) => {
    try {
      if (event?.reason === "reload") return; // the same session goes on with the extensions reloaded
      watch?.stop();
      watch = null;
      watchedSession = "";
      await hook("SessionEnd", ctx, { reason: event?.reason ?? null });
    } catch {}
  });
}
