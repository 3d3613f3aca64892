package export

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	nomad "github.com/hashicorp/nomad/api"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The export writes its own small types in place of k8s.io/api's and
// nomad/api's (kubernetes_types.go, nomad_types.go). The tests hold its
// output to what those libraries' types would write: every manifest and
// job decodes strictly into them and, encoded again from them by the
// functions below (the export's encoders from before it had its own
// types), gives back the same bytes.

// marshalAPIObject writes a k8s.io/api object as the export writes a
// manifest: YAML without the fields an empty value of the API types adds
// (status, creationTimestamp: null, resources: {}).
func marshalAPIObject(obj any) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	pruneEmpty(m)
	return yaml.Marshal(m)
}

func pruneEmpty(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			switch k {
			case "creationTimestamp":
				if x == nil {
					delete(t, k)
					continue
				}
			case "resources":
				if m, ok := x.(map[string]any); ok && len(m) == 0 {
					delete(t, k)
					continue
				}
			}
			pruneEmpty(x)
		}
	case []any:
		for _, x := range t {
			pruneEmpty(x)
		}
	}
}

// nomadAPIJSON writes an api.Job as the export writes its job: what
// encoding/json would write, minus nil pointers, slices, maps and
// interfaces and zero values of non-pointer fields; a pointer to a zero
// value is kept. Keys sorted, two spaces of indent, a final newline.
func nomadAPIJSON(job *nomad.Job) ([]byte, error) {
	data, err := json.MarshalIndent(map[string]any{"Job": apiCompact(reflect.ValueOf(job))}, "", "  ")
	return append(data, '\n'), err
}

func apiCompact(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return apiCompact(v.Elem())
	case reflect.Struct:
		out := map[string]any{}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name := sf.Name
			if tag := sf.Tag.Get("json"); tag != "" {
				n, _, _ := strings.Cut(tag, ",")
				if n == "-" {
					continue
				}
				if n != "" {
					name = n
				}
			}
			fv := v.Field(i)
			switch fv.Kind() {
			case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map:
				if fv.IsNil() {
					continue
				}
			default:
				if fv.IsZero() {
					continue
				}
			}
			out[name] = apiCompact(fv)
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		iter := v.MapRange()
		for iter.Next() {
			out[fmt.Sprint(iter.Key().Interface())] = apiCompact(iter.Value())
		}
		return out
	case reflect.Slice, reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = apiCompact(v.Index(i))
		}
		return out
	default:
		return v.Interface()
	}
}

// TestNomadFieldsSorted: the fields of the export's Nomad types are
// declared in the order of their JSON names, so the job's keys come out
// sorted as in the golden files.
func TestNomadFieldsSorted(t *testing.T) {
	for _, v := range []any{nomadJob{}, nomadTaskGroup{}, nomadTask{}, nomadService{}, nomadCheck{}, nomadCheckRestart{}, nomadNetwork{}, nomadPort{}, nomadUpdateStrategy{}, nomadRestartPolicy{}, nomadReschedulePolicy{}} {
		typ := reflect.TypeOf(v)
		var names []string
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name == "" {
				name = typ.Field(i).Name
			}
			names = append(names, name)
		}
		if !slices.IsSorted(names) {
			t.Errorf("%s: fields %v are not in the order of their JSON names", typ.Name(), names)
		}
	}
}

// TestNomadFieldsExist: every field of the export's Nomad types is a field
// of the API's type of the same role, so a job the export writes never
// sets what Nomad does not read (TestNomadDecodes also refuses unknown
// fields, but only for the fields the test fleets set).
func TestNomadFieldsExist(t *testing.T) {
	pairs := []struct{ own, api any }{
		{nomadJob{}, nomad.Job{}},
		{nomadTaskGroup{}, nomad.TaskGroup{}},
		{nomadTask{}, nomad.Task{}},
		{nomadService{}, nomad.Service{}},
		{nomadCheck{}, nomad.ServiceCheck{}},
		{nomadCheckRestart{}, nomad.CheckRestart{}},
		{nomadNetwork{}, nomad.NetworkResource{}},
		{nomadPort{}, nomad.Port{}},
		{nomadUpdateStrategy{}, nomad.UpdateStrategy{}},
		{nomadRestartPolicy{}, nomad.RestartPolicy{}},
		{nomadReschedulePolicy{}, nomad.ReschedulePolicy{}},
	}
	for _, p := range pairs {
		own, api := reflect.TypeOf(p.own), reflect.TypeOf(p.api)
		for i := 0; i < own.NumField(); i++ {
			f := own.Field(i)
			af, ok := api.FieldByName(f.Name)
			if !ok {
				t.Errorf("%s.%s: api.%s has no such field", own.Name(), f.Name, api.Name())
				continue
			}
			if tag, _, _ := strings.Cut(af.Tag.Get("json"), ","); tag != "" && tag != f.Name {
				t.Errorf("%s.%s: api.%s writes it as %q", own.Name(), f.Name, api.Name(), tag)
			}
		}
	}
}

// jsonFields maps the JSON names of typ's fields, those of embedded
// (inline) structs included, to their tag options ("omitempty" or "").
func jsonFields(typ reflect.Type) map[string]string {
	out := map[string]string{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for n, o := range jsonFields(f.Type) {
				out[n] = o
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = opts
	}
	return out
}

// TestKubernetesFieldsMatch: every field of the export's Kubernetes types
// has the JSON name and the omitempty rule of the field of k8s.io/api's
// type that it stands for.
func TestKubernetesFieldsMatch(t *testing.T) {
	pairs := []struct{ own, api any }{
		{k8sMeta{}, metav1.ObjectMeta{}},
		{k8sDeployment{}, appsv1.Deployment{}},
		{k8sDeploymentSpec{}, appsv1.DeploymentSpec{}},
		{k8sSelector{}, metav1.LabelSelector{}},
		{k8sStrategy{}, appsv1.DeploymentStrategy{}},
		{k8sRollingUpdate{}, appsv1.RollingUpdateDeployment{}},
		{k8sJob{}, batchv1.Job{}},
		{k8sJobSpec{}, batchv1.JobSpec{}},
		{k8sService{}, corev1.Service{}},
		{k8sServiceSpec{}, corev1.ServiceSpec{}},
		{k8sServicePort{}, corev1.ServicePort{}},
		{k8sPodTemplate{}, corev1.PodTemplateSpec{}},
		{k8sPodSpec{}, corev1.PodSpec{}},
		{k8sContainer{}, corev1.Container{}},
		{k8sContainerPort{}, corev1.ContainerPort{}},
		{k8sEnvVar{}, corev1.EnvVar{}},
		{k8sProbe{}, corev1.Probe{}},
		{k8sExecAction{}, corev1.ExecAction{}},
		{k8sHTTPGet{}, corev1.HTTPGetAction{}},
		{k8sTCPSocket{}, corev1.TCPSocketAction{}},
	}
	for _, p := range pairs {
		own, api := reflect.TypeOf(p.own), reflect.TypeOf(p.api)
		apiFields := jsonFields(api)
		for name, opts := range jsonFields(own) {
			apiOpts, ok := apiFields[name]
			switch {
			case !ok:
				t.Errorf("%s: %q is not a field of %s", own.Name(), name, api)
			case strings.Contains(opts, "omitempty") != strings.Contains(apiOpts, "omitempty"):
				t.Errorf("%s.%s: options %q, %s has %q", own.Name(), name, opts, api, apiOpts)
			}
		}
	}
}
