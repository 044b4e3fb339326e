// Shared helpers of the real-world test scripts (see ../realworld_test.go).
//
// Every script takes one argument, a JSON object from the Go test, and ends
// by printing one line {"result": ...} (or {"error": "..."}) on stdout. Its
// diagnostics go to stderr. A script may stop at a checkpoint: it prints
// {"checkpoint": NAME} and waits for one line on stdin, so that the Go test
// can look at the daemon (mcpmux status) while the clients are connected.
//
// The clients are the TypeScript SDK's own Client, over its own transports
// (StdioClientTransport spawning `mcpmux connect`, WebSocketClientTransport).
// Each transport is wrapped in a Tap that records every message in both
// directions, after the transport parsed it and before the SDK's Protocol
// handles it: that is what the wire carried, and the tests count on it
// rather than on the SDK's callbacks (the SDK can drop the last progress
// notification when it arrives with the result).
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { WebSocketClientTransport } from "@modelcontextprotocol/sdk/client/websocket.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runEnv } from "./runenv.mjs";

export const args = JSON.parse(process.argv[2] ?? "{}");

// Every request of these scripts fails after this long instead of the SDK's
// 60 s, so that a lost answer fails the test quickly and says where.
export const requestTimeout = args.requestTimeoutMs ?? 20000;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function log(...parts) {
  process.stderr.write(`[${new Date().toISOString().slice(11, 23)}] ${parts.join(" ")}\n`);
}

export class AssertionError extends Error {}

export function check(cond, what) {
  if (!cond) throw new AssertionError(what);
}

// Tap is a Transport around another one, recording what passes.
export class Tap {
  constructor(inner, name) {
    this.inner = inner;
    this.name = name;
    this.in = []; // messages received, in order
    this.out = []; // messages sent, in order
  }
  async start() {
    this.inner.onmessage = (m, extra) => {
      this.in.push(m);
      this.onmessage?.(m, extra);
    };
    this.inner.onerror = (e) => this.onerror?.(e);
    this.inner.onclose = () => this.onclose?.();
    return this.inner.start();
  }
  async send(m, opts) {
    this.out.push(m);
    return this.inner.send(m, opts);
  }
  async close() {
    return this.inner.close();
  }
  get sessionId() {
    return this.inner.sessionId;
  }
  setProtocolVersion(v) {
    this.protocolVersion = v;
    this.inner.setProtocolVersion?.(v);
  }

  // What was received, by kind.
  notifications(method) {
    return this.in.filter((m) => m.method === method && m.id === undefined);
  }
  serverRequests() {
    return this.in.filter((m) => m.method !== undefined && m.id !== undefined);
  }
  responseTo(id) {
    return this.in.find((m) => m.method === undefined && m.id === id);
  }
  // The last request sent with this method (and tool name, for tools/call).
  sent(method, tool) {
    return this.out.filter((m) => m.method === method && m.id !== undefined && (tool === undefined || m.params?.name === tool)).at(-1);
  }
}

// transportFor builds the SDK transport for a target:
//   {kind: "connect", mcpmux, config, server, yamux?}  StdioClientTransport running `mcpmux connect`
//   {kind: "ws", url}                                  WebSocketClientTransport
//   {kind: "http", url, headers?}                      StreamableHTTPClientTransport
export function transportFor(target, name) {
  if (target.kind === "connect") {
    const argv = ["connect", "--config", target.config];
    if (target.yamux) argv.push("--yamux");
    if (target.server) argv.push(target.server); // none: the endpoint all
    const t = new StdioClientTransport({
      command: target.mcpmux,
      args: argv,
      // The SDK passes only HOME, LOGNAME, PATH, SHELL, TERM and USER on;
      // GORACE cuts the race-built bridge's exit pause (see mcpmux in daemon_test.go).
      env: { ...getDefaultEnvironment(), ...runEnv(), GORACE: process.env.GORACE ?? "atexit_sleep_ms=50" },
      stderr: "pipe",
    });
    t.stderr?.on("data", (d) => process.stderr.write(`[${name} mcpmux connect] ${d}`));
    return t;
  }
  if (target.kind === "ws") {
    if (typeof WebSocket === "undefined") throw new Error("no global WebSocket: run node with --experimental-websocket (Node 20/21)");
    return new WebSocketClientTransport(new URL(target.url));
  }
  if (target.kind === "http") {
    return new StreamableHTTPClientTransport(new URL(target.url), { requestInit: { headers: target.headers ?? {} } });
  }
  throw new Error(`unknown target kind ${target.kind}`);
}

