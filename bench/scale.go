package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ScaledServer is the scale scenario's one server: Replicas instances of
// the workload, instance i listening on Base+i (each peer's own way of
// numbering), each stamping <port>.stamp in StampDir.
type ScaledServer struct {
	Name     string
	Workload string
	Base     int
	StampDir string
	Replicas int
}

// ports returns the ports of instances 0..k-1.
func (s ScaledServer) ports(k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = s.Base + i
	}
	return out
}

// stamp is the stamp file of the instance on port.
func (s ScaledServer) stamp(port int) string {
	return filepath.Join(s.StampDir, strconv.Itoa(port)+".stamp")
}

// fleet describes the instances on the first k ports as a Fleet, so the
// stamp readers and the cleanup work on them.
func (s ScaledServer) fleet(k int) Fleet {
	f := Fleet{Workload: s.Workload}
	for _, p := range s.ports(k) {
		f.Servers = append(f.Servers, ServerDef{Name: strconv.Itoa(p), Port: p, Stamp: s.stamp(p), Gen: 1})
	}
	return f
}

// scaleTest: one server at from instances; edited to to instances, until
// all answer /health; then back to from, until exactly from of the
// instances run and listen.
func (r *runner) scaleTest(ctx context.Context, pm peerMaker) {
	from, to := r.scale[0], r.scale[1]
	specs := r.rows.forScenario(scScale)
	dir, err := r.peerDir(pm.name, "scale")
	if err != nil {
		r.record(specs, pm.name, nil, err)
		return
	}
	p := pm.make(dir)
	sc, ok := p.(scaler)
	if !ok {
		r.record(specs, pm.name, nil, &unsupportedError{what: "the bench cannot scale " + pm.name})
		return
	}
	s := ScaledServer{Name: "w", Workload: r.workload, Base: r.scalePorts[0], StampDir: filepath.Join(dir, "stamps"), Replicas: from}
	all := s.fleet(to)
	if err := r.portsFree(ctx, all.Ports()); err != nil {
		r.record(specs, pm.name, nil, err)
		return
	}
	defer r.closePeer(p, all)

	lctx, cancel := withLimit(ctx, coldLimit(from), fmt.Sprintf("the start of %d instances", from))
	err = sc.StartScaled(lctx, s)
	if err == nil {
		_, err = waitAllHealth(lctx, r.client, s.ports(from), p.Err)
	}
	if err == nil {
		// Settled: exactly the instances wanted run (PM2's increment_var
		// can give two instances one port at first, under load).
		_, err = waitLeft(lctx, all, from)
	}
	var before map[int]int
	if err == nil {
		before, err = healthPIDs(lctx, r.client, s.ports(from))
	}
	cancel()
	if err != nil {
		r.log.Printf("%s: scale: start %d: %v", pm.name, from, err)
		r.record(specs, pm.name, nil, err)
		return
	}

	s.Replicas = to
	lctx, cancel = withLimit(ctx, coldLimit(to), fmt.Sprintf("scaling %d → %d", from, to))
	t0 := time.Now()
	err = sc.Scale(lctx, s)
	var tUp time.Time
	if err == nil {
		tUp, err = waitAllHealth(lctx, r.client, s.ports(to), p.Err)
	}
	if err == nil {
		// A restart of a running instance may come late: watch a while.
		err = sleepUntil(lctx, time.Now().Add(editWindow))
	}
	if err == nil {
		// Everything must answer after that window, restarted or not.
		_, err = waitAllHealth(lctx, r.client, s.ports(to), p.Err)
	}
	var after map[int]int
	if err == nil {
		after, err = healthPIDs(lctx, r.client, s.ports(from))
	}
	if err != nil {
		r.log.Printf("%s: scale %d → %d: %v", pm.name, from, to, err)
		r.record(specs, pm.name, lctx, err)
		cancel()
		return
	}
	cancel()
	others := 0
	for port, pid := range before {
		if after[port] != pid {
			others++
		}
	}
	r.res.Set(r.rows.scaleUp, pm.name, tUp.Sub(t0).Seconds())
	r.res.Set(r.rows.scaleOthers, pm.name, float64(others))
	r.log.Printf("%s: scale %d → %d: all /health in %.2f s, %d of the %d running restarted", pm.name, from, to, tUp.Sub(t0).Seconds(), others, from)

	s.Replicas = from
	lctx, cancel = withLimit(ctx, stopLimit(to), fmt.Sprintf("scaling %d → %d", to, from))
	defer cancel()
	t1 := time.Now()
	err = sc.Scale(lctx, s)
	var tDown time.Time
	if err == nil {
		tDown, err = waitLeft(lctx, all, from)
	}
	if err != nil {
		r.log.Printf("%s: scale %d → %d: %v", pm.name, to, from, err)
		r.record([]RowSpec{r.rows.scaleDown}, pm.name, lctx, err)
		return
	}
	r.res.Set(r.rows.scaleDown, pm.name, tDown.Sub(t1).Seconds())
	r.log.Printf("%s: scale %d → %d: the others gone in %.2f s", pm.name, to, from, tDown.Sub(t1).Seconds())
}

