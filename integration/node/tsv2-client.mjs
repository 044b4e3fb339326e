// A probe client on the TypeScript SDK v2, for the era tests
// (../eras_helpers_test.go). It connects in one of the SDK's three
// negotiation modes and runs the nine feature checks against the probe
// servers (tsv2-server.mjs, ../eraprobe):
//
//   {"mode": "legacy" | "auto" | "pin", "target": TARGET}
//
//   legacy  the SDK's default: initialize, no probe
//   auto    server/discover first, initialize if the answer is not modern
//   pin     2026-07-28 only: server/discover must offer it, no fallback
//
// TARGET is one of
//   {kind: "stdio", command, args, env?}  StdioClientTransport spawning it: the
//                                         server itself (direct), or
//                                         `mcpmux connect [--yamux] NAME`
//   {kind: "ws", url}                     a WebSocket (the v2 client has no
//                                         WebSocket transport: WebSocketTransport below)
//   {kind: "http", url, headers?}         StreamableHTTPClientTransport
//
// It prints one result line (see lib.mjs): whether it connected (or the
// connect error), the era and version the SDK settled on, each check's
// verdict, and the whole wire: every message both ways, each tagged with its
// hop. On stdio in auto and pin mode the SDK probes on a short-lived sibling
// process spawned from the same command; that process's messages are the
// "probe" hop, the session's are "session". A check passes only on what the
// wire carried: notifications are counted there, not through the SDK's
// callbacks.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/client/stdio";
import WebSocket from "ws";
import { args, log, main } from "./lib.mjs";
import { runEnv } from "./runenv.mjs";

const modernVersion = "2026-07-28";
const resourceURI = "test://r";
const tools = ["echo", "progress", "slow", "log", "confirm", "sample", "touch"];
const timeout = args.requestTimeoutMs ?? 15000;
const noteTimeout = args.notificationTimeoutMs ?? 5000;

// Wire is the record of one client's messages, with waiters for messages
// still to come.
class Wire {
  constructor() {
    this.msgs = []; // {hop, dir: "out" | "in", msg}
    this.waiters = [];
  }
  add(hop, dir, msg) {
    this.msgs.push({ hop, dir, msg: structuredClone(msg) });
    this.waiters = this.waiters.filter((w) => !w.try());
  }
  received(pred) {
    return this.msgs.filter((m) => m.dir === "in" && m.hop === "session" && pred(m.msg)).map((m) => m.msg);
  }
  sent(pred) {
    return this.msgs.filter((m) => m.dir === "out" && m.hop === "session" && pred(m.msg)).map((m) => m.msg);
  }
  // waitFor resolves with the first received session message matching pred
  // (or sent, with dir "out"), or with undefined after ms.
  waitFor(pred, ms = noteTimeout, dir = "in") {
    return new Promise((resolve) => {
      const w = {
        try: () => {
          const m = (dir === "in" ? this.received(pred) : this.sent(pred))[0];
          if (m === undefined) return false;
          clearTimeout(w.timer);
          resolve(m);
          return true;
        },
      };
      if (w.try()) return;
      w.timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        resolve(undefined);
      }, ms);
      this.waiters.push(w);
    });
  }
}

const isRequest = (m) => m.method !== undefined && m.id !== undefined;
const isNotification = (m) => m.method !== undefined && m.id === undefined;
const isResponse = (m) => m.method === undefined && m.id !== undefined;

// tapStdio records what a StdioClientTransport sends and what it parsed off
// the child's stdout (before the SDK handles it). The SDK's own class is kept
// (a wrapper would make the SDK probe in place instead of on its sibling);
// the sibling it builds from `transport.constructor` is a subclass that taps
// itself onto the probe hop.
function tapStdio(t, wire, hop) {
  const send = t.send.bind(t);
  t.send = (m, o) => {
    wire.add(hop, "out", m);
    return send(m, o);
  };
  const rb = t._readBuffer;
  const read = rb.readMessage.bind(rb);
  rb.readMessage = () => {
    const m = read();
    if (m !== null && m !== undefined) wire.add(hop, "in", m);
    return m;
  };
  return t;
}

