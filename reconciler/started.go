package reconciler

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/spec"
)

// startedDir is the folder of the state folder that keeps, beside each
// record, what the server's process runs with (started/<name>.json).
const startedDir = "started"

// startedVersion is the version of the files of started/.
const startedVersion = 1

// StartedWith is what a server's process runs with: the instance as the
// fleet in force declared it when it started (or when a later fleet
// changed it without a restart), kept beside its record so that `diff`
// can say, without a running up, which fields a change to the files
// touches. It never holds the value of a variable: the env section keeps,
// for each variable that envFile and env set (the ones the spec hash
// covers), its name and an HMAC-SHA256 of its value keyed with Salt, a
// random key of this file, so equal values of two servers look different
// and a value cannot be looked up in a table; values that can be guessed
// (a port, "debug") can be guessed from it by anyone who can read the file,
// who is the user the env files belong to, since started/ is in the 0700
// state folder and each file is 0600.
type StartedWith struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	// PID and SpecHash are the record's: the file speaks for that process
	// only; one that names another pid or hash is not read.
	PID      int    `json:"pid"`
	SpecHash string `json:"specHash"`
	Salt     string `json:"salt"`
	// Server is the declaration in force: metadata and spec as written,
	// with spec.env replaced by the hashed variables and spec.envFile
	// kept as written.
	Server spec.Server `json:"server"`
	// The instance as resolved: command and args after $(NAME) expansion
	// (as the record's command line shows them), working folder, port,
	// replica, the probes with their ports resolved, minReadySeconds.
	Command    []string      `json:"command"`
	Args       []string      `json:"args,omitempty"`
	WorkingDir string        `json:"workingDir,omitempty"`
	Port       int           `json:"port,omitempty"`
	ReplicaOf  string        `json:"replicaOf,omitempty"`
	Index      int           `json:"index,omitempty"`
	MinReady   time.Duration `json:"minReady,omitempty"`
	Readiness  *spec.Probe   `json:"readiness,omitempty"`
	Liveness   *spec.Probe   `json:"liveness,omitempty"`
}

// newStartedWith describes in for the process of rec, with salt (hex).
func newStartedWith(in *spec.Instance, rec actuate.Record, salt string) *StartedWith {
	sw := &StartedWith{
		Version: startedVersion, Name: in.Name, PID: rec.PID, SpecHash: rec.SpecHash, Salt: salt,
		Command: in.Command, Args: in.Args, WorkingDir: in.WorkingDir, Port: in.Port,
		ReplicaOf: in.ReplicaOf, Index: in.Index, MinReady: in.MinReady,
		Readiness: in.Readiness, Liveness: in.Liveness,
	}
	sw.Server = *hashedServer(in, salt)
	return sw
}

// hashedServer is in's server with spec.env replaced by the variables the
// spec hash covers, each value an HMAC keyed with salt, and no env files:
// resolving it gives those hashes, so two instances hashed with one salt
// compare by variable as their values would.
func hashedServer(in *spec.Instance, salt string) *spec.Server {
	var own []spec.Var
	for _, v := range in.Env {
		if v.From.Kind == spec.FromProcfleet {
			own = append(own, v)
		}
	}
	r := in.Server.Resolve(own, nil, nil)
	covered := r.Env[:len(r.Env)-len(own)]
	s := *in.Server
	s.EnvFiles, s.Source = nil, spec.Source{}
	s.Spec.Env = make([]spec.EnvVar, len(covered))
	for i, v := range covered {
		s.Spec.Env[i] = spec.EnvVar{Name: v.Name, Value: valueHash(salt, v.Value)}
	}
	return &s
}

// valueHash is the HMAC-SHA256 of value keyed with salt (hex).
func valueHash(salt, value string) string {
	key, _ := hex.DecodeString(salt)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(value))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// Instance is the instance the process runs, its variables hashed.
