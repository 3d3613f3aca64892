package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	nomad "github.com/hashicorp/nomad/api"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// TestKubernetesDecodesStrictly decodes every document back into its
// k8s.io/api type with unknown fields refused, re-encodes it to the same
// bytes (nothing lost), and runs the API's own validation helpers over
// names, labels, selectors, ports, env names and probes.
func TestKubernetesDecodesStrictly(t *testing.T) {
	for _, fleet := range fleets {
		servers := loadFleet(t, fleet)
		res := export(t, Kubernetes, fleet)
		if len(res.Files) != len(servers) {
			t.Fatalf("%s: %d files for %d servers", fleet, len(res.Files), len(servers))
		}
		kinds := map[string]int{}
		for _, f := range res.Files {
			for i, doc := range strings.Split(string(f.Data), "---\n") {
				where := fmt.Sprintf("%s/%s document %d", fleet, f.Name, i)
				var tm metav1.TypeMeta
				if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				kinds[tm.APIVersion+"/"+tm.Kind]++
				var obj any
				switch tm.APIVersion + "/" + tm.Kind {
				case "apps/v1/Deployment":
					obj = &appsv1.Deployment{}
				case "batch/v1/Job":
					obj = &batchv1.Job{}
				case "v1/Service":
					obj = &corev1.Service{}
				default:
					t.Fatalf("%s: unexpected %s %s", where, tm.APIVersion, tm.Kind)
				}
				if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
					t.Fatalf("%s: strict decode: %v", where, err)
				}
				again, err := marshalAPIObject(obj)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(doc, string(again)); diff != "" {
					t.Errorf("%s: decoding and encoding again changed it (-exported +again):\n%s", where, diff)
				}
				for _, e := range validateK8s(obj) {
					t.Errorf("%s: %v", where, e)
				}
			}
		}
		t.Logf("%s: %v", fleet, kinds)
	}
}

