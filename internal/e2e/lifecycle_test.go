// Package e2e runs the built programs as separate processes against the
// real stack. The tests that mostly wait (for processes to start, stop
// and rejoin their group) run in parallel with each other (make test gives
// -parallel 4); the crowds that load the machine run alone, since their
// assertions are about what a loaded machine still gets right.
package e2e

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/user"
)

type stack struct {
	redis *testsupport.Redis
	mysql *testsupport.MySQL
	kafka *testsupport.Kafka
}

func (s stack) env() map[string]string {
	env := map[string]string{
		"SECKILL_MYSQL_DSN":        s.mysql.DSN,
		"SECKILL_KAFKA_BROKERS":    strings.Join(s.kafka.Brokers, ","),
		"SECKILL_BINLOG_ADDR":      s.mysql.Addr,
		"SECKILL_BINLOG_USER":      s.mysql.User,
		"SECKILL_BINLOG_PASSWORD":  s.mysql.Password,
		"SECKILL_BINLOG_FLAVOR":    s.mysql.Flavor,
		"SECKILL_SHUTDOWN_TIMEOUT": "5s",
		"SECKILL_BINLOG_DATABASE":  s.mysql.Database,
		// Each follower needs a server id and a position file of its own.
		"SECKILL_BINLOG_SERVER_ID":     strconv.Itoa(100000 + rand.IntN(1000000)),
		"SECKILL_BINLOG_POSITION_FILE": filepath.Join(os.TempDir(), "seckill-"+s.mysql.Database+".pos"),
		"SECKILL_KEY_PREFIX":           s.redis.Prefix,
	}
	maps.Copy(env, s.redis.Env())
	return env
}

// invalidatorEnv is a cache-invalidator's environment on s, with retry
// and dead-letter topics and a group of the test's own, and its admin
// address.
func (s stack) invalidatorEnv(t *testing.T) (env map[string]string, admin string) {
	env = s.env()
	admin = testsupport.FreeAddr(t)
	env["SECKILL_ADMIN_ADDR"] = admin
	env["SECKILL_INVALIDATE_RETRY_TOPIC"] = s.kafka.MustTopic(t, 1)
	env["SECKILL_INVALIDATE_DLQ_TOPIC"] = s.kafka.MustTopic(t, 1)
	env["SECKILL_INVALIDATE_GROUP"] = testsupport.Group(t)
	return env, admin
}

// programs are the three daemons: where they listen, and which dependency
// the broken-dependency case takes away from each.
var programs = []struct {
	dir       string
	listenVar string
	broken    string
	breakIt   func(env map[string]string, closed string)
}{
	{"../../cmd/api", "SECKILL_API_ADDR", "kafka", func(env map[string]string, closed string) {
		env["SECKILL_KAFKA_BROKERS"] = closed
	}},
	{"../../cmd/order-writer", "SECKILL_ADMIN_ADDR", "kafka", func(env map[string]string, closed string) {
		env["SECKILL_KAFKA_BROKERS"] = closed
	}},
	{"../../cmd/cache-invalidator", "SECKILL_ADMIN_ADDR", "binlog", func(env map[string]string, closed string) {
		env["SECKILL_BINLOG_ADDR"] = closed
	}},
}

// The shutdown timeout is 5 s; a process that has not exited 5 s after
// that has ignored its deadline.
const exitBound = 10 * time.Second

func TestProgramsBecomeReadyAndStopOnSIGTERM(t *testing.T) {
	t.Parallel()
	s := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	for _, p := range programs {
		t.Run(p.dir[len("../../cmd/"):], func(t *testing.T) {
			bin := testsupport.MustBuild(t, p.dir)
			addr, admin := testsupport.FreeAddr(t), ""
			env := s.env()
			env[p.listenVar] = addr
			if admin = addr; p.listenVar != "SECKILL_ADMIN_ADDR" {
				admin = testsupport.FreeAddr(t)
				env["SECKILL_ADMIN_ADDR"] = admin
			}
			proc := testsupport.Start(t, bin, env)

			body := testsupport.Eventually(t, "http://"+addr+"/readyz", 200, 30*time.Second)
			if !strings.Contains(body, `"status":"ready"`) {
				t.Fatalf("readyz body = %s", body)
			}
			testsupport.Eventually(t, "http://"+addr+"/healthz", 200, 5*time.Second)
			metrics := testsupport.Eventually(t, "http://"+admin+"/metrics", 200, 5*time.Second)
			if !strings.Contains(metrics, "seckill_dependency_up") {
				t.Fatalf("metrics lack seckill_dependency_up:\n%.500s", metrics)
			}
			if strings.Contains(metrics, "seckill_mysql_cluster_size") {
				t.Fatal("a program on one MySQL server exports seckill_mysql_cluster_size")
			}

			proc.Signal(t, syscall.SIGTERM)
			code, err := proc.Wait(exitBound)
			if err != nil {
				t.Fatalf("after SIGTERM: %v", err)
			}
			if code != 0 {
				t.Fatalf("exit code after SIGTERM = %d, want 0", code)
			}
		})
	}
}

