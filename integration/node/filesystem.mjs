// A TypeScript SDK client on server-filesystem behind mcpmux. The server is
// started with one folder (decoy) on its command line, but mcpmux declares
// roots and answers its roots/list with the configured root, which replaces
// the command line's folder: the server must serve the root, and only it.
//
// The client declares roots too, and would answer with the decoy: mcpmux
// never asks it (roots come from the config, shared by every session).
//
// args: {target, root, decoy}
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { args, main, connect, opts, text, sleep, closeAll } from "./lib.mjs";

main(async () => {
  const c = await connect("fs", args.target, { roots: { listChanged: true } }, [
    [ListRootsRequestSchema, async () => ({ roots: [{ uri: `file://${args.decoy}`, name: "decoy" }] })],
  ]);
  const call = async (name, a) => {
    const r = await c.client.callTool({ name, arguments: a }, undefined, opts());
    return { text: text(r), isError: r.isError === true };
  };

  // The server takes the roots right after mcpmux initialized it; wait for
  // that to have happened rather than race it.
  let allowed;
  for (let i = 0; i < 50; i++) {
    allowed = await call("list_allowed_directories", {});
    if (allowed.text.includes(args.root)) break;
    await sleep(100);
  }

  const out = {
    allowed,
    list: await call("list_directory", { path: args.root }),
    read: await call("read_text_file", { path: `${args.root}/hello.txt` }),
    nested: await call("read_text_file", { path: `${args.root}/sub/nested.txt` }),
    write: await call("write_file", { path: `${args.root}/written.txt`, content: "written through mcpmux" }),
    denied: {
      readDecoy: await call("read_text_file", { path: `${args.decoy}/secret.txt` }),
      listDecoy: await call("list_directory", { path: args.decoy }),
      dotdot: await call("read_text_file", { path: `${args.root}/../${args.decoyBase}/secret.txt` }),
      etc: await call("list_directory", { path: "/etc" }),
      writeDecoy: await call("write_file", { path: `${args.decoy}/planted.txt`, content: "must not be written" }),
    },
    rootsAsked: c.tap.serverRequests().filter((m) => m.method === "roots/list").length,
  };
  await closeAll([c]);
  return out;
});
