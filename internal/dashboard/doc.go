// Package dashboard serves procfleet's live dashboard in the browser
// (`procfleet up --ui ADDR`): the fleet (a row per server, the fleet
// files' load errors, the dependency graph as SVG), a page per server
// (status, conditions, last exit, spec, ownership record and evidence,
// events, the log followed live), and stop, start and restart buttons.
//
// It reads the running reconciler through Backend, a small interface
// declared here: a Snapshot (status and the fleet in force), a channel
// closed at the next change, a server's Detail, and Request (stop, start,
// restart: the CLI verbs' requests, never a command or a spec).
//
// Guarantees:
//   - Loopback only. Listen refuses every address but 127.0.0.0/8, ::1 and
//     localhost, and checks the address it bound.
//   - Every request passes the gate (security.go), or gets 403: its Host
//     header is a loopback name or address (DNS rebinding); it carries the
//     token, a random 256-bit secret that is in the URL printed once and is
//     traded at the first visit for an HttpOnly, SameSite=Strict cookie
//     (the URL is then redirected without it, or, when another site
//     started the navigation, left by a refresh of the dashboard's own
//     page, which the browser lets carry the cookie); anything but GET
//     and HEAD is a POST whose Origin is the dashboard's own (and whose
//     Sec-Fetch-Site, when sent, is same-origin). No CORS header is ever
//     sent. Responses forbid framing, scripts and connections from
//     elsewhere (CSP), referrers and caching.
//   - Server-rendered. Pages and their updates come from one set of
//     templates (assets/templates.html); an update is a patch of the
//     fragments that changed, sent over Server-Sent Events; the page's
//     script only applies patches, appends log lines and posts the
//     buttons. No polling, no reload. The assets are embedded: no CDN, no
//     build step.
//   - Nothing while no page is open: no goroutine, timer or Backend call
//     runs for the dashboard but the HTTP server's accept loop (and a
//     browser's idle keep-alive connection, until its 60 s idle timeout).
//     A connected page costs one Snapshot and one render of what changed
//     per update, at most one update per Config.MinInterval, and a
//     heartbeat every 25 s; a server's page also follows its log file
//     (internal/logfile.Follow: fsnotify, and a poll every second).
//   - Bounded. At most Config.MaxStreams pages at once (more get 503); an
//     event that cannot be written within 10 s drops its page; a log line
//     is cut at 8 KiB and cleaned of terminal escapes; action bodies are
//     capped; header and body reads have deadlines.
//   - Nothing secret is shown: env values never (names only), the token
//     never in a page, a log line or a refusal.
package dashboard
