// The TypeScript SDK's StreamableHTTPClientTransport against server-everything
// through mcpmux's Streamable HTTP endpoint (see ../streamable_realworld_test.go).
//
// One client (token in requestInit's Authorization header), declaring
// sampling: list the tools, call echo, run trigger-long-running-operation
// with a progress token, then trigger-sampling-request, answered by its
// sampling handler. A checkpoint lets the Go test look at mcpmux status
// while it is connected. Then a second client with the token on the URL
// lists the tools and echoes, and each refused target must fail to connect.
//
// Two records of the wire: the Tap of lib.mjs (every message the transport
// passed to the SDK, in order), and a wrapped fetch that tees every SSE
// response and notes which stream carried each message: the POST of which
// request, or the GET stream.
//
// args: {target, query, refused: [target...], steps}; a target is
// {kind: "http", url, headers?}.
import { CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { args, main, Tap, opts, text, initInfo, progressOf, checkpoint, closeAll, log, requestTimeout } from "./lib.mjs";

const kindOf = (m) =>
  m === undefined ? undefined : m.method !== undefined ? (m.id !== undefined ? "request" : "notification") : "response";

// readSSE parses an SSE byte stream and calls onMessage with each event's
// JSON data. Errors (the transport aborting its streams at close) end it.
async function readSSE(body, onMessage) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).replace(/\r$/, "");
        buf = buf.slice(i + 1);
        if (line === "") {
          if (data.length) {
            try {
              onMessage(JSON.parse(data.join("\n")));
            } catch (e) {
              log("tap: bad event data:", data.join("\n"));
            }
          }
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
      }
    }
  } catch {
    // aborted
  }
}

// wiretapFetch is a fetch that records, in rec, every POST (its message and
// status) and every message of every SSE response, with the stream it came
// on.
function wiretapFetch(rec) {
  return async (url, init) => {
    const method = (init?.method ?? "GET").toUpperCase();
    let sent;
    if (method === "POST" && typeof init?.body === "string") sent = JSON.parse(init.body);
    const res = await fetch(url, init);
    if (method === "POST") rec.posts.push({ method: sent?.method, id: sent?.id, kind: kindOf(sent), status: res.status });
    const ct = res.headers.get("content-type") ?? "";
    if (!res.body || !ct.startsWith("text/event-stream")) return res;
    const stream = method === "GET" ? "GET" : sent?.method;
    const streamId = method === "GET" ? null : sent?.id;
    const [mine, theirs] = res.body.tee();
    readSSE(theirs, (m) => rec.streams.push({ stream, streamId, method: m.method, id: m.id, kind: kindOf(m) }));
    return new Response(mine, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

async function connectHTTP(name, target, capabilities = {}, handlers = []) {
  const rec = { posts: [], streams: [] };
  const transport = new StreamableHTTPClientTransport(new URL(target.url), {
    requestInit: target.headers ? { headers: target.headers } : undefined,
    fetch: wiretapFetch(rec),
  });
  const tap = new Tap(transport, name);
  const client = new Client({ name, version: "1.0.0" }, { capabilities });
  for (const [schema, handler] of handlers) client.setRequestHandler(schema, handler);
  client.onerror = (e) => log(name, "client error:", e?.message ?? e);
  const t0 = performance.now();
  await client.connect(tap, { timeout: requestTimeout });
  log(name, `connected in ${(performance.now() - t0).toFixed(0)} ms, session ${transport.sessionId}`);
  return { name, client, tap, transport, rec };
}

main(async () => {
  let handled = 0;
  const sampling = async (req) => {
    handled++;
    log("sampling request:", JSON.stringify(req.params?.messages?.[0]?.content));
    return {
      role: "assistant",
      content: { type: "text", text: "sampled over streamable http" },
      model: "model-over-http",
      stopReason: "endTurn",
    };
  };
  const c = await connectHTTP("http-header", args.target, { sampling: {} }, [[CreateMessageRequestSchema, sampling]]);
  const sessionId = c.transport.sessionId;
  await checkpoint("connected");

  const { tools } = await c.client.listTools(undefined, opts());

  const echo = await c.client.callTool({ name: "echo", arguments: { message: "hello over streamable http" } }, undefined, opts());
  const echoReq = c.tap.sent("tools/call", "echo");

  const steps = args.steps ?? 4;
  let callbacks = 0;
  const long = await c.client.callTool(
    { name: "trigger-long-running-operation", arguments: { duration: 1, steps } },
    undefined,
    opts({ onprogress: () => callbacks++ }),
  );
  const longReq = c.tap.sent("tools/call", "trigger-long-running-operation");

  const sampled = await c.client.callTool(
    { name: "trigger-sampling-request", arguments: { prompt: "over streamable http", maxTokens: 16 } },
    undefined,
    opts(),
  );
  const samplingReq = c.tap.sent("tools/call", "trigger-sampling-request");
  // Let the tee'd copies of the streams catch up with what the SDK read.
  await c.client.ping(opts());
  await closeAll([c]);

  const q = await connectHTTP("http-query", args.query);
  const qTools = await q.client.listTools(undefined, opts());
  const qEcho = await q.client.callTool({ name: "echo", arguments: { message: "token on the URL" } }, undefined, opts());
  await closeAll([q]);

  const refused = [];
  for (const target of args.refused ?? []) {
    try {
      const r = await connectHTTP("refused", target);
      await closeAll([r]);
      refused.push({ url: target.url, connected: true });
    } catch (e) {
      log("refused as expected:", e?.message ?? e);
      refused.push({ url: target.url, connected: false, error: `${e?.code ?? ""} ${e?.message ?? e}` });
    }
  }

  return {
    init: initInfo(c.tap),
    sessionId,
    tools: tools.map((t) => t.name),
    echo: { text: text(echo), requestId: echoReq.id, responseId: c.tap.responseTo(echoReq.id)?.id },
    long: {
      text: text(long),
      requestId: longReq.id,
      token: longReq.params._meta?.progressToken,
      progress: progressOf(c.tap),
      callbacks,
    },
    sampling: {
      text: text(sampled),
      isError: !!sampled.isError,
      requestId: samplingReq.id,
      requests: c.tap.serverRequests().map((m) => ({ id: m.id, method: m.method, prompt: m.params?.messages?.[0]?.content?.text })),
      handled,
    },
    streams: c.rec.streams,
    posts: c.rec.posts,
    query: { tools: qTools.tools.map((t) => t.name), echo: text(qEcho) },
    refused,
  };
});