// validateK8s checks what the apimachinery helpers can check without the
// API server: the rules of k8s.io/kubernetes/pkg/apis/core/validation that
// the export could break.
func validateK8s(obj any) field.ErrorList {
	var errs field.ErrorList
	podTemplate := func(tmpl *corev1.PodTemplateSpec, sel *metav1.LabelSelector, path *field.Path, policies ...corev1.RestartPolicy) {
		errs = append(errs, metav1validation.ValidateLabels(tmpl.Labels, path.Child("metadata", "labels"))...)
		errs = append(errs, apivalidation.ValidateAnnotations(tmpl.Annotations, path.Child("metadata", "annotations"))...)
		if sel != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path.Root().Child("spec", "selector"))...)
			s, err := metav1.LabelSelectorAsSelector(sel)
			if err != nil || s.Empty() || !s.Matches(labels.Set(tmpl.Labels)) {
				errs = append(errs, field.Invalid(path.Child("metadata", "labels"), tmpl.Labels, "selector does not match the template's labels"))
			}
		}
		ps := tmpl.Spec
		if !func() bool {
			for _, p := range policies {
				if ps.RestartPolicy == p {
					return true
				}
			}
			return false
		}() {
			errs = append(errs, field.NotSupported(path.Child("spec", "restartPolicy"), ps.RestartPolicy, []string{fmt.Sprint(policies)}))
		}
		if ps.TerminationGracePeriodSeconds == nil || *ps.TerminationGracePeriodSeconds < 0 {
			errs = append(errs, field.Invalid(path.Child("spec", "terminationGracePeriodSeconds"), ps.TerminationGracePeriodSeconds, "must be set and not negative"))
		}
		names := map[string]bool{}
		check := func(c corev1.Container, p *field.Path, init bool) {
			for _, m := range validation.IsDNS1123Label(c.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), c.Name, m))
			}
			if names[c.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
			}
			names[c.Name] = true
			if c.Image == "" || strings.TrimSpace(c.Image) != c.Image {
				errs = append(errs, field.Required(p.Child("image"), "no image"))
			}
			for i, port := range c.Ports {
				for _, m := range validation.IsValidPortName(port.Name) {
					errs = append(errs, field.Invalid(p.Child("ports").Index(i).Child("name"), port.Name, m))
				}
				for _, m := range validation.IsValidPortNum(int(port.ContainerPort)) {
					errs = append(errs, field.Invalid(p.Child("ports").Index(i).Child("containerPort"), port.ContainerPort, m))
				}
			}
			for i, e := range c.Env {
				for _, m := range validation.IsEnvVarName(e.Name) {
					errs = append(errs, field.Invalid(p.Child("env").Index(i).Child("name"), e.Name, m))
				}
			}
			if init && (c.ReadinessProbe != nil || c.LivenessProbe != nil) {
				errs = append(errs, field.Forbidden(p, "init containers take no probes"))
			}
			errs = append(errs, validateProbe(c.ReadinessProbe, p.Child("readinessProbe"), false)...)
			errs = append(errs, validateProbe(c.LivenessProbe, p.Child("livenessProbe"), true)...)
		}
		if len(ps.Containers) != 1 {
			errs = append(errs, field.Invalid(path.Child("spec", "containers"), len(ps.Containers), "want one container"))
		}
		for i, c := range ps.InitContainers {
			check(c, path.Child("spec", "initContainers").Index(i), true)
		}
		for i, c := range ps.Containers {
			check(c, path.Child("spec", "containers").Index(i), false)
		}
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		errs = append(errs, apivalidation.ValidateObjectMeta(&o.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
		if o.Spec.Replicas == nil || *o.Spec.Replicas < 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "replicas"), o.Spec.Replicas, "want a count"))
		}
		if ru := o.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge.IntValue() == 0 && ru.MaxUnavailable.IntValue() == 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "strategy"), ru, "maxSurge and maxUnavailable both 0"))
		}
		if d := o.Spec.ProgressDeadlineSeconds; d != nil && *d <= o.Spec.MinReadySeconds {
			errs = append(errs, field.Invalid(field.NewPath("spec", "progressDeadlineSeconds"), *d, "must be greater than minReadySeconds"))
		}
		podTemplate(&o.Spec.Template, o.Spec.Selector, field.NewPath("spec", "template"), corev1.RestartPolicyAlways)
	case *batchv1.Job:
		errs = append(errs, apivalidation.ValidateObjectMeta(&o.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
		if o.Spec.Selector != nil || o.Spec.BackoffLimit == nil || *o.Spec.BackoffLimit < 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec"), o.Spec, "want a generated selector and a backoffLimit >= 0"))
		}
		podTemplate(&o.Spec.Template, nil, field.NewPath("spec", "template"), corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)
	case *corev1.Service:
		errs = append(errs, apivalidation.ValidateObjectMeta(&o.ObjectMeta, false, apivalidation.NameIsDNS1035Label, field.NewPath("metadata"))...)
		errs = append(errs, metav1validation.ValidateLabels(o.Spec.Selector, field.NewPath("spec", "selector"))...)
		if len(o.Spec.Selector) == 0 || len(o.Spec.Ports) == 0 {
			errs = append(errs, field.Required(field.NewPath("spec"), "selector and ports"))
		}
		for i, p := range o.Spec.Ports {
			path := field.NewPath("spec", "ports").Index(i)
			for _, m := range validation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(path.Child("name"), p.Name, m))
			}
			for _, m := range validation.IsValidPortNum(int(p.Port)) {
				errs = append(errs, field.Invalid(path.Child("port"), p.Port, m))
			}
			for _, m := range validation.IsValidPortName(p.TargetPort.StrVal) {
				errs = append(errs, field.Invalid(path.Child("targetPort"), p.TargetPort, m))
			}
		}
	}
	return errs
}