func TestProgramsRetryAnUnreachableDependency(t *testing.T) {
	t.Parallel()
	s := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	for _, p := range programs {
		t.Run(p.dir[len("../../cmd/"):], func(t *testing.T) {
			bin := testsupport.MustBuild(t, p.dir)
			addr, admin, closed := testsupport.FreeAddr(t), testsupport.FreeAddr(t), testsupport.FreeAddr(t)
			env := s.env()
			env[p.listenVar] = addr
			if p.listenVar != "SECKILL_ADMIN_ADDR" {
				env["SECKILL_ADMIN_ADDR"] = admin
			}
			p.breakIt(env, closed)
			proc := testsupport.Start(t, bin, env)

			body := testsupport.Eventually(t, "http://"+addr+"/readyz", 503, 30*time.Second)
			if p.listenVar != "SECKILL_ADMIN_ADDR" {
				// The public port says not ready and nothing more.
				if body != `{"status":"unavailable"}`+"\n" {
					t.Fatalf("public readyz body = %q: it names more than its state", body)
				}
				body = testsupport.Eventually(t, "http://"+admin+"/readyz", 503, 5*time.Second)
			}
			want := `{"name":"` + p.broken + `","addr":"` + closed + `","up":false,"required":true`
			if !strings.Contains(body, want) {
				t.Fatalf("readyz body = %s\nwant it to contain %s", body, want)
			}
			// Still down and still trying a while later: the program neither
			// exits nor pretends to be ready.
			time.Sleep(3 * time.Second) // the test is about a while later: a window for a wrong exit
			if proc.Exited() {
				t.Fatalf("program exited while its dependency was down:\n%s", proc.Output())
			}
			testsupport.Eventually(t, "http://"+addr+"/readyz", 503, 5*time.Second)
			logs := proc.Output()
			if !strings.Contains(logs, "dependency="+p.broken) || !strings.Contains(logs, closed) {
				t.Fatalf("logs do not name the dependency %s and its address %s:\n%s", p.broken, closed, logs)
			}

			proc.Signal(t, syscall.SIGTERM)
			code, err := proc.Wait(exitBound)
			if err != nil || code != 0 {
				t.Fatalf("after SIGTERM: code %d, err %v", code, err)
			}
		})
	}
}

func TestInvalidConfigurationStopsTheStartNamingTheVariable(t *testing.T) {
	t.Parallel()
	for _, p := range programs {
		t.Run(p.dir[len("../../cmd/"):], func(t *testing.T) {
			bin := testsupport.MustBuild(t, p.dir)
			proc := testsupport.Start(t, bin, map[string]string{
				"SECKILL_SHUTDOWN_TIMEOUT": "soon",
				p.listenVar:                "no-port",
			})
			code, err := proc.Wait(exitBound)
			if err != nil {
				t.Fatal(err)
			}
			out := proc.Output()
			if code == 0 || !strings.Contains(out, "SECKILL_SHUTDOWN_TIMEOUT") || !strings.Contains(out, p.listenVar) {
				t.Fatalf("exit %d, output:\n%s\nwant a non-zero exit naming SECKILL_SHUTDOWN_TIMEOUT and %s", code, out, p.listenVar)
			}
		})
	}
}

// A Redis configuration that cannot work stops each program at start with
// a message that names the problem, rather than a program that serves
// errors.
func TestBadRedisTopologyStopsTheStart(t *testing.T) {
	t.Parallel()
	s := stack{redis: testsupport.MustNodeRedis(t)}
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"both topologies", map[string]string{"SECKILL_REDIS_ADDR": "127.0.0.1:16379", "SECKILL_REDIS_CLUSTER": "127.0.0.1:17001"},
			[]string{"SECKILL_REDIS_ADDR and SECKILL_REDIS_CLUSTER are both set"}},
		{"a seed that is no cluster node", map[string]string{"SECKILL_REDIS_CLUSTER": s.redis.Addr}, []string{"not a cluster node", s.redis.Addr}},
	}
	for _, p := range programs {
		bin := testsupport.MustBuild(t, p.dir)
		for _, c := range cases {
			t.Run(p.dir[len("../../cmd/"):]+"/"+c.name, func(t *testing.T) {
				proc := testsupport.Start(t, bin, c.env)
				code, err := proc.Wait(exitBound)
				if err != nil {
					t.Fatal(err)
				}
				out := proc.Output()
				for _, w := range c.want {
					if code == 0 || !strings.Contains(out, w) {
						t.Fatalf("exit %d, output:\n%s\nwant a non-zero exit saying %q", code, out, w)
					}
				}
			})
		}
	}
}

