// One client of server-sequential-thinking set to share = "isolated" (see
// TestRealWorldSequentialThinkingIsolated in ../realworld_test.go): three
// thoughts, each reporting the thought history's length, which counts the
// thoughts this client's process has heard. At the checkpoint "thought"
// the client is still connected; then it leaves.
//
// args: {era, name, target}; era "legacy" is the TypeScript SDK v1 client
// (initialize), "modern" the SDK v2 client pinned to 2026-07-28 (no
// handshake, no session: every request stands alone). target is
//   {kind: "connect", mcpmux, config, server}  stdio, spawning `mcpmux connect`
//   {kind: "http", url}                          Streamable HTTP
import { args, checkpoint, connect, log, main, requestTimeout, text } from "./lib.mjs";
import { runEnv } from "./runenv.mjs";

// The SDK v2 is loaded only for a modern client: loaded beside v1, it
// breaks v1's schema checks.
async function modernTransport(target) {
  if (target.kind === "connect") {
    const { StdioClientTransport: ModernStdio, getDefaultEnvironment } = await import("@modelcontextprotocol/client/stdio");
    const t = new ModernStdio({
      command: target.mcpmux,
      args: ["connect", "--config", target.config, target.server],
      env: { ...getDefaultEnvironment(), ...runEnv(), GORACE: process.env.GORACE ?? "atexit_sleep_ms=50" },
      stderr: "pipe",
    });
    t.stderr?.on("data", (d) => process.stderr.write(`[${args.name} mcpmux connect] ${d}`));
    return t;
  }
  if (target.kind === "http") {
    const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
    return new StreamableHTTPClientTransport(new URL(target.url));
  }
  throw new Error(`unknown target kind ${target.kind}`);
}

async function open() {
  if (args.era === "legacy") {
    const c = await connect(args.name, args.target);
    return { client: c.client, era: "legacy", call: (params) => c.client.callTool(params, undefined, { timeout: requestTimeout }) };
  }
  const { Client } = await import("@modelcontextprotocol/client");
  const client = new Client({ name: args.name, version: "1.0.0" }, { capabilities: {}, versionNegotiation: { mode: { pin: "2026-07-28" } } });
  client.onerror = (e) => log(args.name, "client error:", e?.message ?? e);
  await client.connect(await modernTransport(args.target), { timeout: requestTimeout });
  return { client, era: client.getProtocolEra(), call: (params) => client.callTool(params, { timeout: requestTimeout }) };
}

main(async () => {
  const { client, era, call } = await open();
  const lengths = [];
  for (let n = 1; n <= 3; n++) {
    const r = await call({ name: "sequentialthinking", arguments: { thought: `thought ${n}`, thoughtNumber: n, totalThoughts: 3, nextThoughtNeeded: n < 3 } });
    lengths.push(JSON.parse(text(r)).thoughtHistoryLength);
  }
  await checkpoint("thought");
  await client.close().catch((e) => log(args.name, "close:", e?.message ?? e));
  return { era, lengths };
});