// healthPIDs asks each port's /health which pid answers: a running
// instance is the same one as long as the same pid answers on its port
// (stamps would also count a duplicate that failed to bind).
func healthPIDs(ctx context.Context, c *http.Client, ports []int) (map[int]int, error) {
	out := map[int]int{}
	for _, p := range ports {
		body, ok := getHealth(ctx, c, p)
		f := strings.Fields(body)
		if !ok || len(f) < 2 || f[0] != "pid" {
			return nil, fmt.Errorf("ask port %d which pid answers: no /health answer (%q)", p, body)
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("ask port %d which pid answers: %q", p, body)
		}
		out[p] = pid
	}
	return out, nil
}

// floorScale: the bench starting the instances a scale-up adds, and
// stopping them again.
func (r *runner) floorScale(ctx context.Context) {
	from, to := r.scale[0], r.scale[1]
	dir, err := r.peerDir(peerFloor, "scale")
	var start, stop time.Duration
	if err == nil {
		start, stop, err = r.floorStartStop(ctx, filepath.Join(dir, "stamps"), r.scalePorts[from:to])
	}
	if start > 0 {
		r.res.Set(r.rows.scaleUp, peerFloor, start.Seconds())
	}
	if stop > 0 {
		r.res.Set(r.rows.scaleDown, peerFloor, stop.Seconds())
	}
	if err != nil {
		r.log.Printf("floor: scale: %v", err)
		r.record([]RowSpec{r.rows.scaleUp, r.rows.scaleDown}, peerFloor, nil, err)
		return
	}
	r.log.Printf("floor: start %d more → all /health in %.2f s; stop them in %.2f s", to-from, start.Seconds(), stop.Seconds())
}

// replicaNames reads `procfleet status -o json` and returns, for each
// entry, its name and the server it is an instance of ("" for none).
func replicaNames(out []byte) (map[string]string, error) {
	var st struct {
		Servers []struct {
			Name      string `json:"name"`
			ReplicaOf string `json:"replicaOf"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, fmt.Errorf("parse procfleet status: %w", err)
	}
	m := map[string]string{}
	for _, s := range st.Servers {
		m[s.Name] = s.ReplicaOf
	}
	return m, nil
}

// replicasHonoured reports whether a status of server name declared with
// k replicas lists its k instances (name-0 ... name-<k-1>, each replicaOf
// name) and no plain entry name; if not, it says what it lists instead.
func replicasHonoured(status map[string]string, name string, k int) (bool, string) {
	if _, ok := status[name]; ok {
		return false, fmt.Sprintf("status lists %q as one server, not its %d instances", name, k)
	}
	for i := range k {
		inst := name + "-" + strconv.Itoa(i)
		of, ok := status[inst]
		if !ok {
			return false, fmt.Sprintf("status does not list instance %q", inst)
		}
		if of != name {
			return false, fmt.Sprintf("status lists %q with replicaOf %q, want %q", inst, of, name)
		}
	}
	return true, ""
}