func validateProbe(p *corev1.Probe, path *field.Path, liveness bool) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if h := p.HTTPGet; h != nil {
		n++
		for _, m := range validation.IsValidPortNum(h.Port.IntValue()) {
			errs = append(errs, field.Invalid(path.Child("httpGet", "port"), h.Port, m))
		}
		if !strings.HasPrefix(h.Path, "/") || h.Scheme != corev1.URISchemeHTTP {
			errs = append(errs, field.Invalid(path.Child("httpGet"), h, "want an absolute path and scheme HTTP"))
		}
	}
	if tcp := p.TCPSocket; tcp != nil {
		n++
		for _, m := range validation.IsValidPortNum(tcp.Port.IntValue()) {
			errs = append(errs, field.Invalid(path.Child("tcpSocket", "port"), tcp.Port, m))
		}
	}
	if e := p.Exec; e != nil {
		n++
		if len(e.Command) == 0 {
			errs = append(errs, field.Required(path.Child("exec", "command"), ""))
		}
	}
	if n != 1 {
		errs = append(errs, field.Invalid(path, n, "want exactly one handler"))
	}
	for name, v := range map[string]int32{"periodSeconds": p.PeriodSeconds, "timeoutSeconds": p.TimeoutSeconds, "failureThreshold": p.FailureThreshold, "successThreshold": p.SuccessThreshold} {
		if v < 1 {
			errs = append(errs, field.Invalid(path.Child(name), v, "must be at least 1"))
		}
	}
	if p.InitialDelaySeconds < 0 {
		errs = append(errs, field.Invalid(path.Child("initialDelaySeconds"), p.InitialDelaySeconds, "must not be negative"))
	}
	if liveness && p.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(path.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	return errs
}

// TestNomadDecodes decodes the exported JSON into api.Job with unknown
// fields refused, encodes it again to the same bytes (nothing lost), then
// runs Canonicalize, which must neither
// panic nor change a field the export set.
func TestNomadDecodes(t *testing.T) {
	for _, fleet := range fleets {
		t.Run(fleet, func(t *testing.T) {
			servers := loadFleet(t, fleet)
			res := export(t, Nomad, fleet)
			if len(res.Files) != 1 || res.Files[0].Name != fleet+".nomad.json" {
				t.Fatalf("files = %v, want one %s.nomad.json", res.Files, fleet)
			}
			var body struct{ Job *nomad.Job }
			dec := json.NewDecoder(bytes.NewReader(res.Files[0].Data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&body); err != nil {
				t.Fatalf("decode: %v", err)
			}
			job := body.Job
			if job == nil || len(job.TaskGroups) != len(servers) {
				t.Fatalf("job = %+v, want one group per server (%d)", job, len(servers))
			}
			// Encoded again from api.Job, the file comes back byte for
			// byte: decoding lost nothing, and the export's own types
			// write what the API's would.
			again, err := nomadAPIJSON(body.Job)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(res.Files[0].Data), string(again)); diff != "" {
				t.Errorf("encoding the decoded api.Job changed it (-exported +again):\n%s", diff)
			}

			before := deepCopyJob(t, job)
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Canonicalize panicked: %v", r)
					}
				}()
				job.Canonicalize()
			}()
			assertKept(t, "Job", reflect.ValueOf(before), reflect.ValueOf(job))
			if job.Region == nil || *job.Region == "" {
				t.Errorf("Canonicalize did not fill the region; did it run?")
			}
			for _, g := range job.TaskGroups {
				s := server(t, servers, *g.Name)
				task := g.Tasks[0]
				if task.Driver != "raw_exec" || !filepath.IsAbs(task.Config["command"].(string)) && !strings.Contains(fmt.Sprint(res.Warnings), s.Metadata.Name+": spec.command[0]") {
					t.Errorf("%s: task %+v: want raw_exec with an absolute command (or a warning)", s.Metadata.Name, task)
				}
				if got, want := *task.KillTimeout, s.Spec.TerminationGracePeriod(); got != want {
					t.Errorf("%s: kill_timeout = %v, want %v", s.Metadata.Name, got, want)
				}
				if p := s.Spec.EffectiveReadiness(); p != nil {
					if len(task.Services) != 1 || task.Services[0].Checks[0].Name != "ready" || task.Services[0].Checks[0].Interval != p.Period() {
						t.Errorf("%s: services = %+v, want a ready check every %v", s.Metadata.Name, task.Services, p.Period())
					}
				}
			}
		})
	}
}