// connect opens one SDK client on target, declaring capabilities, with the
// given request handlers ({schema, handler} pairs) installed first.
export async function connect(name, target, capabilities = {}, handlers = []) {
  const tap = new Tap(transportFor(target, name), name);
  const client = new Client({ name, version: "1.0.0" }, { capabilities });
  for (const [schema, handler] of handlers) client.setRequestHandler(schema, handler);
  client.onerror = (e) => log(name, "client error:", e?.message ?? e);
  const t0 = performance.now();
  await client.connect(tap, { timeout: requestTimeout });
  log(name, `connected in ${(performance.now() - t0).toFixed(0)} ms`);
  return { name, client, tap };
}

export const opts = (extra = {}) => ({ timeout: requestTimeout, ...extra });

// text is the text of a tool result's content, joined.
export function text(result) {
  return (result?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

// initInfo is what the wire said in answer to a client's initialize.
export function initInfo(tap) {
  const req = tap.sent("initialize");
  const res = req && tap.responseTo(req.id);
  return {
    requestId: req?.id,
    responseId: res?.id,
    protocolVersion: res?.result?.protocolVersion,
    serverName: res?.result?.serverInfo?.name,
    capabilities: res?.result?.capabilities,
  };
}

// progressOf lists the notifications/progress a tap received.
export function progressOf(tap) {
  return tap.notifications("notifications/progress").map((n) => n.params);
}

// callError runs a request that must fail and returns its JSON-RPC error
// as the wire carried it (code, message, data), or {resolved: result} if it
// did not fail.
export async function callError(c, fn) {
  const before = c.tap.out.length;
  try {
    const r = await fn();
    return { resolved: r };
  } catch (e) {
    const sent = c.tap.out.slice(before).find((m) => m.id !== undefined && m.method !== undefined);
    const wire = sent && c.tap.responseTo(sent.id);
    return { code: wire?.error?.code ?? e?.code, message: wire?.error?.message ?? e?.message, data: wire?.error?.data, method: sent?.method };
  }
}

// checkpoint prints {"checkpoint": name} and waits for the Go test's line.
const stdinLines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
export async function checkpoint(name, data = {}) {
  process.stdout.write(JSON.stringify({ checkpoint: name, ...data }) + "\n");
  const { done } = await stdinLines.next();
  if (done) throw new Error(`stdin closed at checkpoint ${name}`);
}

// main runs the script's body and prints its result line; the process then
// exits, whatever the clients left open.
export async function main(body) {
  const limit = args.scriptTimeoutMs ?? 90000;
  const deadline = setTimeout(() => finish({ error: `script timed out after ${limit} ms` }, 2), limit);
  try {
    const result = await body();
    clearTimeout(deadline);
    await finish({ result }, 0);
  } catch (e) {
    log("failed:", e?.stack ?? e);
    await finish({ error: String(e?.message ?? e) }, 1);
  }
}

function finish(line, code) {
  return new Promise(() => process.stdout.write(JSON.stringify(line) + "\n", () => process.exit(code)));
}

// closeAll closes clients, ignoring errors: the result is already known.
export async function closeAll(clients) {
  await Promise.allSettled(clients.map((c) => c.client.close()));
}