function stdioTransport(target, wire, stderr) {
  const params = {
    command: target.command,
    args: target.args ?? [],
    env: { ...getDefaultEnvironment(), ...runEnv(), ...(target.env ?? {}) },
    stderr: "pipe",
  };
  const t = tapStdio(new StdioClientTransport(params), wire, "session");
  class ProbeSibling extends StdioClientTransport {
    constructor(p) {
      super(p);
      tapStdio(this, wire, "probe");
    }
  }
  Object.defineProperty(t, "constructor", { value: ProbeSibling });
  let partial = "";
  t.stderr?.on("data", (d) => {
    partial += d;
    const lines = partial.split("\n");
    partial = lines.pop();
    for (const l of lines) {
      stderr.push(l);
      process.stderr.write(`[server stderr] ${l}\n`);
    }
  });
  return t;
}

// WebSocketTransport is an SDK Transport over the ws package: one JSON-RPC
// message per text message, subprotocol "mcp" (what mcpmux's WebSocket
// listener selects).
class WebSocketTransport {
  constructor(url) {
    this.url = url;
  }
  start() {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url, ["mcp"]);
      this.ws = ws;
      let open = false;
      ws.on("open", () => {
        open = true;
        resolve();
      });
      ws.on("message", (data, isBinary) => {
        let m;
        try {
          m = JSON.parse(data.toString("utf8"));
        } catch (e) {
          this.onerror?.(new Error(`not JSON (${isBinary ? "binary" : "text"} message): ${e.message}`));
          return;
        }
        this.onmessage?.(m);
      });
      ws.on("error", (e) => (open ? this.onerror?.(e) : reject(e)));
      ws.on("close", () => this.onclose?.());
    });
  }
  async send(m) {
    await new Promise((resolve, reject) => this.ws.send(JSON.stringify(m), (e) => (e ? reject(e) : resolve())));
  }
  async close() {
    this.ws?.close();
  }
}

// Tap wraps a transport the SDK probes in place anyway (WebSocket, HTTP),
// recording on the session hop.
class Tap {
  constructor(inner, wire) {
    this.inner = inner;
    this.wire = wire;
  }
  async start() {
    this.inner.onmessage = (m, extra) => {
      this.wire.add("session", "in", m);
      this.onmessage?.(m, extra);
    };
    this.inner.onerror = (e) => this.onerror?.(e);
    this.inner.onclose = () => this.onclose?.();
    return this.inner.start();
  }
  async send(m, opts) {
    this.wire.add("session", "out", m);
    return this.inner.send(m, opts);
  }
  close() {
    return this.inner.close();
  }
  get sessionId() {
    return this.inner.sessionId;
  }
  get hasPerRequestStream() {
    return this.inner.hasPerRequestStream;
  }
  setProtocolVersion(v) {
    this.inner.setProtocolVersion?.(v);
  }
  setSupportedProtocolVersions(v) {
    this.inner.setSupportedProtocolVersions?.(v);
  }
}

function transportFor(target, wire, stderr) {
  switch (target.kind) {
    case "stdio":
      return stdioTransport(target, wire, stderr);
    case "ws":
      return new Tap(new WebSocketTransport(target.url), wire);
    case "http":
      return new Tap(new StreamableHTTPClientTransport(new URL(target.url), { requestInit: { headers: target.headers ?? {} } }), wire);
    default:
      throw new Error(`unknown target kind ${target.kind}`);
  }
}

const negotiation = {
  legacy: { mode: "legacy" },
  auto: { mode: "auto" },
  pin: { mode: { pin: modernVersion } },
};

