package docker_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The compose file runs the servers with the stack's own settings files
// (deploy/local), mounted, not copied: a setting changed for the stack is
// changed for a user with Docker. These tests check what is not started
// here (no registry is reachable, and the Galera profile's images are
// public ones): its mounts, the Galera nodes' start-up script run with a
// stand-in for the image's entrypoint, and HAProxy's own check of the
// shared configuration with the compose file's environment. The system
// profile is started, on images built here: system_test.go.

type service struct {
	Image       string            `yaml:"image"`
	Profiles    []string          `yaml:"profiles"`
	Volumes     []string          `yaml:"volumes"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
}

func compose(t *testing.T) (map[string]service, string) {
	t.Helper()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Services map[string]service `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return file.Services, string(raw)
}

// portDefault is NAME_DEFAULT from deploy/local/ports.
func portDefault(t *testing.T, name string) int {
	t.Helper()
	raw, err := os.ReadFile("../local/ports")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `_DEFAULT=(\d+)$`).FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatalf("deploy/local/ports has no %s_DEFAULT", name)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func TestComposeMountsTheStacksSettingsFiles(t *testing.T) {
	services, raw := compose(t)
	want := map[string][]string{
		"galera-1":     {"./local/galera-node.cnf:/etc/mysql/conf.d/galera-node.cnf:ro", "./local/galera-users.sql:/docker-entrypoint-initdb.d/galera-users.sql:ro"},
		"galera-2":     {"./local/galera-node.cnf:/etc/mysql/conf.d/galera-node.cnf:ro", "./local/galera-users.sql:/docker-entrypoint-initdb.d/galera-users.sql:ro"},
		"galera-3":     {"./local/galera-node.cnf:/etc/mysql/conf.d/galera-node.cnf:ro", "./local/galera-users.sql:/docker-entrypoint-initdb.d/galera-users.sql:ro"},
		"galera-proxy": {"./local/galera-haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro", "./local/galera-check.sh:/galera-check.sh:ro"},
	}
	for n := 1; n <= 6; n++ {
		want["redis-cluster-"+strconv.Itoa(n)] = []string{"./local/redis-cluster-node.conf:/node.conf:ro"}
	}
	for name, mounts := range want {
		s, ok := services[name]
		if !ok {
			t.Errorf("no service %s", name)
			continue
		}
		for _, m := range mounts {
			if !strings.Contains(strings.Join(s.Volumes, "\n"), m) {
				t.Errorf("service %s does not mount %s (it mounts %v)", name, m, s.Volumes)
			}
			if host := strings.SplitN(m, ":", 2)[0]; !exists(filepath.Join("..", host)) {
				t.Errorf("service %s mounts %s, which is not in deploy/", name, host)
			}
		}
		if strings.HasPrefix(name, "galera") && !(len(s.Profiles) == 1 && s.Profiles[0] == "galera") {
			t.Errorf("service %s is in profiles %v; want the galera profile only", name, s.Profiles)
		}
	}
	// What the settings files hold is not written out again here.
	for _, setting := range []string{"gcache.size", "pc.recovery", "evs.suspect_timeout", "observe layer4", "shutdown-backup-sessions", "wsrep_slave_threads", "cluster-node-timeout"} {
		if strings.Contains(raw, setting) {
			t.Errorf("docker-compose.yml repeats %q, a setting of deploy/local's files", setting)
		}
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// Each Galera node's start-up script, run with a stand-in for the image's
// docker-entrypoint.sh: node n on the stack's ports (deploy/local/ports),
// the provider options its addresses and then those of galera-node.cnf,
// node 1 alone making a new cluster, and only on its first start.
func TestComposeGaleraNodesStartAsTheStacksNodes(t *testing.T) {
	services, _ := compose(t)
	cnf, err := filepath.Abs("../local/galera-node.cnf")
	if err != nil {
		t.Fatal(err)
	}
	shared := regexp.MustCompile(`(?m)^wsrep_provider_options="(.*)"$`).FindStringSubmatch(read(t, cnf))
	if shared == nil {
		t.Fatal("galera-node.cnf has no wsrep_provider_options")
	}
	bin := t.TempDir()
	stub := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n"
	if err := os.WriteFile(filepath.Join(bin, "docker-entrypoint.sh"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	proxy, gcommBase := portDefault(t, "MYSQL_CLUSTER_PORT"), portDefault(t, "MYSQL_CLUSTER_GCOMM_PORT")
	for n := 1; n <= 3; n++ {
		for _, restart := range []bool{false, true} {
			s := services["galera-"+strconv.Itoa(n)]
			if len(s.Entrypoint) != 4 || s.Entrypoint[0] != "bash" || s.Entrypoint[1] != "-c" || len(s.Command) != 1 || s.Command[0] != strconv.Itoa(n) {
				t.Fatalf("galera-%d: entrypoint %q command %q; want bash -c SCRIPT NAME and the node's number", n, s.Entrypoint, s.Command)
			}
			datadir := t.TempDir()
			if restart {
				if err := os.WriteFile(filepath.Join(datadir, "grastate.dat"), []byte("seqno: 7\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// Compose's $$ is a $ to the shell; a lone $ is compose's own,
			// filled from the host's environment before the shell sees it.
			if lone := strings.ReplaceAll(s.Entrypoint[2], "$$", ""); strings.Contains(lone, "$") {
				t.Fatalf("galera-%d's start-up script has a $ that is not $$: compose would fill it from the host's environment", n)
			}
			script := strings.ReplaceAll(s.Entrypoint[2], "$$", "$")
			script = strings.ReplaceAll(script, "/etc/mysql/conf.d/galera-node.cnf", cnf)
			script = strings.ReplaceAll(script, "/var/lib/mysql/", datadir+"/")
			cmd := exec.Command("bash", "-c", script, s.Entrypoint[3], s.Command[0])
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("galera-%d's start-up script: %v\n%s", n, err, out)
			}
			args := strings.Split(strings.TrimSpace(string(out)), "\n")
			gcomm := gcommBase + 10*(n-1)
			want := []string{
				"mariadbd",
				"--port=" + strconv.Itoa(proxy+n),
				"--bind-address=127.0.0.1",
				"--wsrep-cluster-address=gcomm://127.0.0.1:" + strconv.Itoa(gcommBase) + ",127.0.0.1:" + strconv.Itoa(gcommBase+10) + ",127.0.0.1:" + strconv.Itoa(gcommBase+20),
				"--wsrep-node-address=127.0.0.1:" + strconv.Itoa(gcomm),
				"--wsrep-node-incoming-address=127.0.0.1:" + strconv.Itoa(proxy+n),
				"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:" + strconv.Itoa(gcomm) + ";ist.recv_addr=127.0.0.1:" + strconv.Itoa(gcomm+1) + ";" + shared[1],
				"--wsrep-sst-receive-address=127.0.0.1:" + strconv.Itoa(gcomm+2),
				"--gtid-domain-id=" + strconv.Itoa(100+n),
			}
			for _, w := range want {
				if !contains(args, w) {
					t.Errorf("galera-%d (restart %v) starts with %q; want %s among its arguments", n, restart, args, w)
				}
			}
			if bootstrap := contains(args, "--wsrep-new-cluster"); bootstrap != (n == 1 && !restart) {
				t.Errorf("galera-%d (restart %v): --wsrep-new-cluster %v; want it on node 1's first start only", n, restart, bootstrap)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func read(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// HAProxy reads the stack's configuration with the compose service's
// environment in for its names, and finds it valid; the stack puts its
// own values in the same names (mcluster_proxy_up, stack-mariadb.sh).
func TestComposeGaleraProxyConfigurationIsValid(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Fatal("haproxy is not installed: deploy/local/stack.sh install (Debian's haproxy package)")
	}
	services, _ := compose(t)
	s := services["galera-proxy"]
	names := regexp.MustCompile(`\$\{([A-Z0-9_]+)\}`).FindAllStringSubmatch(read(t, "../local/galera-haproxy.cfg"), -1)
	if len(names) == 0 {
		t.Fatal("galera-haproxy.cfg names no value")
	}
	env := os.Environ()
	for _, m := range names {
		v, ok := s.Environment[m[1]]
		if !ok {
			t.Errorf("galera-haproxy.cfg names %s, which the galera-proxy service does not set", m[1])
		}
		env = append(env, m[1]+"="+v)
	}
	if want := strconv.Itoa(portDefault(t, "MYSQL_CLUSTER_PORT")); s.Environment["GALERA_PROXY_PORT"] != want {
		t.Errorf("galera-proxy listens on %s; the stack's HAProxy on %s", s.Environment["GALERA_PROXY_PORT"], want)
	}
	cmd := exec.Command("haproxy", "-c", "-f", "../local/galera-haproxy.cfg")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c with the galera-proxy service's environment: %v\n%s", err, out)
	}
}

// The cluster's users are stack.sh's names and passwords.
func TestGaleraUsersAreTheStacksUsers(t *testing.T) {
	stack, users := read(t, "../local/stack.sh"), read(t, "../local/galera-users.sql")
	value := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindStringSubmatch(stack)
		if m == nil {
			t.Fatalf("stack.sh has no %s", name)
		}
		return m[1]
	}
	for _, u := range [][2]string{{"MYSQL_APP_USER", "MYSQL_APP_PASSWORD"}, {"MYSQL_CANAL_USER", "MYSQL_CANAL_PASSWORD"}, {"MYSQL_CHECK_USER", "MYSQL_CHECK_PASSWORD"}} {
		want := "'" + value(u[0]) + "'@'127.0.0.1' IDENTIFIED BY '" + value(u[1]) + "'"
		if !strings.Contains(users, want) {
			t.Errorf("galera-users.sql does not create %s", want)
		}
	}
	if db := value("MYSQL_DATABASE"); !strings.Contains(users, "CREATE DATABASE IF NOT EXISTS `"+db+"`") {
		t.Errorf("galera-users.sql does not create the database %s", db)
	}
}
