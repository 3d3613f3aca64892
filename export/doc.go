// Package export translates a procfleet fleet into the files another engine
// runs: Kubernetes manifests, a Nomad job, or systemd units. It is pure: it
// takes spec.Server values and returns file contents and warnings; writing
// them is the caller's business.
//
// Guarantees:
//   - Output is built from each engine's own API types where a Go library
//     offers them (k8s.io/api apps/v1, batch/v1 and core/v1 serialised with
//     sigs.k8s.io/yaml; github.com/hashicorp/nomad/api serialised as the JSON
//     the Nomad HTTP API accepts, {"Job": {...}}). systemd has no such
//     library; units are written here, every argv element and environment
//     value escaped for systemd's own parser (quotes, backslashes, "%" as
//     "%%", "$" as "$$" in ExecStart).
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
// Choices made where the engines differ from procfleet:
//   - Kubernetes: restartPolicy Always becomes a Deployment (replicas 1,
//     strategy Recreate: never two instances, like procfleet's replace);
//     OnFailure and Never become a batch/v1 Job, whose pod restartPolicy
//     is exactly that (a Deployment only allows Always). dependsOn becomes
//     an init container that waits until the dependency's Service accepts
//     TCP (busybox nc; a Service routes only to Ready pods, so this waits for
//     Ready). startupTimeoutSeconds becomes progressDeadlineSeconds.
//   - Nomad: one service job, one group per server, driver raw_exec (the
//     same host, user and binaries as procfleet), static ports, services
//     registered with Nomad's own provider unless an exec probe needs a
//     Consul script check.
//   - systemd: one <fleet>-<server>.service per server (Type=exec,
//     KillMode=control-group, PartOf the target) and <fleet>.target that
//     wants them all.
//
// The package imports spec only; it reads no files and runs nothing.
package export