const textOf = (r) => (r?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

// The answers the client gives to the servers' input requests; the tools
// echo them back in their results.
const elicitAnswer = { action: "accept", content: { ok: true } };
const sampleAnswer = { role: "assistant", content: { type: "text", text: "hi from the client" }, model: "probe-model", stopReason: "endTurn" };

function lastSent(wire, tool) {
  return wire.sent((m) => isRequest(m) && m.method === "tools/call" && m.params?.name === tool).at(-1);
}

// via says how an input request reached the client: "mrtr" when a call got
// an input_required result, "server-request" when the server sent the
// request itself.
function via(wire, tool, method) {
  const calls = new Set(wire.sent((m) => isRequest(m) && m.params?.name === tool).map((m) => JSON.stringify(m.id)));
  const mrtr = wire.received((m) => isResponse(m) && calls.has(JSON.stringify(m.id)) && m.result?.resultType === "input_required");
  const pushed = wire.received((m) => isRequest(m) && m.method === method);
  return [mrtr.length > 0 && "mrtr", pushed.length > 0 && "server-request"].filter(Boolean).join("+") || "none";
}

async function runChecks(client, wire, modern) {
  const checks = [];
  const run = async (name, fn) => {
    try {
      const { pass, detail } = await fn();
      checks.push({ name, pass: !!pass, detail });
    } catch (e) {
      checks.push({ name, pass: false, detail: `error: ${e?.message ?? e}` });
    }
    log(name, checks.at(-1).pass ? "pass" : "FAIL", JSON.stringify(checks.at(-1).detail));
  };
  const call = (name, a = {}, opts = {}, meta) =>
    client.callTool({ name, arguments: a, ...(meta && { _meta: meta }) }, { timeout, ...opts });

  await run("tools/list", async () => {
    const names = (await client.listTools(undefined, { timeout })).tools.map((t) => t.name);
    return { pass: tools.every((t) => names.includes(t)), detail: names };
  });
  await run("call", async () => {
    const t = textOf(await call("echo", { text: "hello" }));
    return { pass: t === "echo: hello", detail: t };
  });
  await run("progress", async () => {
    const t = textOf(await call("progress", { steps: 3 }, { onprogress: () => {} }));
    const token = lastSent(wire, "progress")?.params?._meta?.progressToken;
    const got = wire.received((m) => m.method === "notifications/progress" && m.params?.progressToken === token);
    return { pass: t === "progress done" && token !== undefined && got.length === 3, detail: { text: t, token, notifications: got.length } };
  });
  await run("elicitation", async () => {
    const t = textOf(await call("confirm"));
    return { pass: t.startsWith("confirmed action=accept ok=true"), detail: { text: t, via: via(wire, "confirm", "elicitation/create") } };
  });
  await run("sampling", async () => {
    const t = textOf(await call("sample"));
    return { pass: t === "sampled: hi from the client model=probe-model", detail: { text: t, via: via(wire, "sample", "sampling/createMessage") } };
  });
  await run("logging", async () => {
    if (!modern) await client.setLoggingLevel("debug", { timeout });
    const t = textOf(await call("log", {}, {}, modern ? { "io.modelcontextprotocol/logLevel": "debug" } : undefined));
    const logged = (data) => wire.waitFor((m) => m.method === "notifications/message" && m.params?.data === data);
    const [info, debug] = await Promise.all([logged("info line from tool"), logged("debug line from tool")]);
    return { pass: t === "logged" && info && debug, detail: { text: t, info: !!info, debug: !!debug, how: modern ? "logLevel" : "logging/setLevel" } };
  });
  await run("subscribe", async () => {
    let sub;
    if (modern) sub = await client.listen({ resourceSubscriptions: [resourceURI], toolsListChanged: true }, { timeout });
    else await client.subscribeResource({ uri: resourceURI }, { timeout });
    const listenID = modern ? wire.sent((m) => isRequest(m) && m.method === "subscriptions/listen").at(-1)?.id : undefined;
    const t = textOf(await call("touch"));
    const subID = (m) => m.params?._meta?.["io.modelcontextprotocol/subscriptionId"];
    const mine = (m) => !modern || subID(m) === listenID;
    const updated = await wire.waitFor((m) => m.method === "notifications/resources/updated" && m.params?.uri === resourceURI && mine(m));
    const changed = await wire.waitFor((m) => m.method === "notifications/tools/list_changed" && mine(m));
    if (sub) await sub.close();
    else await client.unsubscribeResource({ uri: resourceURI }, { timeout });
    return {
      pass: t === "touched" && !!updated,
      detail: { text: t, updated: !!updated, listChanged: !!changed, how: modern ? "subscriptions/listen" : "resources/subscribe", listenId: listenID },
    };
  });
  let slowID;
  await run("cancel", async () => {
    const ac = new AbortController();
    const p = call("slow", {}, { signal: ac.signal, onprogress: () => {} });
    p.catch(() => {});
    const req = await wire.waitFor((m) => isRequest(m) && m.method === "tools/call" && m.params?.name === "slow", timeout, "out");
    slowID = req?.id;
    const token = req?.params?._meta?.progressToken;
    const started = await wire.waitFor((m) => m.method === "notifications/progress" && m.params?.progressToken === token, timeout);
    // Let the SDK handle that notification before the abort forgets the token.
    await new Promise((r) => setImmediate(r));
    ac.abort("the probe cancels slow");
    let rejected = false;
    try {
      await p;
    } catch {
      rejected = true;
    }
    const note = wire.sent((m) => m.method === "notifications/cancelled" && m.params?.requestId === slowID)[0];
    return { pass: !!started && rejected && (!!note || client.transport?.hasPerRequestStream === true), detail: { started: !!started, rejected, notification: !!note } };
  });
  await run("call after cancel", async () => {
    const t = textOf(await call("echo", { text: "after cancel" }));
    return { pass: t === "echo: after cancel", detail: t };
  });
  // Whether the cancelled call was answered anyway by the time the next one
  // was: the TS SDK sends nothing for a cancelled request, the go-sdk sends
  // the handler's error. Clients drop such an answer, so it is reported, not
  // judged.
  const late = wire.received((m) => isResponse(m) && slowID !== undefined && m.id === slowID);
  const cancel = checks.find((c) => c.name === "cancel");
  cancel.detail = { ...cancel.detail, lateAnswers: late.length };
  return checks;
}

main(async () => {
  const mode = args.mode ?? "legacy";
  if (!negotiation[mode]) throw new Error(`unknown mode ${mode}: want legacy, auto or pin`);
  const wire = new Wire();
  const stderr = [];
  const report = { client: "ts-v2", mode, transport: args.target.kind, connected: false, checks: [], wire: wire.msgs, stderr };
  const client = new Client(
    { name: `tsv2-probe-${mode}`, version: "1.0.0" },
    { capabilities: { elicitation: { form: {} }, sampling: {} }, versionNegotiation: negotiation[mode] },
  );
  client.setRequestHandler("elicitation/create", async () => elicitAnswer);
  client.setRequestHandler("sampling/createMessage", async () => sampleAnswer);
  client.onerror = (e) => log("client error:", e?.message ?? e);
  const transport = transportFor(args.target, wire, stderr);
  const t0 = performance.now();
  try {
    await client.connect(transport, { timeout });
  } catch (e) {
    report.connectError = { code: e?.code, message: String(e?.message ?? e) };
    log("connect failed:", report.connectError.message);
    await transport.close().catch(() => {});
    return report;
  }
  report.connected = true;
  report.connectMs = Math.round(performance.now() - t0);
  report.era = client.getProtocolEra();
  report.protocolVersion = client.getNegotiatedProtocolVersion();
  report.serverName = client.getServerVersion()?.name;
  log(`connected in ${report.connectMs} ms: era ${report.era}, version ${report.protocolVersion}, server ${report.serverName}`);
  report.checks = await runChecks(client, wire, report.era === "modern");
  await client.close().catch((e) => log("close:", e?.message ?? e));
  return report;
});
