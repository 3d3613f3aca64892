package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/spec"
)

// Output formats of validate.
const (
	validateText   = "text"
	validateJSON   = "json"
	validateGitHub = "github"
)

func newValidateCmd(opts *globalOptions) *cobra.Command {
	var (
		output string
		strict bool
	)
	cmd := &cobra.Command{
		Use:   "validate [-f PATH]... [-o text|json|github] [--strict]",
		Short: "Check fleet files and report every error",
		Long: `Validate reads the fleet files as every other command does (strict decoding,
defaults, env files, validation across all files) and reports every error at
once, each with its file, line and field path.

It also warns, without failing, about what would work differently than
written: a $(NAME) that stays as written, a shell-style ${NAME} that nothing
expands, a variable procfleet sets itself, and a program that is not found
(CI often builds it after validating). --strict turns warnings into errors.

Output formats (-o):
  text    one "file:line: field: message" line per error, and per warning
          with "warning: " before the message (default)
  json    an array of {"file", "line", "field", "message", "severity"}
          objects, severity "error" or "warning" ([] when valid, no warning)
  github  GitHub Actions workflow commands (::error or ::warning
          file=F,line=L,title=FIELD::message), so a CI run marks the lines

Exit status: 0 when the files are valid (warnings or not, unless --strict),
1 on any error.`,
		Example: `  # Check procfleet.yaml in the current folder
  procfleet validate

  # Check a folder of fleet files and an extra file
  procfleet validate -f examples/quickstart -f extra.yaml

  # In a GitHub Actions step: annotate the lines at fault, warnings failing too
  procfleet validate -f procfleet.yaml -o github --strict`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case validateText, validateJSON, validateGitHub:
			default:
				return fmt.Errorf("invalid -o %q: want text, json or github", output)
			}
			log := opts.Logger().WithName("validate")
			fleet, err := spec.Load(opts.FleetPaths()...)
			var list, warnings spec.ErrorList
			if err != nil {
				list = fieldErrors(err)
				if list == nil {
					return fmt.Errorf("validate: %w", err)
				}
				log.V(1).Info("fleet files invalid", "paths", opts.FleetPaths(), "errors", len(list))
			} else {
				warnings = append(append(warnings, fleet.Warnings...), fleet.ProgramWarnings()...)
				warnings.Sort()
				log.V(1).Info("fleet files valid", "files", fleet.Files, "servers", len(fleet.Servers), "warnings", len(warnings))
			}
			if strict {
				list = append(list, warnings...)
				list.Sort()
				warnings = nil
			}
			if werr := writeValidation(cmd.OutOrStdout(), output, fleet, list, warnings); werr != nil {
				return fmt.Errorf("validate: write output: %w", werr)
			}
			if len(list) > 0 {
				return silentExit(exitFailure)
			}
			return nil
		},
	}
	opts.addFileFlags(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", validateText, "output `FORMAT`: text, json or github")
	cmd.Flags().BoolVar(&strict, "strict", false, "treat warnings as errors (exit 1)")
	return cmd
}

// fieldErrors extracts the field errors from what spec.Load returned, or nil
// when err carries none.
func fieldErrors(err error) spec.ErrorList {
	var list spec.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		return list
	}
	var fe *spec.FieldError
	if errors.As(err, &fe) {
		return spec.ErrorList{fe}
	}
	return nil
}

// validationError is one line of validate's JSON output, the same shape as
// the "errors" of status -o json plus its severity.
type validationError struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Field    string `json:"field"`
	Message  string `json:"message"`
	Severity string `json:"severity"` // "error" or "warning"
}

// finding is an error or a warning, in the order printed.
type finding struct {
	*spec.FieldError
	warning bool
}

// findings lists the errors, then the warnings.
func findings(list, warnings spec.ErrorList) []finding {
	out := make([]finding, 0, len(list)+len(warnings))
	for _, e := range list {
		out = append(out, finding{e, false})
	}
	for _, w := range warnings {
		out = append(out, finding{w, true})
	}
	return out
}

// writeValidation prints the outcome of loading the fleet in format: the
// errors, then the warnings.
func writeValidation(w io.Writer, format string, fleet *spec.Fleet, list, warnings spec.ErrorList) error {
	all := findings(list, warnings)
	switch format {
	case validateJSON:
		out := make([]validationError, 0, len(all))
		for _, f := range all {
			sev := "error"
			if f.warning {
				sev = "warning"
			}
			out = append(out, validationError{File: f.File, Line: f.Line, Field: f.Field, Message: f.Message, Severity: sev})
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	case validateGitHub:
		var b strings.Builder
		for _, f := range all {
			b.WriteString(githubAnnotation(f.FieldError, f.warning))
			b.WriteByte('\n')
		}
		if len(list) == 0 {
			b.WriteString(okSummary(fleet, len(warnings)))
		}
		_, err := io.WriteString(w, b.String())
		return err
	default:
		var b strings.Builder
		for _, f := range all {
			if f.warning {
				warned := *f.FieldError
				warned.Message = "warning: " + warned.Message
				b.WriteString(warned.Error())
			} else {
				b.WriteString(f.Error())
			}
			b.WriteByte('\n')
		}
		if len(list) == 0 {
			b.WriteString(okSummary(fleet, len(warnings)))
		} else {
			fmt.Fprintf(&b, "%s\n", plural(len(list), "error"))
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
}

// okSummary is the one line printed for a valid fleet.
func okSummary(fleet *spec.Fleet, warnings int) string {
	n, files := 0, 0
	if fleet != nil {
		n, files = len(fleet.Servers), len(fleet.Files)
	}
	if warnings > 0 {
		return fmt.Sprintf("%s OK (%s), %s\n", plural(n, "server"), plural(files, "file"), plural(warnings, "warning"))
	}
	return fmt.Sprintf("%s OK (%s)\n", plural(n, "server"), plural(files, "file"))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// githubAnnotation formats e as a GitHub Actions error (or warning)
// workflow command. Properties and message are escaped as the runner
// expects (%, CR, LF, and in properties also ':' and ',').
func githubAnnotation(e *spec.FieldError, warning bool) string {
	var props []string
	if e.File != "" {
		props = append(props, "file="+escapeGitHubProperty(e.File))
	}
	if e.Line > 0 {
		props = append(props, "line="+strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		props = append(props, "title="+escapeGitHubProperty(e.Field))
	}
	cmd := "::error"
	if warning {
		cmd = "::warning"
	}
	if len(props) > 0 {
		cmd += " " + strings.Join(props, ",")
	}
	return cmd + "::" + escapeGitHubData(e.Message)
}

var (
	githubDataEscaper     = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A")
	githubPropertyEscaper = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C")
)

func escapeGitHubData(s string) string     { return githubDataEscaper.Replace(s) }
func escapeGitHubProperty(s string) string { return githubPropertyEscaper.Replace(s) }
