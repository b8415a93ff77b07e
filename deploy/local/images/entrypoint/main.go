// Command entrypoint starts the server of one of the test images that
// deploy/local/images.sh builds from this machine's Redis, MariaDB and
// Kafka (no registry is reachable here). It reads what the public images
// read from the environment and the command line, as far as the tests
// (internal/testsupport) and deploy/docker-compose.yml use it, then
// replaces itself with the server:
//
//	entrypoint redis [redis-server] [ARGS]    as the redis image
//	entrypoint mariadb [mariadbd] [ARGS]      as the mariadb/mysql images
//	entrypoint kafka                          as the apache/kafka image
//
// The images hold no shell, so this is Go.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: entrypoint redis|mariadb|kafka [ARGS]"))
	}
	var err error
	switch os.Args[1] {
	case "redis":
		err = redis(os.Args[2:])
	case "mariadb":
		err = mariadb(os.Args[2:])
	case "kafka":
		err = kafka()
	default:
		err = fmt.Errorf("entrypoint: no server %q (redis, mariadb, kafka)", os.Args[1])
	}
	fail(err)
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "entrypoint:", err)
		os.Exit(1)
	}
}

// redis runs redis-server with args, reachable from outside the
// container as the redis image's is: Debian's build keeps protected mode
// on, which refuses every client but loopback's.
func redis(args []string) error {
	if len(args) > 0 && args[0] == "redis-server" {
		args = args[1:]
	}
	if !slices.Contains(args, "--protected-mode") {
		args = append(args, "--protected-mode", "no")
	}
	return syscall.Exec("/usr/bin/redis-server", append([]string{"redis-server"}, args...), os.Environ())
}

// firstEnv is the first of names set in the environment.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// quote is s as an SQL string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// mariadbData is the data directory the image was built with, its system
// tables in place (mariadb-install-db at build time).
const mariadbData = "/var/lib/mysql"

// mariadb runs mariadbd with args, after what the mariadb image's
// environment asks, in an init file the server runs at start: the root
// password (MARIADB_ROOT_PASSWORD or MYSQL_ROOT_PASSWORD) for root from
// anywhere, a database (MARIADB_DATABASE, MYSQL_DATABASE), a user with its
// password and every right on it (MARIADB_USER, MYSQL_USER), and on the
// first start the .sql files of /docker-entrypoint-initdb.d.
func mariadb(args []string) error {
	if len(args) > 0 && (args[0] == "mariadbd" || args[0] == "mysqld") {
		args = args[1:]
	}
	var stmts []string
	root := firstEnv("MARIADB_ROOT_PASSWORD", "MYSQL_ROOT_PASSWORD")
	if root == "" && firstEnv("MARIADB_ALLOW_EMPTY_ROOT_PASSWORD", "MYSQL_ALLOW_EMPTY_PASSWORD") == "" {
		return errors.New("mariadb: set MARIADB_ROOT_PASSWORD or MYSQL_ROOT_PASSWORD (or MYSQL_ALLOW_EMPTY_PASSWORD)")
	}
	stmts = append(stmts,
		"CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY "+quote(root),
		"ALTER USER 'root'@'%' IDENTIFIED BY "+quote(root),
		"GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION")
	if db := firstEnv("MARIADB_DATABASE", "MYSQL_DATABASE"); db != "" {
		stmts = append(stmts, "CREATE DATABASE IF NOT EXISTS `"+strings.ReplaceAll(db, "`", "``")+"`")
		if user := firstEnv("MARIADB_USER", "MYSQL_USER"); user != "" && user != "root" {
			u := quote(user) + "@'%'"
			pw := quote(firstEnv("MARIADB_PASSWORD", "MYSQL_PASSWORD"))
			stmts = append(stmts, "CREATE USER IF NOT EXISTS "+u+" IDENTIFIED BY "+pw, "ALTER USER "+u+" IDENTIFIED BY "+pw,
				"GRANT ALL ON `"+strings.ReplaceAll(db, "`", "``")+"`.* TO "+u)
		}
	}
	marker := filepath.Join(mariadbData, ".initdb-done")
	if _, err := os.Stat(marker); errors.Is(err, os.ErrNotExist) {
		files, _ := filepath.Glob("/docker-entrypoint-initdb.d/*.sql")
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("mariadb: %w", err)
			}
			stmts = append(stmts, statements(string(b))...)
		}
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			return fmt.Errorf("mariadb: %w", err)
		}
	}
	// The server reads an init file a statement a line.
	init := "/tmp/entrypoint-init.sql"
	if err := os.WriteFile(init, []byte(strings.Join(stmts, ";\n")+";\n"), 0o600); err != nil {
		return fmt.Errorf("mariadb: %w", err)
	}
	argv := append([]string{"mariadbd", "--user=root", "--datadir=" + mariadbData, "--socket=/tmp/mysqld.sock",
		"--pid-file=/tmp/mysqld.pid", "--bind-address=0.0.0.0", "--skip-name-resolve", "--init-file=" + init}, args...)
	return syscall.Exec("/usr/sbin/mariadbd", argv, os.Environ())
}