func deepCopyJob(t *testing.T, j *nomad.Job) *nomad.Job {
	t.Helper()
	data, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var out nomad.Job
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// assertKept fails for every value set in before (non-nil pointer, non-zero
// scalar, map entry, slice element) that differs in after.
func assertKept(t *testing.T, path string, before, after reflect.Value) {
	t.Helper()
	switch before.Kind() {
	case reflect.Pointer, reflect.Interface:
		if before.IsNil() {
			return
		}
		if after.IsNil() {
			t.Errorf("%s: was set, Canonicalize cleared it", path)
			return
		}
		assertKept(t, path, before.Elem(), after.Elem())
	case reflect.Struct:
		for i := 0; i < before.NumField(); i++ {
			if before.Type().Field(i).IsExported() {
				assertKept(t, path+"."+before.Type().Field(i).Name, before.Field(i), after.Field(i))
			}
		}
	case reflect.Slice:
		if before.Len() > 0 && after.Len() != before.Len() {
			t.Errorf("%s: %d elements, %d after Canonicalize", path, before.Len(), after.Len())
			return
		}
		for i := 0; i < before.Len(); i++ {
			assertKept(t, fmt.Sprintf("%s[%d]", path, i), before.Index(i), after.Index(i))
		}
	case reflect.Map:
		iter := before.MapRange()
		for iter.Next() {
			v := after.MapIndex(iter.Key())
			if !v.IsValid() {
				t.Errorf("%s[%v]: removed by Canonicalize", path, iter.Key())
				continue
			}
			assertKept(t, fmt.Sprintf("%s[%v]", path, iter.Key()), iter.Value(), v)
		}
	default:
		if !before.IsZero() && !reflect.DeepEqual(before.Interface(), after.Interface()) {
			t.Errorf("%s: %v, Canonicalize changed it to %v", path, before.Interface(), after.Interface())
		}
	}
}

// TestSystemdAnalyzeVerify runs `systemd-analyze verify` over the units of
// each fleet. verify checks that executables exist, so the fleet is moved
// into a temporary folder where every command is a small script.
func TestSystemdAnalyzeVerify(t *testing.T) {
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not found on this machine; the units are not verified")
	}
	verify := func(t *testing.T, units string, paths []string) ([]byte, error) {
		t.Helper()
		cmd := exec.Command(tool, append([]string{"verify", "--man=no"}, paths...)...)
		// The units' folder first, so the target finds its services; the
		// trailing ":" keeps the default search path after it.
		cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+units+":", "SYSTEMD_LOG_COLOR=0")
		return cmd.CombinedOutput()
	}
	t.Run("control", func(t *testing.T) {
		// The tool must see what is wrong with a bad unit, or its silence
		// below proves nothing.
		dir := t.TempDir()
		p := filepath.Join(dir, "bad.service")
		if err := os.WriteFile(p, []byte("[Service]\nType=exec\nExecStart=/bin/sh \"a\nBogus=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := verify(t, dir, []string{p}); err == nil && len(bytes.TrimSpace(out)) == 0 {
			t.Fatalf("systemd-analyze verify accepted a broken unit silently")
		}
	})
	for _, fleet := range fleets {
		t.Run(fleet, func(t *testing.T) {
			// A space and a "%" in every path: verify resolves the
			// executables, so it reads them through systemd's own parser.
			root := filepath.Join(t.TempDir(), "my fleet 100%")
			servers := loadFleet(t, fleet)
			for i := range servers {
				s := &servers[i]
				s.Spec.WorkingDir = filepath.Join(root, "srv", strings.TrimPrefix(s.Spec.WorkingDir, "/"))
				exe := s.Spec.Command[0]
				switch {
				case filepath.IsAbs(exe):
					exe = filepath.Join(root, "bin", s.Metadata.Name)
					s.Spec.Command[0] = exe
				case strings.Contains(exe, "/"):
					exe = filepath.Join(s.Spec.WorkingDir, exe)
				default:
					continue // found in systemd's search path (sh)
				}
				if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			res, err := Export(Systemd, servers, fleetOptions(fleet))
			if err != nil {
				t.Fatal(err)
			}
			units := filepath.Join(root, "units")
			if err := os.Mkdir(units, 0o755); err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, f := range res.Files {
				p := filepath.Join(units, f.Name)
				if err := os.WriteFile(p, f.Data, 0o644); err != nil {
					t.Fatal(err)
				}
				paths = append(paths, p)
			}
			out, err := verify(t, units, paths)
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("systemd-analyze verify: %v\n%s", err, out)
			}
		})
	}
}

