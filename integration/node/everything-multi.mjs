// Many TypeScript SDK clients, each over its own `mcpmux connect`, sharing
// server-everything. Every SDK client numbers its requests from 0, so their
// ids and progress tokens collide on purpose.
//
// args: {mcpmux, config, main, serial, logWaitMs}
//   main:   server-everything with the default server_requests ("latest")
//           and roots configured: ids, progress, logging, subscriptions,
//           roots, tasks. Clients c0..c4.
//   serial: server-everything with server_requests = "serialize": sampling
//           and elicitation called by several clients at once. Clients s0..s3.
// The script reports what each client saw on the wire; the Go test asserts.
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { args, main, connect, opts, text, initInfo, progressOf, callError, checkpoint, closeAll, sleep, log } from "./lib.mjs";

const resourceURI = "demo://resource/static/document/architecture.md";

// Handlers a client installs for the capabilities it declares. Each answer
// names the client, so that the tool result shows who answered.
function handlersFor(name, caps, elicitAction = "accept") {
  const h = [];
  if (caps.sampling)
    h.push([CreateMessageRequestSchema, async () => ({
      role: "assistant",
      content: { type: "text", text: `sampled by ${name}` },
      model: `model-of-${name}`,
      stopReason: "endTurn",
    })]);
  if (caps.elicitation)
    h.push([ElicitRequestSchema, async () => elicitAction === "accept"
      ? { action: "accept", content: { name: `user of ${name}`, check: true, email: `${name}@example.com`, integer: 7 } }
      : { action: elicitAction }]);
  if (caps.roots) h.push([ListRootsRequestSchema, async () => ({ roots: [{ uri: `file:///roots-of-${name}`, name }] })]);
  return h;
}

// serverRequests lists the requests a client received from the server
// (through mcpmux), with the prompt of sampling requests.
const serverRequests = (c) => c.tap.serverRequests().map((m) => ({
  method: m.method,
  prompt: m.params?.messages?.[0]?.content?.text,
  message: m.params?.message,
}));

// barrier returns once everything the server sent before now has reached
// every client: mcpmux keeps each session's messages in order, so the
// answer to a ping comes after whatever was routed to it earlier.
const barrier = (clients) => Promise.all(clients.map((c) => c.client.ping(opts())));

const logs = (c, from = 0) => c.tap.in.slice(from).filter((m) => m.method === "notifications/message").map((n) => ({ level: n.params.level, data: String(n.params.data) }));
const updates = (c) => c.tap.notifications("notifications/resources/updated").map((n) => n.params.uri);

