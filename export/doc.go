// Package export translates a procfleet fleet into the files another engine
// runs: Kubernetes manifests, a Nomad job, or systemd units. It is pure: it
// takes spec.Server values and returns file contents and warnings; writing
// them is the caller's business.
//
// Guarantees:
//   - Output is what each engine's own API types write where a Go library
//     offers them: Kubernetes manifests as k8s.io/api's apps/v1, batch/v1
//     and core/v1 objects serialised with sigs.k8s.io/yaml, the Nomad job
//     as github.com/hashicorp/nomad/api's Job in the JSON the Nomad HTTP API
//     accepts, {"Job": {...}}. The package writes them from its own small
//     types with the same field names and omission rules (the libraries
//     would weigh on every command of the binary), and its tests decode
//     every output strictly into the libraries' types and encode it back
//     to the same bytes; names are checked by Kubernetes' rules, in
//     apimachinery's words. systemd has no such library; units are written
//     here, every argv element and environment value escaped for systemd's
//     own parser (quotes, backslashes, "%" as "%%", "$" as "$$" in
//     ExecStart).
//   - Every declared field is either mapped or named in a Warning (server,
//     field path, why and what was done instead); nothing is dropped
//     silently. Values left at procfleet's defaults that an engine cannot
//     express (restart backoff timing, the wait after SIGKILL) are described
//     in README-section.md rather than warned about on every server.
//   - What cannot be expressed at all is an error, not a warning: a
//     Kubernetes export without an image for some server, an argv element
//     with a control character for systemd, a name no engine accepts.
//   - Output is deterministic: servers in name order, map keys sorted, so the
//     files diff cleanly and golden tests hold.
//
// What procfleet computes is exported computed: $(NAME) in command, args
// and env values is expanded against the fleet (env files, env, PORT, and
// PROCFLEET_REPLICA/PROCFLEET_SERVER where the engine has an equivalent),
// never against procfleet's own environment; a reference left as written is
// a warning. Every engine gets PORT when the server has a port.
//
// Choices made where the engines differ from procfleet:
//   - Kubernetes: restartPolicy Always becomes a Deployment (strategy
//     Recreate: never two instances, like procfleet's replace; with
//     replicas, that many pods rolled one at a time, maxSurge 0 and
//     maxUnavailable 1, every pod on spec.port, a warning);
//     minReadySeconds (and its default) becomes the Deployment's;
//     envFile variables are written inline, before env, with a warning;
//     OnFailure and Never become a batch/v1 Job, whose pod restartPolicy
//     is exactly that (a Deployment only allows Always). dependsOn becomes
//     an init container that waits until the dependency's Service accepts
//     TCP (busybox nc; a Service routes only to Ready pods, so this waits for
//     Ready). startupTimeoutSeconds becomes progressDeadlineSeconds.
//   - Nomad: one service job, one group per server, driver raw_exec (the
//     same host, user and binaries as procfleet), static ports, services
//     registered with Nomad's own provider unless an exec probe needs a
//     Consul script check. replicas is the group's count, each allocation
//     with a dynamic port (NOMAD_PORT_main, as PORT) and its index
//     (NOMAD_ALLOC_INDEX, as PROCFLEET_REPLICA); minReadySeconds is
//     min_healthy_time; envFile variables are written inline.
//   - systemd: one <fleet>-<server>.service per server (Type=exec,
//     KillMode=control-group, PartOf the target), or a template
//     <fleet>-<server>@.service whose instance name is the replica's port
//     (its index without a port), and <fleet>.target that wants them all;
//     envFile stays a file (EnvironmentFile=); minReadySeconds is a
//     warning.
//
// The package imports spec only; it reads no files and runs nothing.
package export