func (sw *StartedWith) Instance() *spec.Instance {
	return &spec.Instance{
		Name: sw.Name, Server: &sw.Server, ReplicaOf: sw.ReplicaOf, Index: sw.Index, Port: sw.Port,
		Command: sw.Command, Args: sw.Args, WorkingDir: sw.WorkingDir, Hash: sw.SpecHash,
		MinReady: sw.MinReady, Readiness: sw.Readiness, Liveness: sw.Liveness,
	}
}

// Changes lists what differs between what the process runs with and cur,
// the instance the fleet files declare now (spec.Changes: what replaces
// it, then what does not), naming changed variables without their values.
func (sw *StartedWith) Changes(cur *spec.Instance) []spec.Change {
	c := *cur
	c.Server = hashedServer(cur, sw.Salt)
	return spec.Changes(sw.Instance(), &c)
}

// For reports whether the file speaks for the process of rec.
func (sw *StartedWith) For(rec actuate.Record) bool {
	return sw != nil && sw.PID == rec.PID && sw.SpecHash == rec.SpecHash
}

// startedPath is the file of server name in the state folder at dir.
func startedPath(dir, name string) string {
	return filepath.Join(dir, startedDir, name+".json")
}

// ReadStartedWith reads what the process of rec runs with, from the state
// folder at dir. It returns nil, nil when there is no file for that
// process (none, or one about another pid or spec hash: written before a
// crash, or by an older procfleet).
func ReadStartedWith(dir string, rec actuate.Record) (*StartedWith, error) {
	data, err := readStateFile(startedPath(dir, rec.Name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var sw StartedWith
	if err := json.Unmarshal(data, &sw); err != nil {
		return nil, fmt.Errorf("read %s: %w", startedPath(dir, rec.Name), err)
	}
	if sw.Version != startedVersion || sw.Name != rec.Name || !sw.For(rec) {
		return nil, nil
	}
	return &sw, nil
}

// noteStarted makes started/<name>.json say what the tracked process of s
// runs with under d, the declaration in force (its spec hash is the
// record's): written after a start, at an adoption when the file says
// otherwise, and when a new fleet changes the server without replacing
// it. It is a help for diff, never a condition: a failure is logged once
// per run of failures, and a file left behind names another process and
// is not read.
func (r *Reconciler) noteStarted(s *server, d Desired, rec actuate.Record) {
	if r.cfg.StateDir == nil || d.Instance == nil || d.Server == nil || d.Hash != rec.SpecHash {
		return
	}
	s.startedFor = d.Server
	dir := r.cfg.StateDir.Path
	old, _ := ReadStartedWith(dir, rec)
	salt := ""
	if old != nil {
		salt = old.Salt
	} else {
		var b [16]byte
		_, _ = rand.Read(b[:])
		salt = hex.EncodeToString(b[:])
	}
	data, err := json.MarshalIndent(newStartedWith(d.Instance, rec, salt), "", "  ")
	if err == nil && old != nil {
		if cur, rerr := readStateFile(startedPath(dir, s.name)); rerr == nil && bytes.Equal(bytes.TrimSpace(cur), data) {
			return
		}
	}
	if err == nil {
		err = mkdirState(filepath.Join(dir, startedDir))
	}
	if err == nil {
		err = r.cfg.StateDir.WriteFile(startedPath(dir, s.name), append(data, '\n'), false)
	}
	if err != nil {
		r.startedFault.failed(r.log, err, "Cannot write what a server runs with (diff will name fewer fields)", "server", s.name)
		return
	}
	r.startedFault.ok(r.log, "What a server runs with is written again")
}

// forgetStarted removes started/<name>.json once the server's record is
// gone.
func (r *Reconciler) forgetStarted(s *server) {
	s.startedFor = nil
	if r.cfg.StateDir == nil {
		return
	}
	if err := r.cfg.StateDir.RemoveFile(startedPath(r.cfg.StateDir.Path, s.name)); err != nil {
		r.log.V(1).Info("Cannot remove what a server ran with", "server", s.name, "error", err.Error())
	}
}