// TestSystemdExecArg checks the escaping of hostile argv elements; decoded
// with a model of systemd's ExecStart parsing, each must come back intact.
func TestSystemdExecArg(t *testing.T) {
	tests := []struct {
		in, want string
		err      bool
	}{
		{in: "plain", want: "plain"},
		{in: "--port=8080", want: "--port=8080"},
		{in: "/usr/bin/x", want: "/usr/bin/x"},
		{in: "", want: `""`},
		{in: "two words", want: `"two words"`},
		{in: "it's", want: `"it's"`},
		{in: `say "hi"`, want: `"say \"hi\""`},
		{in: "100%", want: "100%%"},
		{in: "%n", want: "%%n"},
		{in: "$HOME", want: "$$HOME"},
		{in: "${HOME}", want: `"$${HOME}"`},
		{in: `a\b`, want: `"a\\b"`},
		{in: `a\nb`, want: `"a\\nb"`},
		{in: `\"`, want: `"\\\""`},
		{in: ";", want: `";"`},
		{in: "-", want: "-"},
		{in: "héllo wörld", want: `"héllo wörld"`},
		{in: `it's 100% "fine" $USER\`, want: `"it's 100%% \"fine\" $$USER\\"`},
		{in: "line\nbreak", err: true},
		{in: "cr\r", err: true},
		{in: "tab\there", err: true},
		{in: "nul\x00", err: true},
		{in: "del\x7f", err: true},
		{in: "\xff\xfe", err: true},
	}
	for _, tt := range tests {
		got, err := SystemdExecArg(tt.in)
		if tt.err {
			if err == nil {
				t.Errorf("SystemdExecArg(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("SystemdExecArg(%q) = %q, %v; want %s", tt.in, got, err, tt.want)
			continue
		}
		if back := unescapeExecWord(t, got); back != tt.in {
			t.Errorf("SystemdExecArg(%q) = %s reads back as %q", tt.in, got, back)
		}
	}
	if _, err := SystemdExecPath("/opt/$x/bin"); err == nil {
		t.Error("SystemdExecPath accepted a path with $")
	}
	if got, err := SystemdExecPath("/opt/my app/bin"); err != nil || got != `"/opt/my app/bin"` {
		t.Errorf("SystemdExecPath = %q, %v", got, err)
	}
}

func TestSystemdEnvironment(t *testing.T) {
	tests := []struct {
		name, value, want string
		err               bool
	}{
		{name: "A", value: "b", want: `"A=b"`},
		{name: "A", value: "", want: `"A="`},
		{name: "A", value: `x "y" \z 50% $HOME`, want: `"A=x \"y\" \\z 50%% $HOME"`},
		{name: "A", value: "two\nlines", err: true},
		{name: "A.B", value: "x", err: true},
		{name: "1A", value: "x", err: true},
	}
	for _, tt := range tests {
		got, err := SystemdEnvironment(tt.name, tt.value)
		if tt.err {
			if err == nil {
				t.Errorf("SystemdEnvironment(%q, %q) = %q, want an error", tt.name, tt.value, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("SystemdEnvironment(%q, %q) = %q, %v; want %s", tt.name, tt.value, got, err, tt.want)
		}
	}
}

// unescapeExecWord models systemd's reading of one ExecStart word
// (specifiers, quotes, C escapes, then $ substitution with "$$" as "$"),
// enough to check the escaping; it is not systemd's parser.
func unescapeExecWord(t *testing.T, w string) string {
	t.Helper()
	w = strings.ReplaceAll(w, "%%", "\x00pct")
	if strings.Contains(w, "%") {
		t.Fatalf("%q: a lone %% would be a specifier", w)
	}
	w = strings.ReplaceAll(w, "\x00pct", "%")
	if strings.HasPrefix(w, `"`) {
		if !strings.HasSuffix(w, `"`) || len(w) < 2 {
			t.Fatalf("%q: unbalanced quotes", w)
		}
		var b strings.Builder
		in := w[1 : len(w)-1]
		for i := 0; i < len(in); i++ {
			switch c := in[i]; c {
			case '\\':
				i++
				if i == len(in) || (in[i] != '\\' && in[i] != '"') {
					t.Fatalf("%q: unexpected escape", w)
				}
				b.WriteByte(in[i])
			case '"':
				t.Fatalf("%q: unescaped quote inside", w)
			default:
				b.WriteByte(c)
			}
		}
		w = b.String()
	} else if strings.ContainsAny(w, " \t\"'\\") || w == ";" {
		t.Fatalf("%q: special characters outside quotes", w)
	}
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		if w[i] == '$' {
			if i+1 < len(w) && w[i+1] == '$' {
				b.WriteByte('$')
				i++
				continue
			}
			t.Fatalf("%q: a lone $ would be substituted", w)
		}
		b.WriteByte(w[i])
	}
	return b.String()
}

