// One TypeScript SDK client against server-everything behind mcpmux:
// list the tools, call echo, and run trigger-long-running-operation with a
// progress token, counting the progress notifications on the wire.
//
// args: {target, steps, refused: [target...]}; each refused target (a
// WebSocket URL without the token, or with a wrong one) must fail to connect.
import { args, main, connect, opts, text, initInfo, progressOf, closeAll, log } from "./lib.mjs";

main(async () => {
  const c = await connect(`basic-${args.target.kind}`, args.target);
  const { tools } = await c.client.listTools(undefined, opts());

  const message = `hello over ${args.target.kind}`;
  const echo = await c.client.callTool({ name: "echo", arguments: { message } }, undefined, opts());
  const echoReq = c.tap.sent("tools/call", "echo");

  const steps = args.steps ?? 5;
  let callbacks = 0;
  const long = await c.client.callTool(
    { name: "trigger-long-running-operation", arguments: { duration: 1, steps } },
    undefined,
    opts({ onprogress: () => callbacks++ }),
  );
  const longReq = c.tap.sent("tools/call", "trigger-long-running-operation");
  await closeAll([c]);

  const refused = [];
  for (const target of args.refused ?? []) {
    try {
      const r = await connect("refused", target);
      await closeAll([r]);
      refused.push({ url: target.url, connected: true });
    } catch (e) {
      log("refused as expected:", e?.message ?? e);
      refused.push({ url: target.url, connected: false, error: String(e?.message ?? e) });
    }
  }

  return {
    init: initInfo(c.tap),
    tools: tools.map((t) => t.name),
    echo: { text: text(echo), requestId: echoReq.id, responseId: c.tap.responseTo(echoReq.id)?.id },
    long: {
      text: text(long),
      token: longReq.params._meta?.progressToken,
      progress: progressOf(c.tap),
      callbacks,
    },
    refused,
  };
});
