package spec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWarnings(t *testing.T) {
	files := map[string]string{
		".env": "A=1\nURL=http://h:${PORT}/x\nREF=$(A)\nPORT=3000\nPROCFLEET_INSTANCE=forged\n",
		"a.yaml": server("api", `  args: [--home, "${HOME}", --x, $(NOPE), --y, $$(LITERAL)]
  envFile: [.env]
  port: 8080
  env:
  - {name: EARLY, value: "$(LATE)"}
  - {name: LATE, value: x}
  - {name: P, value: "${PWD}/x"}
  - {name: PORT, value: "9"}
`) + "---\n" + header + "metadata: {name: sh}\nspec:\n  command: [sh, -c, 'echo ${HOME} $(ALSO_NOPE)']\n",
	}
	f, _ := load(t, files)
	checkErrors(t, f.Warnings, []wantErr{
		{".env", 2, "URL", "values in env files are taken literally"},
		{".env", 3, "REF", "values in env files are taken literally"},
		{".env", 4, "PORT", "PORT is set by procfleet to the instance's port (spec.port of api); this line is ignored (spec.envFile[0])"},
		{".env", 5, "PROCFLEET_INSTANCE", "PROCFLEET_INSTANCE is set by procfleet; this line is ignored"},
		{"a.yaml", 7, "spec.args[1]", "${HOME} is not expanded: procfleet expands $(HOME)"},
		{"a.yaml", 7, "spec.args[3]", "$(NOPE) stays as written: no variable NOPE is set"},
		{"a.yaml", 11, "spec.env[0].value", "$(LATE) stays as written: LATE is set by spec.env[1], after this entry"},
		{"a.yaml", 13, "spec.env[2].value", "${PWD} is not expanded"},
		{"a.yaml", 14, "spec.env[3].name", "PORT is set by procfleet"},
		// sh -c: ${HOME} is the shell's; $(ALSO_NOPE) is still ours.
		{"a.yaml", 20, "spec.command[2]", "$(ALSO_NOPE) stays as written"},
	})
	in, _ := f.Instance("api")
	for _, v := range in.Env {
		if v.Name == EnvInstance {
			t.Errorf("an env file set %s", EnvInstance)
		}
	}
}

func TestProgramWarnings(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("bin/ok", 0o755)
	write("bin/x", 0o755)
	write("bin/noexec", 0o644)
	write("svc/bin/api", 0o755)
	fleet := server("ok", "") + "---\n" +
		header + "metadata: {name: missing}\nspec:\n  command: [./bin/api]\n---\n" +
		header + "metadata: {name: noexec}\nspec:\n  command: [./bin/noexec]\n---\n" +
		header + "metadata: {name: folder}\nspec:\n  command: [./bin]\n---\n" +
		header + "metadata: {name: bare}\nspec:\n  command: [no-such-program-procfleet]\n---\n" +
		header + "metadata: {name: found}\nspec:\n  command: [sh]\n---\n" +
		header + "metadata: {name: inwd}\nspec:\n  command: [./bin/api]\n  workingDir: svc\n---\n" +
		header + "metadata: {name: nowd}\nspec:\n  command: [./bin/api]\n  workingDir: gone\n---\n" +
		header + "metadata: {name: expanded}\nspec:\n  command: [$(BIN)/ok]\n  env: [{name: BIN, value: ./bin}]\n"
	if err := os.WriteFile(filepath.Join(dir, "procfleet.yaml"), []byte(fleet), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(filepath.Join(dir, "procfleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ws := f.ProgramWarnings()
	checkErrors(t, ws, []wantErr{
		{"procfleet.yaml", 12, "spec.command[0]", "program ./bin/api not found in workingDir " + dir},
		{"procfleet.yaml", 18, "spec.command[0]", "program ./bin/noexec is not executable in workingDir"},
		{"procfleet.yaml", 24, "spec.command[0]", "program ./bin is a folder"},
		{"procfleet.yaml", 30, "spec.command[0]", "program no-such-program-procfleet not found in $PATH"},
		{"procfleet.yaml", 50, "spec.workingDir", "workingDir " + filepath.Join(dir, "gone") + " does not exist"},
	})
	if !errors.Is(ws[0], fs.ErrNotExist) {
		t.Errorf("not found does not wrap fs.ErrNotExist")
	}
}