// TestK8sEscape: Kubernetes expands $(VAR) in command, args and env values;
// a model of its expansion (every reference resolvable) must give back the
// original string.
func TestK8sEscape(t *testing.T) {
	for _, s := range []string{"plain", "$HOME", "$(HOME)", "$$(HOME)", "a$$b", "$", "end$", "$(", "$(unclosed", "${X}", "$$$"} {
		if got := expandK8s(k8sEscape(s)); got != s {
			t.Errorf("k8sEscape(%q) = %q, expands to %q", s, k8sEscape(s), got)
		}
	}
	if k8sEscape("$HOME") != "$HOME" {
		t.Errorf("k8sEscape changed a string expansion cannot touch")
	}
}

// expandK8s models k8s.io/kubernetes third_party/forked/golang/expansion
// with a mapping that resolves every name to "<NAME>".
func expandK8s(in string) string {
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		if in[i] != '$' || i+1 == len(in) {
			b.WriteByte(in[i])
			continue
		}
		switch in[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(in[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			b.WriteString("<" + in[i+2:i+2+end] + ">")
			i += 2 + end
		default:
			b.WriteByte('$')
			b.WriteByte(in[i+1])
			i++
		}
	}
	return b.String()
}

// FuzzSystemdExecArg: whatever the argument, SystemdExecArg either refuses
// it or escapes it so that systemd reads it back unchanged (per the model in
// unescapeExecWord).
func FuzzSystemdExecArg(f *testing.F) {
	for _, s := range []string{"", "a b", `"'\;`, "%%$$", "${x}", "\n", "é", `\\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := SystemdExecArg(s)
		if err != nil {
			return
		}
		if back := unescapeExecWord(t, got); back != s {
			t.Fatalf("SystemdExecArg(%q) = %s reads back as %q", s, got, back)
		}
	})
}