// statements splits an SQL file into its statements, each on one line,
// its comment lines left out (a statement ends with ; at a line's end).
func statements(sql string) []string {
	var out []string
	var cur []string
	for line := range strings.SplitSeq(sql, "\n") {
		line = strings.TrimSpace(stripComment(line))
		if line == "" {
			continue
		}
		cur = append(cur, line)
		if strings.HasSuffix(line, ";") {
			out = append(out, strings.TrimSuffix(strings.Join(cur, " "), ";"))
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, " "))
	}
	return out
}

// stripComment cuts a line's comment ("-- " or "#" to its end), outside
// quotes: a statement may end before one.
func stripComment(line string) string {
	var quote rune
	escaped := false
	for i, r := range line {
		switch {
		case escaped:
			escaped = false
		case quote != 0 && quote != '`' && r == '\\':
			escaped = true
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"' || r == '`':
			quote = r
		case r == '#', r == '-' && strings.HasPrefix(line[i:], "--") && (len(line) == i+2 || line[i+2] == ' ' || line[i+2] == '\t'):
			return line[:i]
		}
	}
	return line
}

// kafkaHome is where the image keeps Kafka's jars and Java.
const (
	kafkaHome = "/opt/kafka"
	javaBin   = "/opt/java/bin/java"
)

// kafkaProperty is the server property a KAFKA_ variable names, by the
// apache/kafka image's rule: the prefix dropped, lower case, "___" for
// "-", "__" for "_", "_" for ".".
func kafkaProperty(name string) string {
	p := strings.ToLower(strings.TrimPrefix(name, "KAFKA_"))
	p = strings.ReplaceAll(p, "___", "\x00")
	p = strings.ReplaceAll(p, "__", "\x01")
	p = strings.ReplaceAll(p, "_", ".")
	return strings.NewReplacer("\x00", "-", "\x01", "_").Replace(p)
}

// kafkaJVMVariables are KAFKA_ variables that set the JVM, not the
// server.
var kafkaJVMVariables = map[string]bool{"KAFKA_HEAP_OPTS": true, "KAFKA_OPTS": true, "KAFKA_JVM_PERFORMANCE_OPTS": true,
	"KAFKA_LOG4J_OPTS": true, "KAFKA_GC_LOG_OPTS": true, "KAFKA_JMX_OPTS": true, "KAFKA_DEBUG": true}

// kafka runs a KRaft broker and controller as the apache/kafka image does:
// server properties from the KAFKA_ variables (with its defaults for a
// single node where they say nothing), the storage formatted with
// CLUSTER_ID on the first start.
func kafka() error {
	props := map[string]string{
		"node.id": "1", "process.roles": "broker,controller",
		"listeners":                                "PLAINTEXT://:9092,CONTROLLER://:9093",
		"advertised.listeners":                     "PLAINTEXT://localhost:9092",
		"controller.listener.names":                "CONTROLLER",
		"controller.quorum.voters":                 "1@localhost:9093",
		"listener.security.protocol.map":           "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"log.dirs":                                 "/tmp/kraft-combined-logs",
		"offsets.topic.replication.factor":         "1",
		"transaction.state.log.replication.factor": "1",
		"transaction.state.log.min.isr":            "1",
		"group.initial.rebalance.delay.ms":         "0",
	}
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "KAFKA_") && !kafkaJVMVariables[name] {
			props[kafkaProperty(name)] = value
		}
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	config := "/tmp/server.properties"
	if err := os.WriteFile(config, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	cluster := firstEnv("CLUSTER_ID")
	if cluster == "" {
		cluster = "5L6g3nShT-eMCtK--X86sw" // the apache/kafka image's
	}
	classpath := kafkaHome + "/libs/*"
	logging := "-Dlog4j.configuration=file:" + kafkaHome + "/log4j.properties"
	format, err := os.StartProcess(javaBin, []string{"java", "-Xmx128m", "-cp", classpath, logging, "kafka.tools.StorageTool",
		"format", "--ignore-formatted", "-t", cluster, "-c", config}, &os.ProcAttr{Files: []*os.File{nil, os.Stdout, os.Stderr}})
	if err != nil {
		return fmt.Errorf("kafka: format the storage: %w", err)
	}
	if st, err := format.Wait(); err != nil || !st.Success() {
		return fmt.Errorf("kafka: format the storage: %v %v", st, err)
	}
	heap := strings.Fields(firstEnv("KAFKA_HEAP_OPTS"))
	if len(heap) == 0 {
		heap = []string{"-Xmx512m", "-Xms512m"}
	}
	argv := append(append([]string{"java"}, heap...), "-cp", classpath, logging, "kafka.Kafka", config)
	return syscall.Exec(javaBin, argv, os.Environ())
}
