package app

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/daemon"
	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/orderdb"
	"github.com/seckill/seckill/internal/orderwriter"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/salerepair"
	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/schema"
	"github.com/seckill/seckill/internal/tlscert"
	"github.com/seckill/seckill/internal/user"
)

// CtlUsage lists seckillctl's commands.
const CtlUsage = `usage: seckillctl migrate|version|seed|topics|check|reconcile|logout-user|jwt-key|path-keys|dev-cert|dlq|config ...
  migrate      apply every migration not yet applied
  version      the schema version applied and the newest known
  seed         load the demo shop types, shops, and notes with their authors (idempotent)
  check        compare every voucher on sale between Redis and MySQL (the
               sale is in Redis, its stock not above MySQL's, at least as
               many buyers as orders) and report; exit 1 on a violation
  topics FILE [REPLICAS]
               create the topics FILE lists (name:partitions a line, as
               deploy/topics) that do not exist yet, REPLICAS copies each
               (1 unless told; from 3, two in sync for a write)
  reconcile V  rebuild flash-sale voucher V's state in Redis from MySQL:
               freeze its sale, wait until the order-writer has consumed
               the orders topic, set stock and buyers from MySQL, unfreeze.
               Mends a stock change that reached one store only, warms a
               voucher whose warm-up failed. Safe while the sale runs.
  logout-user U
               end every session of user U on every API instance, in both
               session modes (redis sessions, jwt refresh families and
               access tokens): for a deleted user, or stolen credentials
  jwt-key KID [HS256|EdDSA]
               print a new random signing key for SECKILL_JWT_KEYS_FILE
               (HS256 unless told); add it to the file's keys, make it the
               signing one, keep the old key until its tokens expire
  path-keys stage FILE
               add the order paths' next key to FILE, accepted but not yet
               issuing: where each instance reads its own copy (a mounted
               Secret), apply it and wait until every copy has it (the
               kubelet's sync period, about a minute) before the rotation
  path-keys rotate [FILE]
               make the next key current (the staged one, or a new one), keep
               the current one as the previous (its paths live out their
               minute) and drop the rest: in FILE (SECKILL_BOTCHECK_KEYS_FILE;
               made when missing, its mode and owner kept), or in Redis when
               no FILE is given. Instances reading it follow within a second
  dev-cert DIR write a self-signed certificate for localhost (cert.pem,
               key.pem; a year) into DIR: development TLS only
  config --markdown
               print the table of every variable the programs read, with
               their defaults as the code has them (docs/configuration.md)
  dlq list orders|cache
               print every message of seckill.orders.dlq (orders) or
               cache.invalidate.dlq (cache), one JSON line each: its place
               (partition, offset), error, source topic, partition and
               offset, attempt, key and value
  dlq replay orders|cache all|PARTITION:OFFSET...
               put the chosen dead letters back on the topic they were
               consumed from (the orders topic; the cache retry topic):
               safe to repeat, the consumers' rules make it idempotent`

