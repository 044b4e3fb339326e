// Package mux is the router of one shared server: it joins the supervised
// server process, the sessions connected to it, and the tables that rewrite
// ids and progress tokens between them. Every MCP rule that comes from
// sharing one server among many clients lives here: initialize answered from
// a cache, ids made unique upstream and restored exactly downstream,
// cancellations and progress translated, notifications fanned out by rule,
// and every request answered when its server dies.
//
// # Parts
//
// A Hub composes small parts, each a type in a file named after it, with its
// own invariant and its own lock:
//
//   - life (life.go): which process serves, whether it is ready, what it
//     said of itself (serverInfo, info.go), its restarts and last exit;
//   - registry (registry.go): the sessions, and the max_sessions bound;
//   - flights (flights.go): the one door of a request's life: every request
//     in flight upstream (an idmap.Table, by upstream id), what the hub keeps
//     with each, and the gates: the turn, one request that may cause a
//     server request in flight at a time (every interactive one under
//     "serialize", those of a kind learned to ask under "auto"), and
//     max_concurrency (turn.go, gate.go), at which the sessions take turns;
//   - calls (calls.go): mcpmux's own requests to the server and who waits;
//   - subscriptions (subscriptions.go): resource subscriptions, counted per URI;
//   - logLevels (loglevels.go): each session's log level, and the server's;
//   - taskTable (tasks.go): which session created each task;
//   - serverReqs (serverreqs.go): server-to-client requests sent to sessions;
//   - rootsSeen (roots.go): the union of the sessions' roots the server last saw;
//   - clientRoots (roots.go): the roots modern clients over HTTP gave,
//     by client, for their next requests;
//   - downBridge and upBridge (bridge.go): what mcpmux keeps to serve
//     sessions of one era on a server of the other;
//   - recollection (lists.go): what Memory keeps of the server, its
//     description and its lists, which sessions are answered from while
//     the server is not ready; the started server is asked its lists
//     again, and the sessions told of those that changed;
//   - liveView (view.go): the server's tool view (ToolView), which a
//     reload may swap (SetTools); a hook at two fixed points: a session's
//     tools/call of a hidden tool is refused before the era bridges, and
//     every tools/list answer a session gets (from the server, or from
//     recollection) leaves the hidden tools out. What recollection keeps
//     is the server's whole list.
//
// Beside the parts, Config.Metrics (metrics.go) is told where a request's
// life ends (an answer delivered, a request settled unanswered, refused,
// or left by a departed session), of restarts and their causes, and of
// the server requests' attribution; what the parts hold now (sessions, in
// flight, queues) is read from Status when the metrics are scraped.
//
// The Hub alone sequences them: it reads one part, decides, then updates
// another. How a server is opened and described (open.go, info.go) and how a
// session's protocol era shapes what it is sent are where the MCP eras
// differ. The second is the bridge of a request's pairing (bridge.go): the
// plain proxy (request.go, route.go, serverreqs.go) calls its hooks at
// fixed points (the request going up, the answer coming down, a server's
// request for input, a legacy session's request for state mcpmux keeps, a
// session's retry), as httputil.ReverseProxy calls
// Rewrite and ModifyResponse; the bridges' own work lives in mrtr.go (down:
// input_required and retries), rounds.go (up: rounds of input) and
// listen.go (listens, both ways).
//
// # A request's life
//
// A session's request forwarded to the server is in one of these states,
// and only flights' transitions move it (the Hub does the sending each one
// hands back, after flights' lock is released):
//
//	state      what it is
//	routed     in the table under a fresh upstream id, waiting at a gate
//	sent       at the server; its request_timeout runs
//	parked     a modern session's request on a legacy server that asked for
//	           input: the session was answered input_required, the request
//	           stays in flight under a placeholder id until the retry
//	between    a legacy session's request on a modern server that answered
//	           input_required: out of the table, the session being asked,
//	           its gate slots kept for the next round
//	settled    out of the table, its timer stopped, its gate slots freed
//
//	from        transition              to        the Hub then sends
//	-           begin                   routed    -
//	routed      admit                   sent      the request
//	routed      (a slot frees)          sent      the request (Hub.release)
//	sent        take (answer)           settled   the answer
//	sent        take (input_required)   between   the input requests, to the session
//	between     takeRound, round        sent      the request again, with the input
//	sent        take (expire)           settled   a cancellation up, a timeout error down
//	sent        park                    parked    input_required down; the turn to the next
//	parked      resume, admitInput      sent      the input, as the server's request's answer
//	parked      take, parkedEnded       parked    nothing: the retry gets the answer
//	parked      expireParked, take      settled   a cancellation up
//	routed/sent cancel                  settled   a cancellation up, if it was sent
//	between     takeRound               settled   nothing (cancelled)
//	any         dropSession             settled   cancellations up (session gone)
//	any         reset                   settled   errors down (process exited)
//
// "settled" is settle's work: whoever takes a route from the table settles
// it once it has delivered, and settling hands back the requests that get
// the freed slots.
//
// # Goroutines
//
// These enter the hub, and nothing else does:
//   - each session's read goroutine (session.Session.Run), which calls the
//     client's Handler methods one message at a time; the handshake of a
//     legacy session (initialize) runs aside, on a goroutine of its own
//     that the read goroutine starts and waits for, so that the read
//     goroutine's stack, which an idle session keeps, never grows for it;
//   - the goroutine that calls Serve, which adds the session, runs its
//     writer (inside session.Session.Run) and, once it has ended, counts it
//     out of every part (Hub.detach);
//   - the server's stdout reader (upstream.Process), which calls
//     upstreamHandler one message at a time and never blocks;
//   - Run, which starts, supervises and restarts the process, and its ping
//     loop (Hub.pingLoop), which Hub.supervise starts and waits for; while
//     a start waits for the server's first answer, the log of its progress
//     (logStarting), which Hub.startOnce stops and waits for;
//   - timers, which nobody waits for: each takes its entry from a table
//     (under that table's lock) and acts only if it got it, so stopping one
//     is enough. They are request_timeout (armed by
//     flights.restartTimerLocked when a request is sent, and again for each
//     round of input; it runs Hub.timeout), the server request timeout
//     (armed by serverReqs.add; Hub.serverReqTimeout) and the wait of a
//     parked request for its retry (armed by flights.park;
//     downBridge.parkedTimeout), and the wait of a legacy server's first
//     request for input for the rest of its round (armed by
//     downBridge.askModern; downBridge.flushRound, which takes the round
//     from downBridge.rounds), and the delayed reopening of mcpmux's own
//     listen on a modern server that ended it at once (armed by
//     ownedListen.later, stopped when the process exits; it runs
//     upBridge.syncOwnedListen only if ownedListen.due still holds it);
//   - the daemon's control endpoint, its reload and its idle check, through
//     the exported methods: Status, Logs and FollowLogs copy out what the
//     parts hold, under their locks; Restart and Reconfigure change what
//     life holds and wake Run, which does the rest.
//
// Pool.Serve runs one Hub per session, with its Run on a goroutine of its
// own that it waits for; the hub of a client whose requests are sessions
// of their own (a 2026-07-28 HTTP client) is run by Pool.startLocked in
// Pool.wg, which Pool.Run waits for, and stopped by a timer armed by
// Pool.release when its last request has ended (Pool.stopIfIdle), which
// nobody waits for. Projects runs one Hub per project: the goroutine
// Projects.startLocked starts for its Run is in Projects.wg, which
// Projects.Run waits for. When a project's last session leaves, a timer
// (armed by Projects.release) stops that hub if no session came back
// within the idle time (Projects.stopIfIdle); nobody waits for it, and
// Projects.Run stops those it finds. While share = "project" tells a web
// session's project, the lobby reads the client's next frame on a goroutine
// of its own (lobby.next), whose outcome the session's first read takes;
// the lobby's Close ends that read and waits for it.
//
// # Locks
//
// Every part's lock is a leaf: no lock is held while another is taken (but
// for flights, which holds its own over the idmap.Table's), no I/O
// and no blocking send happens under one, and every critical section unlocks
// with defer, so a panic recovered at the session boundary never leaves a
// lock held. A test (TestEveryLockIsALeaf) reads the source to keep all
// three, following each call made under a lock through mux and the
// module's other packages; the few calls it lets pass are listed in it with
// why (the event log's formatting takes slog's own lock, into memory; a
// project's hub is made under the pool's lock). Where a part hands back
// data for the Hub to act on (a list of sessions, a frame to send), it
// copies it out under its lock and the Hub acts after. flights.latest runs
// its filter under its lock and the table's: the filters mux passes take no
// lock, which the test checks too.
//
// # Queues
//
// Sends to a session go to its bounded outbox (session.Session.Send: never
// blocks; a client past outbox_max is evicted). Sends to the server go to the
// process's bounded write queue (upstream.Process.Send: never blocks; past
// twice write_queue_bytes it refuses, and sessions stop reading before that,
// in WaitRoom). Many sessions may pass WaitRoom at once: a session's request
// that the queue cannot take waits for room on its read goroutine
// (Process.SendLaterWait, inside session.Await), so it is slowed, never
// refused, and the queue never passes its bound. What waits at the gates is bounded by each session's
// max_inflight (a session over it is not read). The upstream reader holds
// at most maxHeld sessions' answers for one flush. A tap (tap.go) holds at
// most TapQueue lines and TapQueueBytes of messages; one that falls behind
// loses lines and counts them, and nothing ever waits on it.
package mux