main(async () => {
  const base = { kind: "connect", mcpmux: args.mcpmux, config: args.config };
  const mainCaps = {
    c0: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } },
    c1: { sampling: {}, elicitation: { form: {} } },
    c2: { sampling: {} },
    c3: { elicitation: { form: {} } },
    c4: {},
  };
  const serialCaps = {
    s0: { sampling: {}, elicitation: { form: {} } },
    s1: { sampling: {}, elicitation: { form: {} } },
    s2: { sampling: {}, elicitation: { form: {} } },
    s3: {},
  };
  const elicitActions = { s0: "accept", s1: "decline", s2: "accept" };
  const [M, S] = await Promise.all([
    Promise.all(Object.entries(mainCaps).map(([n, caps]) => connect(n, { ...base, server: args.main }, caps, handlersFor(n, caps)))),
    Promise.all(Object.entries(serialCaps).map(([n, caps]) => connect(n, { ...base, server: args.serial }, caps, handlersFor(n, caps, elicitActions[n])))),
  ]);
  const [c0, c1, c2, c3, c4] = M;
  const [s0, s1, s2, s3] = S;
  const out = { main: {}, serial: {} };
  for (const c of M) out.main[c.name] = { init: initInfo(c.tap) };
  for (const c of S) out.serial[c.name] = { init: initInfo(c.tap) };

  // The Go test checks, with mcpmux status, that every client is a session
  // of one server process.
  await checkpoint("connected");

  // Colliding ids: all five call echo at once, each under id 1 (0 was its
  // initialize).
  await Promise.all(M.map(async (c) => {
    const r = await c.client.callTool({ name: "echo", arguments: { message: `from ${c.name}` } }, undefined, opts());
    const req = c.tap.sent("tools/call", "echo");
    out.main[c.name].echo = { requestId: req.id, responseId: c.tap.responseTo(req.id)?.id, text: text(r) };
  }));

  // Progress: all five run a long operation at once; the SDK uses its
  // request id as the progress token, so the tokens collide too.
  await Promise.all(M.map(async (c) => {
    const r = await c.client.callTool(
      { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 4 } },
      undefined,
      opts({ onprogress: () => {} }),
    );
    const req = c.tap.sent("tools/call", "trigger-long-running-operation");
    out.main[c.name].long = { token: req.params._meta?.progressToken, text: text(r) };
  }));
  await barrier(M); // a stray progress for someone else would have arrived by now
  for (const c of M) out.main[c.name].progress = progressOf(c.tap);

  // Logging: per-session levels, then simulated logging for the rest of the run
  // (one message at once, then every 5 s, at random levels).
  // Only what arrives from now on counts: before its setLevel a session is
  // at the default level (info), and the server logs at info on its own
  // (e.g. "Roots updated" once mcpmux answered its roots/list).
  await c1.client.setLoggingLevel("debug", opts());
  await c2.client.setLoggingLevel("error", opts());
  await barrier(M);
  const logsFrom = new Map(M.map((c) => [c, c.tap.in.length]));
  await c0.client.callTool({ name: "toggle-simulated-logging", arguments: {} }, undefined, opts());
  const loggingStarted = performance.now();

  // Subscriptions: c3 and c4 subscribe, the others do not. Each turn of
  // toggle-subscriber-updates on sends one notifications/resources/updated
  // per subscribed URI at once (then every 5 s: it is turned off before).
  const toggleUpdates = async () => {
    await c0.client.callTool({ name: "toggle-subscriber-updates", arguments: {} }, undefined, opts());
    await sleep(300);
    await c0.client.callTool({ name: "toggle-subscriber-updates", arguments: {} }, undefined, opts());
  };
  await c3.client.subscribeResource({ uri: resourceURI }, opts());
  await c4.client.subscribeResource({ uri: resourceURI }, opts());
  await toggleUpdates();
  await barrier(M);
  const updatesBoth = Object.fromEntries(M.map((c) => [c.name, updates(c)]));
  await c3.client.unsubscribeResource({ uri: resourceURI }, opts());
  await toggleUpdates();
  await barrier(M);
  const updatesAfter = Object.fromEntries(M.map((c) => [c.name, updates(c)]));
  for (const c of M) out.main[c.name].updates = { bothSubscribed: updatesBoth[c.name], afterUnsubscribe: updatesAfter[c.name] };
  await c4.client.unsubscribeResource({ uri: resourceURI }, opts());

  // Roots: mcpmux answers the server's roots/list with the configured roots.
  const roots = await c0.client.callTool({ name: "get-roots-list", arguments: {} }, undefined, opts());
  out.main.c0.roots = text(roots);

  // Tasks (main) and sampling/elicitation (serial) at the same time.
  const tasks = (async () => {
    const r = { statuses: [], foreign: {} };
    const stream = c1.client.experimental.tasks.callToolStream(
      { name: "simulate-research-query", arguments: { topic: "shared servers" } },
      undefined,
      opts({ task: { ttl: 60000 } }),
    );
    for await (const m of stream) {
      if (m.type === "taskCreated") {
        r.taskId = m.task.taskId;
        r.createdStatus = m.task.status;
        // Another session may not read, wait for or cancel c1's task.
        r.foreign.get = await callError(c2, () => c2.client.experimental.tasks.getTask(r.taskId, opts()));
        r.foreign.result = await callError(c2, () => c2.client.experimental.tasks.getTaskResult(r.taskId, undefined, opts()));
        r.foreign.cancel = await callError(c2, () => c2.client.experimental.tasks.cancelTask(r.taskId, opts()));
        r.foreign.list = await callError(c2, () => c2.client.experimental.tasks.listTasks(undefined, opts()));
      } else if (m.type === "taskStatus") {
        r.statuses.push(m.task.status);
      } else if (m.type === "result") {
        r.result = text(m.result);
      } else if (m.type === "error") {
        r.error = String(m.error?.message ?? m.error);
      }
    }
    r.ownerGetAfter = (await c1.client.experimental.tasks.getTask(r.taskId, opts())).status;
    return r;
  })();

  const serial = (async () => {
    const [a, b, c] = [s0, s1, s2];
    await Promise.all([a, b, c].map(async (s) => {
      const r = await s.client.callTool({ name: "trigger-sampling-request", arguments: { prompt: `from ${s.name}`, maxTokens: 16 } }, undefined, opts());
      out.serial[s.name].sampling = text(r);
    }));
    await Promise.all([a, b, c].map(async (s) => {
      const r = await s.client.callTool({ name: "trigger-elicitation-request", arguments: {} }, undefined, opts());
      out.serial[s.name].elicitation = text(r);
    }));
    // s3 declared neither: no session can take the sampling request its
    // call causes, so the server is answered with an error at once.
    const t0 = performance.now();
    const r = await s3.client.callTool({ name: "trigger-sampling-request", arguments: { prompt: "from s3" } }, undefined, opts());
    out.serial.s3.sampling = text(r);
    out.serial.s3.samplingIsError = r.isError === true;
    out.serial.s3.samplingMs = Math.round(performance.now() - t0);
  })();

  const [taskResult] = await Promise.all([tasks, serial]);
  out.main.tasks = taskResult;
  for (const c of S) out.serial[c.name].serverRequests = serverRequests(c);

  // Logging: let the simulated logging run for logWaitMs (three messages),
  // stop it, and collect what each session got.
  const left = (args.logWaitMs ?? 10600) - (performance.now() - loggingStarted);
  if (left > 0) await sleep(left);
  await c0.client.callTool({ name: "toggle-simulated-logging", arguments: {} }, undefined, opts());
  await barrier(M);
  for (const c of M) {
    out.main[c.name].logs = logs(c, logsFrom.get(c));
    out.main[c.name].serverRequests = serverRequests(c);
    out.main[c.name].taskStatus = c.tap.notifications("notifications/tasks/status").map((n) => n.params.taskId);
  }
  log("closing");
  await closeAll([...M, ...S]);
  return out;
});
