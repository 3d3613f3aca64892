package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// applyGitHub is apply's output for GitHub Actions: text, plus an ::error
// annotation per server not as declared and, when $GITHUB_STEP_SUMMARY
// names a file, a Markdown summary appended to it.
const applyGitHub = "github"

// envStepSummary names the file GitHub Actions shows as the job's summary.
const envStepSummary = "GITHUB_STEP_SUMMARY"

// envWorkspace is the checkout, to which GitHub resolves annotation paths.
const envWorkspace = "GITHUB_WORKSPACE"

// writeApplyGitHub writes the annotations of res on stdout and, when
// $GITHUB_STEP_SUMMARY is set, appends its summary to that file. The
// servers' documents are located in the fleet files at paths; a file that
// no longer loads leaves the annotations without a place. A summary that
// cannot be written is said on stderr and changes nothing else: the fleet
// is as the exit status says.
func writeApplyGitHub(stdout, stderr io.Writer, res reconciler.ApplyResult, paths []string) error {
	var sources map[string]spec.Source
	if f, err := spec.Load(paths...); err == nil {
		sources = make(map[string]spec.Source, len(f.Servers))
		for _, s := range f.Servers {
			sources[s.Metadata.Name] = s.Source
		}
	}
	if _, err := io.WriteString(stdout, applyAnnotations(res, sources, annotationPath)); err != nil {
		return fmt.Errorf("apply: write the annotations: %w", err)
	}
	path := os.Getenv(envStepSummary)
	if path == "" {
		return nil
	}
	if err := appendText(path, applyStepSummary(res)); err != nil {
		fmt.Fprintf(stderr, "apply: cannot write the step summary ($%s): %v\n", envStepSummary, err)
	}
	return nil
}

// appendText appends text to the file at path, creating it.
func appendText(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// annotationPath is file as GitHub places an annotation: relative to the
// checkout ($GITHUB_WORKSPACE) when it lies inside it (a job may run in a
// subfolder of it), else as given.
func annotationPath(file string) string {
	ws := os.Getenv(envWorkspace)
	if file == "" || ws == "" {
		return file
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return file
	}
	if rel, err := filepath.Rel(ws, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return filepath.ToSlash(rel)
	}
	return file
}

// applyAnnotations is one ::error workflow command per fleet-file error and
// per server not as declared, at the file and line of its document (a
// replica's, its server's) when sources has it; place maps a file to the
// path the annotation names.
func applyAnnotations(res reconciler.ApplyResult, sources map[string]spec.Source, place func(string) string) string {
	var b strings.Builder
	for _, e := range res.Errors {
		b.WriteString(githubAnnotation(&spec.FieldError{File: place(e.File), Line: e.Line, Field: e.Field, Message: e.Message}, false))
		b.WriteByte('\n')
	}
	for _, name := range notConvergedNames(res) {
		s, _ := res.Get(name)
		doc := name
		if s.ReplicaOf != "" {
			doc = s.ReplicaOf
		}
		src := sources[doc]
		b.WriteString(githubAnnotation(&spec.FieldError{File: place(src.File), Line: src.Line, Field: "procfleet: " + name, Message: failureReason(s, res.NotConverged[name])}, false))
		b.WriteByte('\n')
	}
	return b.String()
}

// failureReason says in one line why a server is not as declared: what the
// wait found, its phase and reason, its last exit and, after an exit, its
// last log line (else its status message), each said once.
func failureReason(s reconciler.ServerStatus, why string) string {
	var parts []string
	add := func(p string) {
		for _, q := range parts {
			if strings.Contains(q, p) {
				return
			}
		}
		parts = append(parts, p)
	}
	phase := s.Phase.String()
	if s.Reason != "" {
		phase += ": " + s.Reason
	}
	add(phase)
	if why != "" {
		add(why)
	}
	if s.LastExit != nil && s.LastExit.Reason != "" {
		add(s.LastExit.Reason)
	}
	if l := lastNonEmptyLine(s.Message); l != "" {
		if hasLogTail(s) {
			add("last log line: " + l)
		} else {
			add(l)
		}
	}
	return strings.Join(parts, "; ")
}

// hasLogTail reports whether s's message is the log tail of its last exit
// rather than a status message.
func hasLogTail(s reconciler.ServerStatus) bool {
	return s.LastExit != nil && strings.TrimSpace(s.Message) != "" && s.Message != s.Reason
}

// applyStepSummary is the Markdown apply appends to the job's summary: a
// table of the servers and, for each not as declared, why and its log tail.
func applyStepSummary(res reconciler.ApplyResult) string {
	var b strings.Builder
	failed := notConvergedNames(res)
	switch {
	case len(res.Errors) > 0:
		fmt.Fprintf(&b, "### procfleet apply: the fleet files have %s\n\n", plural(len(res.Errors), "error"))
		for _, e := range res.Errors {
			fmt.Fprintf(&b, "- %s:%d: %s\n", e.File, e.Line, mdInline(e.Message))
		}
		b.WriteByte('\n')
	case len(failed) > 0:
		fmt.Fprintf(&b, "### procfleet apply: %d of %d server(s) not as declared\n\n", len(failed), len(res.Servers))
	default:
		fmt.Fprintf(&b, "### procfleet apply: %d server(s), %d ready\n\n", len(res.Servers), countReady(res.Status))
	}
	if len(res.Servers) > 0 {
		b.WriteString("| Server | Phase | Ready | Ready since | Restarts |\n| --- | --- | --- | --- | --- |\n")
		for _, s := range res.Servers {
			ready := "no"
			if s.Ready {
				ready = "yes"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %d |\n", mdCell(s.Name), mdCell(s.Phase.String()), ready, readySince(s), s.Restarts)
		}
		b.WriteByte('\n')
	}
	for _, name := range failed {
		s, _ := res.Get(name)
		fmt.Fprintf(&b, "#### %s\n\n%s\n\n", mdInline(name), mdInline(failureReason(s, res.NotConverged[name])))
		if hasLogTail(s) {
			tail := strings.TrimRight(s.Message, "\n")
			fence := mdFence(tail)
			fmt.Fprintf(&b, "Log tail:\n\n%stext\n%s\n%s\n\n", fence, tail, fence)
		}
	}
	return b.String()
}

// notConvergedNames are res's servers not as declared, sorted.
func notConvergedNames(res reconciler.ApplyResult) []string {
	names := make([]string, 0, len(res.NotConverged))
	for n := range res.NotConverged {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// readySince is when s last became Ready, in UTC to the second; "" when it
// is not Ready or the time is unknown. (Not the time from its start: a
// record's StartedAt has whole seconds only.)
func readySince(s reconciler.ServerStatus) string {
	if !s.Ready {
		return ""
	}
	for _, c := range s.Conditions {
		if c.Type == reconciler.ConditionReady && c.Status == reconciler.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.UTC().Format("15:04:05 UTC")
		}
	}
	return ""
}

func lastNonEmptyLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\r\n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

var (
	mdCellEscaper   = strings.NewReplacer("|", `\|`, "\r", " ", "\n", " ")
	mdInlineEscaper = strings.NewReplacer("\r", " ", "\n", " ")
)

// mdCell makes s safe in a Markdown table cell.
func mdCell(s string) string { return mdCellEscaper.Replace(s) }

// mdInline makes s one Markdown line.
func mdInline(s string) string { return mdInlineEscaper.Replace(s) }

// mdFence is a code fence longer than any run of backticks in s, so that s
// cannot close it.
func mdFence(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}