// The api sells without MySQL (the buyer's path is Redis and Kafka), so
// MySQL unreachable leaves it ready — a balancer keeps sending it buyers —
// and degraded: the admin listener names MySQL as down and not required,
// seckill_degraded is 1, the log says so. The public port says ready and
// nothing more, and a route that needs MySQL answers 503 with Retry-After.
func TestAPIWithoutMySQLIsReadyAndDegraded(t *testing.T) {
	t.Parallel()
	s := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	bin := testsupport.MustBuild(t, "../../cmd/api")
	addr, admin, closed := testsupport.FreeAddr(t), testsupport.FreeAddr(t), testsupport.FreeAddr(t)
	env := s.env()
	env["SECKILL_API_ADDR"], env["SECKILL_ADMIN_ADDR"] = addr, admin
	env["SECKILL_MYSQL_DSN"] = "seckill:seckill@tcp(" + closed + ")/seckill"
	env["SECKILL_DEV_MODE"] = "true"
	proc := testsupport.Start(t, bin, env)

	want := `{"name":"mysql","addr":"` + closed + `","up":false,"required":false`
	var body string
	testsupport.Wait(t, 30*time.Second, "the admin readiness says degraded, MySQL down", func() bool {
		var code int
		code, body = testsupport.Get(context.Background(), "http://"+admin+"/readyz")
		return code == 200 && strings.Contains(body, `"status":"degraded"`) && strings.Contains(body, want)
	})
	if code, public := testsupport.Get(context.Background(), "http://"+addr+"/readyz"); code != 200 || public != `{"status":"ready"}`+"\n" {
		t.Fatalf("public readyz = %d %q without MySQL, want 200 {\"status\":\"ready\"} and nothing more (admin: %s)", code, public, body)
	}
	// A route that needs MySQL is refused as unavailable, to be retried:
	// not a server fault.
	res, err := http.Get("http://" + addr + "/blog/hot?current=1")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || !strings.Contains(string(raw), `"success":false`) {
		t.Fatalf("GET /blog/hot without MySQL: %d Retry-After %q %s; want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"), raw)
	}
	// A login is refused before its code is checked: the code is still
	// there for the retry once MySQL answers.
	phone := "139" + strconv.Itoa(10_000_000+rand.IntN(89_999_999))
	if res, err = http.Post("http://"+addr+"/user/code?phone="+phone, "", nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("a login code without MySQL: %v %v", res, err)
	}
	res.Body.Close()
	codeKey := user.Keys{Prefix: s.redis.Prefix}.Code(phone, "127.0.0.1")
	code, err := s.redis.Client.HGet(context.Background(), codeKey, "code").Result()
	if err != nil {
		t.Fatalf("the login code in Redis: %v", err)
	}
	if res, err = http.Post("http://"+addr+"/user/login", "application/json", strings.NewReader(`{"phone":"`+phone+`","code":"`+code+`"}`)); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if left, err := s.redis.Client.HGet(context.Background(), codeKey, "code").Result(); res.StatusCode != 503 || err != nil || left != code {
		t.Fatalf("a login without MySQL: %d, and the code %q %v after it; want 503 with the code %s left for the retry", res.StatusCode, left, err, code)
	}
	if _, metrics := testsupport.Get(context.Background(), "http://"+admin+"/metrics"); !strings.Contains(metrics, "\nseckill_degraded 1\n") {
		t.Fatalf("metrics lack seckill_degraded 1 without MySQL:\n%.2000s", metrics)
	}
	if logs := proc.Output(); !strings.Contains(logs, "degraded") || !strings.Contains(logs, "dependency=mysql") {
		t.Fatalf("the log does not say the api runs degraded without MySQL:\n%s", logs)
	}
	proc.Signal(t, syscall.SIGTERM)
	if code, err := proc.Wait(exitBound); err != nil || code != 0 {
		t.Fatalf("after SIGTERM: code %d, err %v", code, err)
	}
}

