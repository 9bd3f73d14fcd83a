// sessionwatch for Pi: pending notices reach the next model call (in the system prompt of a prompt's first
// call, as the last message of every later call of the run; never stored in the session), each prompt is
// told to sessionwatch with who sent it (a person typing in the TUI, or a program), and the session's
// lifecycle is reported (working, idle, ended).
//
// Written by `sessionwatch install pi`, removed by `sessionwatch uninstall pi`; a new install overwrites it.
// It runs the `sessionwatch hook pi` command below and never lets sessionwatch break Pi: a missing command,
// a slow or failing run, or an answer it cannot read means "nothing to add".

import { spawn } from "node:child_process";

const COMMAND: string[] = __SESSIONWATCH_COMMAND__;
const TIMEOUT_MS = 5000; // one run at most; the store or gateway being down costs at most this
const MAX_ANSWER = 1 << 20;

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

export default function sessionwatch(pi: any) {
  // One run at a time, in the order the events came: a later state never lands before an earlier one.
  let queue: Promise<unknown> = Promise.resolve();
  let lastInput: { source?: string; text?: string } = {};
  let firstCallServed = false; // before_agent_start gave this run's first model call its notices

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
        const notice = { role: "user", content: [{ type: "text", text }], timestamp: Date.now() };
        return { messages: [...event.messages, notice] };
      }
    } catch {}
    return undefined;
  });

  pi.on("agent_end", (_event: any, ctx: any) => {
    void hook("Stop", ctx);
  });

  pi.on("session_shutdown", async (event: any, ctx: any) => {
    try {
      if (event?.reason === "reload") return; // the same session goes on with the extensions reloaded
      await hook("SessionEnd", ctx, { reason: event?.reason ?? null });
    } catch {}
  });
}
