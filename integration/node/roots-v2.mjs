// The TypeScript SDK v2 client, pinned to 2026-07-28, with one root, on
// the demo server with roots = "sessions" (see
// TestRealWorldModernClientRoots in ../roots_realworld_test.go): the demo
// server's roots tool asks mcpmux for roots/list and answers with the URIs
// it got. The client's roots handler counts how often it was asked.
//
// args: {target, root}; target is
//   {kind: "connect", mcpmux, config, server}  StdioClientTransport spawning `mcpmux connect`
//   {kind: "http", url}                          StreamableHTTPClientTransport
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/client/stdio";
import { args, log, main, requestTimeout, text } from "./lib.mjs";
import { runEnv } from "./runenv.mjs";

function transportFor(target) {
  if (target.kind === "connect") {
    const t = new StdioClientTransport({
      command: target.mcpmux,
      args: ["connect", "--config", target.config, target.server],
      env: { ...getDefaultEnvironment(), ...runEnv(), GORACE: process.env.GORACE ?? "atexit_sleep_ms=50" },
      stderr: "pipe",
    });
    t.stderr?.on("data", (d) => process.stderr.write(`[mcpmux connect] ${d}`));
    return t;
  }
  if (target.kind === "http") return new StreamableHTTPClientTransport(new URL(target.url));
  throw new Error(`unknown target kind ${target.kind}`);
}

main(async () => {
  const client = new Client(
    { name: `roots-v2-${args.target.kind}`, version: "1.0.0" },
    { capabilities: { roots: {} }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  let asked = 0;
  client.setRequestHandler("roots/list", async () => {
    asked++;
    return { roots: [{ uri: args.root, name: "the test's root" }] };
  });
  client.onerror = (e) => log("client error:", e?.message ?? e);
  await client.connect(transportFor(args.target), { timeout: requestTimeout });
  const call = async () => text(await client.callTool({ name: "roots", arguments: {} }, { timeout: requestTimeout }));
  const first = await call();
  const second = await call();
  const report = { era: client.getProtocolEra(), first, second, asked };
  await client.close().catch((e) => log("close:", e?.message ?? e));
  return report;
});
