// The TypeScript SDK v2 client, pinned to 2026-07-28, on the endpoint of
// ../endpoint_realworld_test.go (server-everything, server-memory and the
// demo server): its era, the prefixed tools, each server's tool called
// through its prefix, the hidden tool refused, and the demo server's
// sampling request answered by this client (as input_required, in this
// era).
//
// args: {target, hidden, sampled}; target is
//   {kind: "stdio", command, args}   StdioClientTransport spawning `mcpmux connect`
//   {kind: "http", url, headers?}    StreamableHTTPClientTransport at /mcp
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/client/stdio";
import { args, log, main } from "./lib.mjs";
import { runEnv } from "./runenv.mjs";

const timeout = args.requestTimeoutMs ?? 15000;
const textOf = (r) => (r?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

function transportFor(target) {
  if (target.kind === "stdio") {
    const t = new StdioClientTransport({
      command: target.command,
      args: target.args,
      env: { ...getDefaultEnvironment(), ...runEnv(), GORACE: process.env.GORACE ?? "atexit_sleep_ms=50" },
      stderr: "pipe",
    });
    t.stderr?.on("data", (d) => process.stderr.write(`[mcpmux connect] ${d}`));
    return t;
  }
  if (target.kind === "http") return new StreamableHTTPClientTransport(new URL(target.url), { requestInit: { headers: target.headers ?? {} } });
  throw new Error(`unknown target kind ${target.kind}`);
}

main(async () => {
  const client = new Client(
    { name: `endpoint-v2-${args.target.kind}`, version: "1.0.0" },
    { capabilities: { sampling: {} }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  client.setRequestHandler("sampling/createMessage", async () => ({
    role: "assistant",
    content: { type: "text", text: args.sampled },
    model: "endpoint-test",
    stopReason: "endTurn",
  }));
  client.onerror = (e) => log("client error:", e?.message ?? e);
  await client.connect(transportFor(args.target), { timeout });
  const report = { era: client.getProtocolEra(), version: client.getNegotiatedProtocolVersion() };
  const call = (name, a = {}) => client.callTool({ name, arguments: a }, { timeout });

  report.tools = (await client.listTools(undefined, { timeout })).tools.map((t) => t.name);
  report.everything = textOf(await call("everything__echo", { message: "modern to everything" }));
  report.memory = textOf(await call("memory__read_graph"));
  report.demo = textOf(await call("demo__echo", { text: "modern to demo" }));
  try {
    const r = await call(args.hidden);
    report.hidden = { resolved: r };
  } catch (e) {
    report.hidden = { code: e?.code, message: String(e?.message ?? e), data: e?.data };
  }
  report.asked = textOf(await call("demo__ask", { text: "sample this" }));
  await client.close().catch((e) => log("close:", e?.message ?? e));
  return report;
});