// jwtEnv is the api's jwt session mode, with a key of the test's own.
func jwtEnv(t *testing.T) map[string]string {
	t.Helper()
	spec, err := jwtauth.NewKeySpec("hs-1", jwtauth.HS256)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := json.Marshal(jwtauth.KeyFile{Sign: "hs-1", Keys: []jwtauth.KeySpec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"SECKILL_SESSION_MODE": "jwt", "SECKILL_JWT_KEYS": string(keys)}
}

// A cluster none of whose seeds answers (it restarts, or a partition cuts
// this machine off) is waited for: each program starts, says on /readyz
// that Redis is not serving, and neither exits nor pretends to be ready;
// the api in either session mode (the jwt mode's revocation feed is read
// once Redis answers, not at the start).
func TestProgramsWaitForAClusterNoSeedAnswers(t *testing.T) {
	t.Parallel()
	s := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	type variant struct {
		name, dir, listenVar string
		more                 map[string]string
	}
	var variants []variant
	for _, p := range programs {
		variants = append(variants, variant{p.dir[len("../../cmd/"):], p.dir, p.listenVar, nil})
	}
	variants = append(variants, variant{"api in the jwt mode", "../../cmd/api", "SECKILL_API_ADDR", jwtEnv(t)})
	for _, p := range variants {
		t.Run(p.name, func(t *testing.T) {
			bin := testsupport.MustBuild(t, p.dir)
			addr, admin, dead := testsupport.FreeAddr(t), testsupport.FreeAddr(t), testsupport.FreeAddr(t)
			env := s.env()
			maps.Copy(env, p.more)
			delete(env, "SECKILL_REDIS_ADDR")
			env["SECKILL_REDIS_CLUSTER"] = dead
			env[p.listenVar] = addr
			if p.listenVar != "SECKILL_ADMIN_ADDR" {
				env["SECKILL_ADMIN_ADDR"] = admin
			} else {
				admin = addr
			}
			proc := testsupport.Start(t, bin, env)
			testsupport.Eventually(t, "http://"+addr+"/readyz", 503, 30*time.Second)
			body := testsupport.Eventually(t, "http://"+admin+"/readyz", 503, 30*time.Second)
			if want := `{"name":"redis","addr":"cluster ` + dead + `","up":false`; !strings.Contains(body, want) {
				t.Fatalf("readyz body = %s\nwant it to contain %s", body, want)
			}
			time.Sleep(3 * time.Second) // the test is about a while later: a window for a wrong exit
			if proc.Exited() {
				t.Fatalf("program exited while no seed answered:\n%s", proc.Output())
			}
			testsupport.Eventually(t, "http://"+addr+"/readyz", 503, 5*time.Second)
			proc.Signal(t, syscall.SIGTERM)
			if code, err := proc.Wait(exitBound); err != nil || code != 0 {
				t.Fatalf("after SIGTERM: code %d, err %v\n%s", code, err, proc.Output())
			}
		})
	}
}

// A program started on a database one migration behind its own (a new
// release before its migrations ran) is not ready, and says why on its
// admin readiness; once the migration is in, it becomes ready without a
// restart.
func TestProgramsRefuseAnOlderSchema(t *testing.T) {
	t.Parallel()
	s := stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)}
	ctx := context.Background()
	var latest int64
	if err := s.mysql.DB.QueryRowContext(ctx, "SELECT MAX(version_id) FROM goose_db_version").Scan(&latest); err != nil {
		t.Fatal(err)
	}
	if _, err := s.mysql.DB.ExecContext(ctx, "DELETE FROM goose_db_version WHERE version_id = ?", latest); err != nil {
		t.Fatal(err)
	}
	want := `"error":"the database's schema is older than this program's: version ` + strconv.FormatInt(latest-1, 10) +
		`, this program needs ` + strconv.FormatInt(latest, 10) + `: run seckillctl migrate"`
	procs := map[string]string{}
	for _, p := range programs {
		name := p.dir[len("../../cmd/"):]
		bin := testsupport.MustBuild(t, p.dir)
		env := s.env()
		if name == "cache-invalidator" {
			env, _ = s.invalidatorEnv(t)
		}
		admin := testsupport.FreeAddr(t)
		env["SECKILL_ADMIN_ADDR"] = admin
		if p.listenVar != "SECKILL_ADMIN_ADDR" {
			env[p.listenVar] = testsupport.FreeAddr(t)
		}
		testsupport.Start(t, bin, env)
		procs[name] = admin
	}
	for name, admin := range procs {
		body := testsupport.Eventually(t, "http://"+admin+"/readyz", 503, 30*time.Second)
		testsupport.Wait(t, 30*time.Second, name+" naming the schema as why it is not ready", func() bool {
			_, body = testsupport.Get(ctx, "http://"+admin+"/readyz")
			return strings.Contains(body, `{"name":"schema"`) && strings.Contains(body, want)
		})
	}
	if _, err := s.mysql.DB.ExecContext(ctx, "INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, TRUE)", latest); err != nil {
		t.Fatal(err)
	}
	for name, admin := range procs {
		testsupport.Wait(t, 30*time.Second, name+" ready once the schema is current", func() bool {
			code, _ := testsupport.Get(ctx, "http://"+admin+"/readyz")
			return code == 200
		})
	}
}