// Ctl runs one seckillctl command with the configuration from lookup and
// reports to out.
func Ctl(args []string, lookup config.Lookup, out io.Writer) error {
	switch {
	case len(args) == 1 && (args[0] == "migrate" || args[0] == "version" || args[0] == "seed"):
		dsn, err := config.MySQLDSN(lookup)
		if err != nil {
			return err
		}
		wait, err := config.CtlWait(lookup)
		if err != nil {
			return err
		}
		return schemaCtl(args[0], dsn, wait, out)
	case len(args) == 1 && args[0] == "check":
		cfg, err := config.LoadCtl(lookup)
		if err != nil {
			return err
		}
		return checkCtl(cfg, out)
	case len(args) == 2 && args[0] == "logout-user":
		id, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil || id <= 0 {
			return fmt.Errorf("logout-user: %q is not a user id\n%s", args[1], CtlUsage)
		}
		cfg, err := config.LoadCtl(lookup)
		if err != nil {
			return err
		}
		return logoutUserCtl(cfg, id, out)
	case (len(args) == 2 || len(args) == 3) && args[0] == "jwt-key":
		alg := jwtauth.HS256
		if len(args) == 3 {
			alg = args[2]
		}
		spec, err := jwtauth.NewKeySpec(args[1], alg)
		if err != nil {
			return fmt.Errorf("jwt-key: %w", err)
		}
		return json.NewEncoder(out).Encode(spec)
	case len(args) == 2 && args[0] == "config" && args[1] == "--markdown":
		table, err := config.Markdown()
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		_, err = io.WriteString(out, table)
		return err
	case len(args) == 3 && args[0] == "path-keys" && args[1] == "stage":
		ring, err := botcheck.StageKeyFile(args[2])
		if err != nil {
			return fmt.Errorf("path-keys: %w", err)
		}
		fmt.Fprintf(out, "%s: order paths' key %d is current, the next one staged\n", args[2], ring.Current.ID)
		return nil
	case (len(args) == 2 || len(args) == 3) && args[0] == "path-keys" && args[1] == "rotate":
		if len(args) == 3 {
			before, _ := botcheck.FileKeys(args[2]).Ring(context.Background())
			ring, err := botcheck.RotateKeyFile(args[2])
			if err != nil {
				return fmt.Errorf("path-keys: %w", err)
			}
			if k, staged := before.Key(ring.Current.ID); !staged || string(k.Secret) != string(ring.Current.Secret) {
				fmt.Fprintf(out, "%s: nothing was staged, a new key %d is current: where each instance reads its own copy (a mounted Secret), stage first\n", args[2], ring.Current.ID)
				return nil
			}
			fmt.Fprintf(out, "%s: the staged key %d is current\n", args[2], ring.Current.ID)
			return nil
		}
		cfg, err := config.LoadCtl(lookup)
		if err != nil {
			return err
		}
		return rotatePathKeysCtl(cfg, out)
	case len(args) == 2 && args[0] == "dev-cert":
		cert, key, err := tlscert.WriteDev(args[1], 365*24*time.Hour)
		if err != nil {
			return fmt.Errorf("dev-cert: %w", err)
		}
		fmt.Fprintf(out, "SECKILL_TLS_CERT=%s SECKILL_TLS_KEY=%s\n", cert, key)
		return nil
	case len(args) >= 3 && args[0] == "dlq":
		cfg, err := config.LoadCtl(lookup)
		if err != nil {
			return err
		}
		return dlqCtl(cfg, args[1], args[2], args[3:], out)
	case (len(args) == 2 || len(args) == 3) && args[0] == "topics":
		replicas := 1
		if len(args) == 3 {
			n, err := strconv.Atoi(args[2])
			if err != nil || n < 1 {
				return fmt.Errorf("topics: %q is not a replication factor\n%s", args[2], CtlUsage)
			}
			replicas = n
		}
		cfg, err := config.LoadCtl(lookup)
		if err != nil {
			return err
		}
		return topicsCtl(cfg, args[1], replicas, out)
	case len(args) == 2 && args[0] == "reconcile":
		id, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil || id <= 0 {
			return fmt.Errorf("reconcile: %q is not a voucher id\n%s", args[1], CtlUsage)
		}
		cfg, err := config.LoadCtl(lookup)
		if err != nil {
			return err
		}
		return reconcileCtl(cfg, id, out)
	}
	return fmt.Errorf("unknown command %q\n%s", args, CtlUsage)
}

// topicsCtl creates the topics of the list in file that do not exist yet,
// each with replicas copies, two of them in sync for a write when there
// are three or more (as stack.sh makes them).
func topicsCtl(cfg config.Ctl, file string, replicas int, out io.Writer) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("topics: %w", err)
	}
	defer f.Close()
	topics, err := broker.ParseTopicList(f)
	if err != nil {
		return fmt.Errorf("topics: %s: %w", file, err)
	}
	names := make([]string, len(topics))
	for i := range topics {
		topics[i].Replicas = replicas
		if replicas >= 3 {
			topics[i].MinInSync = 2
		}
		names[i] = topics[i].Name
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Wait+time.Minute)
	defer cancel()
	// The creation itself is what is waited for: a cluster whose first
	// broker answers may not have all the replicas' brokers yet.
	if err := waitFor(ctx, cfg.Wait, 30*time.Second, fmt.Sprintf("Kafka at %v (creating the topics)", cfg.KafkaBrokers), func(ctx context.Context) error {
		return broker.EnsureTopics(ctx, cfg.KafkaBrokers, topics...)
	}); err != nil {
		return fmt.Errorf("topics: %w", err)
	}
	fmt.Fprintf(out, "topics: %s on %v, replication factor %d\n", strings.Join(names, ", "), cfg.KafkaBrokers, replicas)
	return nil
}

