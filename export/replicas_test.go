package export

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestReplicasEnvFilesMinReady checks the mappings of replicas, envFile,
// $(NAME) and minReadySeconds in each engine (issues 15, 16, 19), beyond
// the golden files: what a reader of those would have to verify by eye.
func TestReplicasEnvFilesMinReady(t *testing.T) {
	t.Run("kubernetes", func(t *testing.T) {
		res := export(t, Kubernetes, "replicas")
		deploys := map[string]*appsv1.Deployment{}
		for _, f := range res.Files {
			doc, _, _ := strings.Cut(string(f.Data), "---\n")
			var d appsv1.Deployment
			if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			deploys[d.Name] = &d
		}
		api := deploys["api"]
		if *api.Spec.Replicas != 3 || api.Spec.MinReadySeconds != 5 || api.Spec.Strategy.RollingUpdate == nil ||
			api.Spec.Strategy.RollingUpdate.MaxSurge.IntValue() != 0 || api.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 1 {
			t.Errorf("api Deployment: replicas %d, minReadySeconds %d, strategy %+v; want 3, 5, rolling one at a time", *api.Spec.Replicas, api.Spec.MinReadySeconds, api.Spec.Strategy)
		}
		c := api.Spec.Template.Spec.Containers[0]
		env := map[string]string{}
		for i, e := range c.Env {
			env[e.Name] = e.Value
			if i == 0 && e.Name != "PORT" {
				t.Errorf("first env = %s, want PORT (so every later value may refer to it)", e.Name)
			}
		}
		if env["PORT"] != "9100" || env["LOG_LEVEL"] != "debug" || env["TOKEN"] != "not so secret" || env["SELF_URL"] != "http://127.0.0.1:9100/" {
			t.Errorf("api env = %v: want PORT, the env file's TOKEN, LOG_LEVEL overridden by env, SELF_URL expanded", env)
		}
		if got := strings.Join(c.Args, " "); got != "--listen 127.0.0.1:9100 --id $$(PROCFLEET_REPLICA) --db postgres://127.0.0.1:5432/app" {
			t.Errorf("api args = %q", got)
		}
		if d := deploys["db"]; d.Spec.MinReadySeconds != 2 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("db: minReadySeconds %d, strategy %s", d.Spec.MinReadySeconds, d.Spec.Strategy.Type)
		}
		if d := deploys["scaled-down"]; *d.Spec.Replicas != 0 || d.Spec.MinReadySeconds != 1 {
			t.Errorf("scaled-down: replicas %d, minReadySeconds %d; want 0 and the running default 1", *d.Spec.Replicas, d.Spec.MinReadySeconds)
		}
	})
	t.Run("systemd", func(t *testing.T) {
		res := export(t, Systemd, "replicas")
		files := map[string]string{}
		for _, f := range res.Files {
			files[f.Name] = string(f.Data)
		}
		api := files["replicas-api@.service"]
		for _, want := range []string{"EnvironmentFile=/srv/replicas/.env\n", "Environment=PORT=%i\n", `Environment="SELF_URL=http://127.0.0.1:%i/"`, `--listen "127.0.0.1:%i"`} {
			if !strings.Contains(api, want) {
				t.Errorf("api template lacks %q:\n%s", want, api)
			}
		}
		if strings.Contains(api, "TOKEN") {
			t.Errorf("the env file's variables are copied into the unit:\n%s", api)
		}
		if !strings.Contains(files["replicas.target"], "Wants=replicas-api@9100.service replicas-api@9101.service replicas-api@9102.service replicas-db.service replicas-worker@0.service replicas-worker@1.service\n") {
			t.Errorf("target:\n%s", files["replicas.target"])
		}
		if !strings.Contains(files["replicas-worker@.service"], "Environment=PROCFLEET_REPLICA=%i\n") {
			t.Errorf("worker template without a port does not take the index from %%i:\n%s", files["replicas-worker@.service"])
		}
	})
	t.Run("nomad", func(t *testing.T) {
		res := export(t, Nomad, "replicas")
		var body struct{ Job *nomad.Job }
		if err := json.NewDecoder(bytes.NewReader(res.Files[0].Data)).Decode(&body); err != nil {
			t.Fatal(err)
		}
		groups := map[string]*nomad.TaskGroup{}
		for _, g := range body.Job.TaskGroups {
			groups[*g.Name] = g
		}
		api := groups["api"]
		task := api.Tasks[0]
		if *api.Count != 3 || len(api.Networks[0].DynamicPorts) != 1 || api.Networks[0].DynamicPorts[0].Label != "main" || *api.Update.MinHealthyTime != 5*time.Second {
			t.Errorf("api group: count %d, networks %+v, min_healthy_time %v", *api.Count, api.Networks[0], *api.Update.MinHealthyTime)
		}
		if task.Env["PORT"] != "${NOMAD_PORT_main}" || task.Env["PROCFLEET_REPLICA"] != "${NOMAD_ALLOC_INDEX}" || task.Env["SELF_URL"] != "http://127.0.0.1:${NOMAD_PORT_main}/" || task.Env["TOKEN"] != "not so secret" {
			t.Errorf("api env = %v", task.Env)
		}
		if args := task.Config["args"].([]any); args[1] != "127.0.0.1:${NOMAD_PORT_main}" || args[3] != "${NOMAD_ALLOC_INDEX}" {
			t.Errorf("api args = %v", args)
		}
		checks := task.Services[0].Checks
		if checks[0].PortLabel != "main" || checks[1].PortLabel != "probe_9200" {
			t.Errorf("api checks on %s and %s; want the allocation's port, and 9200 as written", checks[0].PortLabel, checks[1].PortLabel)
		}
		if w := groups["worker"].Tasks[0]; w.Env["QUEUE"] != "jobs-${NOMAD_ALLOC_INDEX}" || *groups["worker"].Count != 2 {
			t.Errorf("worker: env %v, count %d", w.Env, *groups["worker"].Count)
		}
		if *groups["db"].Update.MinHealthyTime != 2*time.Second || *groups["scaled-down"].Count != 0 {
			t.Errorf("db min_healthy_time %v, scaled-down count %d", *groups["db"].Update.MinHealthyTime, *groups["scaled-down"].Count)
		}
	})
}
