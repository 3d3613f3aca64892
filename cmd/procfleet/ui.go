package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/internal/dashboard"
	"github.com/procfleet/procfleet/reconciler"
)

// uiAddrFlag is the help of up's --ui.
const uiAddrFlag = "serve the live dashboard on `ADDR`, loopback only (127.0.0.1:7070, [::1]:7070, localhost:7070), and print its URL"

// Timing of `procfleet ui`.
const (
	// uiAskTimeout bounds dialling up's socket and asking it.
	uiAskTimeout = 10 * time.Second
	// openerWait is how long `ui --open` waits for the opener to fail
	// (not found, no display): one that is still running then has handed
	// the page to a browser, or is the browser.
	openerWait = 3 * time.Second
)

// uiFile is the page `ui --open` writes in the state folder and opens: it
// sends the browser on to the dashboard's URL, so that the token never
// appears on a command line (every local user can read those).
const uiFile = "ui.html"

// servedUI is up's dashboard, listening.
type servedUI struct {
	d   *dashboard.Dashboard
	l   net.Listener
	url string
}

// listenUI listens on addr (checked by dashboard.CheckAddr: loopback only)
// and makes the dashboard of r. A busy port is an error here, before up
// acts on anything.
func listenUI(addr string, r *reconciler.Reconciler, log logr.Logger) (*servedUI, error) {
	l, err := dashboard.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("up: --ui %s: %w", addr, err)
	}
	d, err := dashboard.New(dashboard.Config{Backend: uiBackend{r: r}, Log: log})
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("up: --ui %s: %w", addr, err)
	}
	return &servedUI{d: d, l: l, url: d.URL(l.Addr())}, nil
}

// serve serves the dashboard until ctx ends.
func (u *servedUI) serve(ctx context.Context) error { return u.d.Serve(ctx, u.l) }

func newUICmd(opts *globalOptions) *cobra.Command {
	var open bool
	cmd := &cobra.Command{
		Use:   "ui [-f PATH]... [--open]",
		Short: "Print the URL of the running up's dashboard (--open opens it)",
		Long: `UI asks the running 'procfleet up' of this state folder, through its socket,
for the URL of the dashboard it serves (up --ui ADDR), and prints it. The URL
holds the dashboard's secret token: it is for you only (the socket answers
only your own user).

With --open it also opens the dashboard in a browser: $BROWSER when set, else
xdg-open (open on macOS). The browser is given a page in the state folder
(ui.html, readable only by you) that sends it on to the URL, never the URL
itself: a command line is visible to every local user.

It fails when no up runs here, or when the running up serves no dashboard
(start it with --ui).`,
		Example: `  # Start up with its dashboard, then print the URL again later
  procfleet up --ui 127.0.0.1:7070 &
  procfleet ui

  # Open it in your browser
  procfleet ui --open`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := dashboardURL(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintln(cmd.OutOrStdout(), url); err != nil {
				return err
			}
			if !open {
				return nil
			}
			path, _ := opts.StateDirPath() // dashboardURL found it
			return openUI(cmd.Context(), path, url, cmd.ErrOrStderr())
		},
	}
	opts.addFileFlags(cmd)
	cmd.Flags().BoolVar(&open, "open", false, "also open the dashboard in a browser ($BROWSER, else xdg-open or open)")
	return cmd
}

// dashboardURL asks the up that holds the state folder for its dashboard's
// URL.
func dashboardURL(ctx context.Context, opts *globalOptions) (string, error) {
	path, err := opts.StateDirPath()
	if err != nil {
		return "", fmt.Errorf("ui: %w", err)
	}
	startHint := "start one with: procfleet up --ui 127.0.0.1:7070"
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("ui: no state folder at %s, so no procfleet up runs here (%s; or pass the fleet files with -f, or --state-dir)", path, startHint)
	}
	sd, err := actuate.InspectStateDir(path)
	if err != nil {
		return "", fmt.Errorf("ui: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, uiAskTimeout)
	defer cancel()
	c, err := api.Dial(ctx, sd.SocketPath())
	if errors.Is(err, api.ErrNoServer) {
		return "", fmt.Errorf("ui: no procfleet up runs for the state folder %s (%s)", path, startHint)
	}
	if err != nil {
		return "", fmt.Errorf("ui: ask the running up: %w", err)
	}
	defer c.Close()
	url, err := c.UI(ctx)
	if err != nil {
		return "", fmt.Errorf("ui: ask the running up of %s: %w", path, err)
	}
	return url, nil
}

// openUI writes the page that sends a browser on to url into the state
// folder at path, and opens it with the user's opener.
func openUI(ctx context.Context, path, url string, stderr io.Writer) error {
	page, err := writeUIPage(path, url)
	if err != nil {
		return fmt.Errorf("ui --open: %w", err)
	}
	argv := openerCommand(os.Getenv("BROWSER"), page)
	if err := runOpener(ctx, argv); err != nil {
		return fmt.Errorf("ui --open: open %s with %s: %w (open the URL above by hand)", page, argv[0], err)
	}
	fmt.Fprintf(stderr, "procfleet ui: opened the dashboard with %s\n", argv[0])
	return nil
}

// writeUIPage writes dir/ui.html, mode 0600, atomically: a page that sends
// the browser on to url.
func writeUIPage(dir, url string) (string, error) {
	f, err := os.CreateTemp(dir, ".ui-*.tmp") // O_EXCL, mode 0600
	if err != nil {
		return "", fmt.Errorf("write %s: %w", uiFile, err)
	}
	tmp := f.Name()
	u := html.EscapeString(url)
	_, err = fmt.Fprintf(f, "<!doctype html>\n<meta charset=\"utf-8\">\n<meta name=\"referrer\" content=\"no-referrer\">\n<meta http-equiv=\"refresh\" content=\"0; url=%s\">\n<title>procfleet dashboard</title>\n<p>Opening <a href=\"%s\">the procfleet dashboard</a>&hellip;</p>\n", u, u)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	dst := filepath.Join(dir, uiFile)
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("write %s: %w", dst, err)
	}
	return dst, nil
}

// openerCommand is the command that opens page: the first of $BROWSER's
// colon-separated commands (split into words; "%s" replaced by the page
// when present, else the page appended), else the system's opener.
func openerCommand(browser, page string) []string {
	first, _, _ := strings.Cut(browser, ":")
	words := strings.Fields(first)
	if len(words) == 0 {
		return []string{systemOpener, page}
	}
	for i, w := range words {
		if strings.Contains(w, "%s") {
			words[i] = strings.ReplaceAll(w, "%s", page)
			return words
		}
	}
	return append(words, page)
}

// runOpener starts argv and waits up to openerWait for it to fail: an
// opener still running by then is left to run (a browser started
// directly).
func runOpener(ctx context.Context, argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t := time.NewTimer(openerWait)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