// waitFor tries ping, each try given up to try, once a second until it
// passes or within has gone by (once when within is zero), and says what
// did not answer.
func waitFor(ctx context.Context, within, try time.Duration, what string, ping func(context.Context) error) error {
	deadline := time.Now().Add(within)
	for {
		pctx, cancel := context.WithTimeout(ctx, try)
		err := ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if !time.Now().Add(time.Second).Before(deadline) {
			return fmt.Errorf("%s did not answer within %v (SECKILL_CTL_WAIT): %w", what, within, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
}

func schemaCtl(cmd, dsn string, wait time.Duration, out io.Writer) error {
	db, err := mysqldb.Open(dsn)
	if err != nil {
		return fmt.Errorf("SECKILL_MYSQL_DSN: %w", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait+2*time.Minute)
	defer cancel()
	if err := waitFor(ctx, wait, 5*time.Second, "MySQL at "+mysqldb.Addr(dsn), db.PingContext); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	// The demo data goes into the schema's tables: seed started beside
	// migrate waits for it to be applied.
	if cmd == "seed" {
		if err := waitFor(ctx, wait, 5*time.Second, "the schema on "+mysqldb.Addr(dsn), schema.NewCheck(db, "").Check); err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
	}

	switch cmd {
	case "migrate":
		n, err := schema.Migrate(ctx, db)
		if err != nil {
			return err
		}
		current, _, err := schema.Version(ctx, db)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "migrate: applied %d migration(s); schema version %d on %s\n", n, current, mysqldb.Addr(dsn))
	case "version":
		current, latest, err := schema.Version(ctx, db)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "schema version %d (newest known: %d)\n", current, latest)
	case "seed":
		if err := schema.Seed(ctx, db); err != nil {
			return err
		}
		fmt.Fprintln(out, "seed: demo shop types, shops and notes present")
	}
	return nil
}

// dlqCtl lists or replays the dead letters of a family: orders or cache.
func dlqCtl(cfg config.Ctl, verb, family string, refs []string, out io.Writer) error {
	var dlq, fallback string
	switch family {
	case "orders":
		dlq, fallback = cfg.Sale.OrdersDLQ, cfg.Sale.OrdersTopic
	case "cache":
		dlq, fallback = cfg.CacheDLQTopic, cfg.CacheRetryTopic
	default:
		return fmt.Errorf("dlq: %q is not a family: orders or cache\n%s", family, CtlUsage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch {
	case verb == "list" && len(refs) == 0:
		letters, err := broker.ReadDeadLetters(ctx, cfg.KafkaBrokers, dlq)
		if err != nil {
			return fmt.Errorf("dlq list: %w", err)
		}
		enc := json.NewEncoder(out)
		for _, d := range letters {
			if err := enc.Encode(d); err != nil {
				return err
			}
		}
		return nil
	case verb == "replay" && len(refs) > 0:
		letters, err := broker.ReadDeadLetters(ctx, cfg.KafkaBrokers, dlq)
		if err != nil {
			return fmt.Errorf("dlq replay: %w", err)
		}
		chosen, err := chooseLetters(letters, refs)
		if err != nil {
			return fmt.Errorf("dlq replay: %w", err)
		}
		if len(chosen) == 0 {
			fmt.Fprintf(out, "dlq replay: %s is empty, nothing to replay\n", dlq)
			return nil
		}
		sent, err := broker.Replay(ctx, cfg.KafkaBrokers, dlq, chosen, fallback)
		for topic, n := range sent {
			fmt.Fprintf(out, "dlq replay: %d message(s) of %s put back on %s\n", n, dlq, topic)
		}
		return err
	}
	return fmt.Errorf("dlq: want list, or replay with all or PARTITION:OFFSET...\n%s", CtlUsage)
}

// chooseLetters are the dead letters refs name: all, or PARTITION:OFFSET
// each, every one of which must be there.
func chooseLetters(letters []broker.DeadLetter, refs []string) ([]broker.DeadLetter, error) {
	if len(refs) == 1 && refs[0] == "all" {
		return letters, nil
	}
	byRef := map[string]broker.DeadLetter{}
	for _, d := range letters {
		byRef[d.Ref()] = d
	}
	var chosen []broker.DeadLetter
	for _, ref := range refs {
		d, ok := byRef[ref]
		if !ok {
			return nil, fmt.Errorf("no dead letter at %q (want PARTITION:OFFSET as dlq list prints them, or all)", ref)
		}
		chosen = append(chosen, d)
	}
	return chosen, nil
}

// reconcileCtl reconciles one voucher, waiting up to a minute for the
// order-writer.
func reconcileCtl(cfg config.Ctl, voucherID int64, out io.Writer) error {
	return withStores(cfg, func(ctx context.Context, db *sql.DB, rdb redis.UniversalClient) error {
		r := &reconcile.Reconciler{
			Sale:    salerepair.New(salestate.New(rdb, cfg.Sale.KeyPrefix)),
			Records: &orderdb.Orders{DB: db},
			Backlog: &broker.Progress{Brokers: cfg.KafkaBrokers, Group: cfg.Group, Topic: cfg.Sale.OrdersTopic},
			IDs:     orderIDs(rdb, cfg.Sale),
			Locks:   lock.New(rdb, cfg.Sale.KeyPrefix),
			Wait:    time.Minute, Poll: reconcilePoll,
			Logger: daemon.NewLogger(out, cfg.LogFormat, slog.LevelInfo, "seckillctl"),
		}
		rep, err := r.Run(ctx, voucherID)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "reconcile: voucher %d: stock %d, %d buyers; %d settled reservations dropped, %d still pending; %d oversold (will fail sold_out); waited %v for the order-writer\n",
			voucherID, rep.Plan.Stock, len(rep.Plan.Buyers), len(rep.Plan.Settled), rep.Plan.Unsettled, rep.Plan.Oversold, rep.Waited.Round(time.Millisecond))
		return nil
	})
}

// logoutUserCtl ends user uid's sessions of both modes: whichever the API
// instances run, and a mode switched since.
func logoutUserCtl(cfg config.Ctl, uid int64, out io.Writer) error {
	return withStores(cfg, func(ctx context.Context, db *sql.DB, rdb redis.UniversalClient) error {
		logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
		u := user.User{ID: uid}
		redisSessions := user.NewCachedSessions(user.NewSessions(rdb, user.Keys{Prefix: cfg.Sale.KeyPrefix}, 0), rdb, time.Second, logger)
		jkeys := jwtauth.Keys{Prefix: cfg.Sale.KeyPrefix}
		jwtSessions := &jwtauth.Sessions{Families: jwtauth.NewFamilies(rdb, jkeys, cfg.Sessions.RefreshTTL, 0),
			Revocations: jwtauth.NewRevocations(rdb, jkeys.Revocations(), jwtauth.Lifetime(cfg.Sessions.AccessTTL), logger)}
		if err := errors.Join(redisSessions.End(ctx, u, "", true), jwtSessions.End(ctx, u, "", true)); err != nil {
			return err
		}
		fmt.Fprintf(out, "user %d: every session ended\n", uid)
		return nil
	})
}

// rotatePathKeysCtl rotates the order paths' keys kept in Redis.
func rotatePathKeysCtl(cfg config.Ctl, out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb, err := daemon.OpenRedis(ctx, cfg.Common, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	defer rdb.Close()
	ring, err := botcheck.NewRedisKeys(rdb, cfg.Sale.KeyPrefix).Rotate(ctx)
	if err != nil {
		return fmt.Errorf("path-keys: %w", err)
	}
	fmt.Fprintf(out, "Redis: order paths' key %d is current\n", ring.Current.ID)
	return nil
}

// withStores runs a command that reads MySQL and Redis, within two
// minutes.
func withStores(cfg config.Ctl, run func(ctx context.Context, db *sql.DB, rdb redis.UniversalClient) error) error {
	db, err := mysqldb.Open(cfg.MySQLDSN)
	if err != nil {
		return fmt.Errorf("SECKILL_MYSQL_DSN: %w", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rdb, err := daemon.OpenRedis(ctx, cfg.Common, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	defer rdb.Close()
	return run(ctx, db, rdb)
}

// checkCtl runs the order-writer's sale checks once and reports what they
// find.
func checkCtl(cfg config.Ctl, out io.Writer) error {
	return withStores(cfg, func(ctx context.Context, db *sql.DB, rdb redis.UniversalClient) error {
		found := &violationReport{out: out}
		checks := &orderwriter.SaleChecks{DB: db, Sale: salerepair.New(salestate.New(rdb, cfg.Sale.KeyPrefix)), Guard: found,
			Logger: slog.New(slog.NewTextHandler(out, nil))}
		n, err := checks.Check(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "check: %d vouchers on sale compared, %d violations\n", n, found.count)
		if found.count > 0 {
			return fmt.Errorf("%d violations: seckillctl reconcile <voucher> rebuilds a voucher from MySQL", found.count)
		}
		return nil
	})
}

// violationReport prints what a check finds.
type violationReport struct {
	out   io.Writer
	count int
}

func (r *violationReport) Violated(voucherID int64, check string, detail ...any) {
	r.count++
	fmt.Fprintf(r.out, "voucher %d: %s %v\n", voucherID, check, detail)
}
