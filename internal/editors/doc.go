// Package editors knows the MCP config files of the editors that run MCP
// servers (Claude Code, Claude Desktop, Cursor, VS Code, Codex, opencode,
// Gemini CLI, Zed, Windsurf, JetBrains): where each keeps them, and the
// shape it keeps them in (JSON with comments and trailing commas, or its
// own format, such as Codex's TOML). Each editor is one entry of Clients,
// with what is particular to it in its fields (its shapes' Accept and
// Normalize, its Decode, its entries' makers and Print), and the three
// things mcpmux does with those files read it, and adopt does them all:
//
//   - Import converts the servers of an editor's file into mcpmux
//     [servers.NAME] tables (mcpmux import);
//   - a Client's PrintStdio and PrintHTTP write the entry that points the
//     editor at a server through mcpmux (mcpmux client-config);
//   - Check reads the files where they usually are and reports the entries
//     that run mcpmux connect, and what would keep them from working
//     (mcpmux doctor);
//   - PlanAdoption imports the servers of every file where doctor looks
//     into mux.toml and works out each file with its servers replaced by
//     one entry that runs mcpmux connect, of the endpoint all or of an
//     endpoint it adds with the file's servers and the tools the editor
//     showed; an Adoption's Apply writes them, each file backed up beside
//     itself first, and Undo puts the backups back (mcpmux adopt). Only
//     adopt writes editors' files.
//
// The rules of mcpmux's own
// config (valid server names, whether an imported table loads) are the
// config package's; the config doctor checks, and its servers, the caller
// hands to Check.
package editors
