// A probe MCP server on the TypeScript SDK v2, for the era tests
// (../eras_direct_test.go). One argument picks how it is served:
//
//   dual    serveStdio(factory): the opening message pins the process to one
//           era; initialize opens a legacy (2025-11-25) session, a request
//           carrying the 2026-07-28 _meta envelope (or server/discover
//           followed by one) a modern one.
//   reject  serveStdio(factory, {legacy: "reject"}): modern only; initialize
//           is refused with -32022 naming 2026-07-28.
//   legacy  the factory's McpServer connected by hand to a
//           StdioServerTransport: legacy only (server/discover is -32601).
//
// Every mode has the same tools and the resource test://r:
//
//   echo      {text} -> "echo: TEXT"
//   progress  {steps=3} -> one notifications/progress per step, then "progress done"
//   slow      one progress notification when it starts, then waits for the
//             request to be cancelled, writes "slow cancelled" on stderr and
//             never answers (the SDK sends nothing for a cancelled request)
//   log       an info and a debug notifications/message
//   confirm   asks for an elicitation and reports the answer
//   sample    asks for a sampling and reports the answer
//   touch     notifications/resources/updated for test://r (when the session
//             subscribed: resources/subscribe on the legacy era, a listen on
//             the modern one) and notifications/tools/list_changed
//
// confirm and sample are written once, as the SDK intends: the handler
// returns inputRequired(...) until the retried request carries the answer.
// On the modern era the client fulfils it (an input_required result, then a
// retry with inputResponses); on the legacy era the SDK's shim sends a real
// elicitation/create or sampling/createMessage and re-enters the handler.
import { McpServer, fromJsonSchema, inputRequired, inputResponse } from "@modelcontextprotocol/server";
import { serveStdio, StdioServerTransport } from "@modelcontextprotocol/server/stdio";

const mode = process.argv[2] ?? "dual";
const resourceURI = "test://r";

function say(line) {
  process.stderr.write(`tsv2-server[${mode}] ${line}\n`);
}

const text = (t) => ({ content: [{ type: "text", text: t }] });

function progressOf(ctx) {
  const token = ctx.mcpReq._meta?.progressToken;
  return (progress, total) =>
    token === undefined
      ? Promise.resolve()
      : ctx.mcpReq.notify({ method: "notifications/progress", params: { progressToken: token, progress, total } });
}

// The era a request came in on: modern requests carry the envelope.
const isModern = (ctx) => ctx.mcpReq.envelope !== undefined;

function build() {
  const server = new McpServer(
    { name: "tsv2-probe", version: "1.0.0" },
    { capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, logging: {} } },
  );
  // The legacy era's resources/subscribe; the modern era has listens instead,
  // served by serveStdio itself.
  const subscribed = new Set();
  server.server.setRequestHandler("resources/subscribe", (req) => {
    subscribed.add(req.params.uri);
    return {};
  });
  server.server.setRequestHandler("resources/unsubscribe", (req) => {
    subscribed.delete(req.params.uri);
    return {};
  });
  server.registerResource("r", resourceURI, { mimeType: "text/plain" }, async (uri) => ({
    contents: [{ uri: uri.href, text: "the resource r" }],
  }));

  const textArg = fromJsonSchema({ type: "object", properties: { text: { type: "string" } }, required: ["text"] });
  server.registerTool("echo", { description: "echo the text", inputSchema: textArg }, async ({ text: t }) => text(`echo: ${t}`));

  const stepsArg = fromJsonSchema({ type: "object", properties: { steps: { type: "integer" } } });
  server.registerTool("progress", { description: "progress notifications", inputSchema: stepsArg }, async ({ steps }, ctx) => {
    const n = steps ?? 3;
    const notify = progressOf(ctx);
    for (let i = 1; i <= n; i++) await notify(i, n);
    return text("progress done");
  });

  server.registerTool("slow", { description: "wait until cancelled" }, async (ctx) => {
    await progressOf(ctx)(0, 1);
    const started = Date.now();
    await new Promise((resolve) => {
      if (ctx.mcpReq.signal.aborted) return resolve();
      ctx.mcpReq.signal.addEventListener("abort", resolve, { once: true });
      // A bound, so that a lost cancel cannot keep the process alive forever.
      setTimeout(resolve, 120000).unref();
    });
    if (ctx.mcpReq.signal.aborted) {
      say(`slow cancelled after ${Date.now() - started}ms`);
      throw new Error("slow cancelled");
    }
    return text("slow was never cancelled");
  });

  server.registerTool("log", { description: "an info and a debug log message" }, async (ctx) => {
    await ctx.mcpReq.log("info", "info line from tool");
    await ctx.mcpReq.log("debug", "debug line from tool");
    return text("logged");
  });

  const confirmSchema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] };
  server.registerTool("confirm", { description: "elicitation" }, async (ctx) => {
    const answer = inputResponse(ctx.mcpReq.inputResponses, "confirm");
    if (answer.kind !== "elicit") {
      return inputRequired({
        inputRequests: { confirm: inputRequired.elicit({ message: "Proceed?", requestedSchema: confirmSchema }) },
        requestState: "round-1",
      });
    }
    return text(`confirmed action=${answer.action} ok=${answer.content?.ok} state=${ctx.mcpReq.requestState()}`);
  });

  server.registerTool("sample", { description: "sampling" }, async (ctx) => {
    const answer = inputResponse(ctx.mcpReq.inputResponses, "llm");
    if (answer.kind !== "sampling") {
      return inputRequired({
        inputRequests: {
          llm: inputRequired.createMessage({
            messages: [{ role: "user", content: { type: "text", text: "say hi" } }],
            maxTokens: 16,
          }),
        },
        requestState: "round-1",
      });
    }
    const content = answer.result.content;
    const said = Array.isArray(content) ? content.map((c) => c.text).join("") : content?.text;
    return text(`sampled: ${said} model=${answer.result.model}`);
  });

  server.registerTool("touch", { description: "resources/updated for test://r and tools/list_changed" }, async (ctx) => {
    if (isModern(ctx) || subscribed.has(resourceURI)) {
      await server.server.sendResourceUpdated({ uri: resourceURI });
    }
    server.sendToolListChanged();
    return text("touched");
  });
  return server;
}

switch (mode) {
  case "dual":
    serveStdio(build, { onerror: (e) => say(`error: ${e?.message ?? e}`) });
    break;
  case "reject":
    serveStdio(build, { legacy: "reject", onerror: (e) => say(`error: ${e?.message ?? e}`) });
    break;
  case "legacy": {
    const server = build();
    await server.connect(new StdioServerTransport());
    break;
  }
  default:
    say(`unknown mode ${mode}: want dual, reject or legacy`);
    process.exit(2);
}
say("ready");
