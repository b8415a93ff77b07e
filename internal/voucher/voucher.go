// Package voucher is the vouchers of the course (tb_voucher, and
// tb_seckill_voucher for flash-sale ones) and their warm copy in Redis.
package voucher

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/mysqldb"
	"github.com/seckill/seckill/internal/sale"
)

// Voucher is the course's Voucher as its client reads it. Stock and the
// window exist only for flash-sale vouchers (type 1).
type Voucher struct {
	ID          int64      `json:"id"`
	ShopID      int64      `json:"shopId"`
	Title       string     `json:"title"`
	SubTitle    string     `json:"subTitle,omitempty"`
	Rules       string     `json:"rules,omitempty"`
	PayValue    int64      `json:"payValue"`
	ActualValue int64      `json:"actualValue"`
	Type        int        `json:"type"`
	Status      int        `json:"status"`
	Stock       *int64     `json:"stock,omitempty"`
	BeginTime   *time.Time `json:"beginTime,omitempty"`
	EndTime     *time.Time `json:"endTime,omitempty"`
	// StockBuckets is how many Redis stock buckets a flash sale is sold
	// from (1 when absent): more than one spreads one hot item's buyers
	// over as many Redis masters. Fixed for the sale's life.
	StockBuckets int `json:"stockBuckets,omitempty"`
	// BotCheck is how a flash sale keeps bots from its stock: "none"
	// (absent: the course's fixed order route), "path" or "challenge"
	// (docs/bot-defence.md). Fixed for the sale's life.
	BotCheck string `json:"botCheck,omitempty"`
	// Admission is how a flash sale admits its first crowd: first-come
	// (absent), or a draw over its first seconds (docs/bot-defence.md).
	// Fixed for the sale's life.
	Admission *Admission `json:"admission,omitempty"`
}

// Admission is a flash sale's admission option.
type Admission struct {
	// Mode is "first-come" (the default) or "draw".
	Mode string `json:"mode"`
	// WindowSeconds is a draw's window: the attempts in the sale's first
	// seconds are entries, drawn at its end. Only with "draw".
	WindowSeconds int `json:"windowSeconds,omitempty"`
}

// drawWindow is v's draw window; zero for a first-come sale.
func (v Voucher) drawWindow() time.Duration {
	if v.Admission == nil || v.Admission.Mode != sale.AdmissionDraw {
		return 0
	}
	return time.Duration(v.Admission.WindowSeconds) * time.Second
}

// The voucher types of the course.
const (
	TypeOrdinary = 0
	TypeSeckill  = 1
)

// The range of a TIMESTAMP column, on both MySQL and MariaDB.
var (
	minTime = time.Date(1970, 1, 2, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2038, 1, 18, 0, 0, 0, 0, time.UTC)
)

// The outcomes callers branch on.
var (
	// ErrInvalid is a voucher or a change that cannot be made; the
	// message says why.
	ErrInvalid = apperr.New(apperr.Invalid, "invalid voucher")
	// ErrWindow is a sale window whose fields are each well-formed but
	// together are not a window: an end before its begin, or outside what
	// the TIMESTAMP columns hold.
	ErrWindow = apperr.New(apperr.Unprocessable, "invalid sale window")
	// ErrConflict is a change the voucher as it stands refuses: the stock
	// it would leave, or a window with the bound it keeps.
	ErrConflict = apperr.New(apperr.Conflict, "the change does not fit the voucher as it stands")
	// ErrNotFound is a flash-sale voucher id with no row.
	ErrNotFound = apperr.New(apperr.NotFound, "no such flash-sale voucher")
)

// The bounds of what an admin may send, the same at creation and at a
// change: ids a JavaScript client keeps exact (the course's client reads
// them as numbers), amounts in fen up to a hundred million yuan, and a
// stock up to a hundred million units, far inside the INT stock column
// even after changes.
const (
	MaxID    = 1<<53 - 1
	MaxMoney = 10_000_000_000
	MaxStock = 100_000_000
)

// Validate checks what the database would not, and bounds every number.
func (v Voucher) Validate() error {
	bad := func(why string) error { return ErrInvalid.With("%s", why) }
	switch {
	case v.ShopID <= 0 || v.ShopID > MaxID:
		return bad("shopId must be a positive id up to 9007199254740991")
	case v.Title == "" || utf8.RuneCountInString(v.Title) > 255:
		return bad("title must have 1 to 255 characters")
	case utf8.RuneCountInString(v.SubTitle) > 255 || utf8.RuneCountInString(v.Rules) > 1024:
		return bad("subTitle or rules too long")
	case v.PayValue < 0 || v.PayValue > MaxMoney:
		return bad("payValue must be from 0 to 10000000000 (fen)")
	case v.ActualValue < 0 || v.ActualValue > MaxMoney:
		return bad("actualValue must be from 0 to 10000000000 (fen)")
	}
	if v.Type != TypeSeckill {
		if v.Admission != nil {
			return bad("admission is a flash sale's (type 1)")
		}
		return nil
	}
	switch {
	case v.Stock == nil || *v.Stock < 0 || *v.Stock > MaxStock:
		return bad("a flash-sale voucher needs a stock from 0 to 100000000")
	case v.BeginTime == nil || v.EndTime == nil:
		return bad("a flash-sale voucher needs beginTime and endTime")
	case v.StockBuckets < 0 || v.StockBuckets > sale.MaxBuckets:
		return bad("stockBuckets must be from 1 to 16 (0 or absent: 1)")
	case !v.EndTime.After(*v.BeginTime):
		return ErrWindow.With("endTime must be after beginTime")
	case v.BeginTime.Before(minTime) || v.EndTime.After(maxTime):
		return ErrWindow.With("beginTime and endTime must lie between 1970-01-02 and 2038-01-18 (a TIMESTAMP column)")
	}
	if _, err := botcheck.ParseMode(v.BotCheck); err != nil {
		return bad(err.Error())
	}
	if a := v.Admission; a != nil {
		switch {
		case a.Mode == "":
			return bad("admission.mode is required: first-come or draw")
		case a.Mode == sale.AdmissionFirstCome:
			if a.WindowSeconds != 0 {
				return bad("admission.windowSeconds is a draw's: a first-come sale has none")
			}
		case a.Mode != sale.AdmissionDraw:
			return bad("admission.mode must be first-come or draw")
		case a.WindowSeconds < 1 || time.Duration(a.WindowSeconds)*time.Second > sale.MaxDrawWindow:
			return bad("a draw's admission.windowSeconds must be from 1 to 600")
		case v.StockBuckets > 1:
			return bad("a sale with a draw has one stock bucket: its draw serves the entrants in one order")
		case !v.BeginTime.Add(v.drawWindow()).Before(*v.EndTime):
			return ErrWindow.With("a draw's window must end before endTime")
		}
	}
	return nil
}

// Sale is a flash-sale voucher's state where the gate decides: warmed on
// creation, adjusted by an admin's change.
type Sale interface {
	// WarmBuckets puts a new voucher's sale in place: its stock, dealt
	// over buckets, and its window.
	WarmBuckets(ctx context.Context, voucherID, stock int64, buckets int, begin, end time.Time) error
	// Adjust changes the stock by delta and, when not zero, the window;
	// it returns the stock after, sale.ErrNotEnoughStock or sale.ErrNotWarmed.
	Adjust(ctx context.Context, voucherID, delta int64, begin, end time.Time) (int64, error)
	// WarmNew is WarmBuckets for the buckets not there yet only.
	WarmNew(ctx context.Context, voucherID, stock int64, buckets int, begin, end time.Time) error
	// WarmDraw puts a new sale with a draw in place, in one bucket;
	// onlyNew leaves one already there as it is.
	WarmDraw(ctx context.Context, voucherID, stock int64, begin, end time.Time, window time.Duration, onlyNew bool) error
}

// BotChecks keeps a new sale's bot check where the order route reads it.
type BotChecks interface {
	SetMode(ctx context.Context, voucherID int64, m botcheck.Mode, end time.Time) error
}

// Vouchers is the voucher tables and the flash sale's state in the gate.
type Vouchers struct {
	DB        *sql.DB
	Sale      Sale
	BotChecks BotChecks
}

// Create inserts v (tb_voucher, and tb_seckill_voucher for a flash-sale
// voucher, in one transaction) and warms its sale in Redis before
// returning, so the sale can start at once. It returns the new id.
//
// key, when not "", is the admin's Idempotency-Key (the IETF httpapi
// draft's semantics): kept with the voucher in the same transaction, so
// that a creation is made once whatever the retries. A key already used
// with the same voucher answers that voucher's id; with another, 422.
func (vs *Vouchers) Create(ctx context.Context, v Voucher, key string) (int64, error) {
	if err := v.Validate(); err != nil {
		return 0, err
	}
	var hash string
	if key != "" {
		hash = v.hash()
		if id, found, err := vs.keyed(ctx, v, key, hash); err != nil || found {
			return id, err
		}
	}
	tx, err := vs.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("create voucher: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO tb_voucher (shop_id, title, sub_title, rules, pay_value, actual_value, type, status)
		VALUES (?, ?, ?, ?, ?, ?, ?, 1)`, v.ShopID, v.Title, v.SubTitle, v.Rules, v.PayValue, v.ActualValue, v.Type)
	if err != nil {
		return 0, fmt.Errorf("insert voucher: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert voucher: %w", err)
	}
	mode, _ := botcheck.ParseMode(v.BotCheck) // validated
	if v.Type == TypeSeckill {
		if _, err := tx.ExecContext(ctx, `INSERT INTO tb_seckill_voucher (voucher_id, stock, begin_time, end_time, stock_buckets, bot_check, admission_window)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			id, *v.Stock, v.BeginTime.UTC(), v.EndTime.UTC(), max(v.StockBuckets, 1), string(mode), int(v.drawWindow()/time.Second)); err != nil {
			return 0, fmt.Errorf("insert seckill voucher: %w", err)
		}
	}
	if key != "" {
		// A creation with the same key under way waits here for the
		// other's commit (the row's lock), then finds its key taken.
		if _, err := tx.ExecContext(ctx, "INSERT INTO tb_idempotency_key (route, idem_key, request_hash, resource_id) VALUES (?, ?, ?, ?)",
			v.route(), key, hash, id); err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == errDuplicateKey {
				_ = tx.Rollback()
				id, found, err := vs.keyed(ctx, v, key, hash)
				if err == nil && !found {
					err = ErrOutcomeUnknown.With("the Idempotency-Key's other creation was rolled back meanwhile: retry with the same key")
				}
				return id, err
			}
			return 0, fmt.Errorf("keep the Idempotency-Key: %w", err)
		}
	}
	// From the commit on, the admin's hanging up changes nothing: a
	// voucher made is warmed, and one whose commit is in doubt looked up.
	ctx = context.WithoutCancel(ctx)
	if err := tx.Commit(); err != nil {
		if key != "" {
			return vs.keyedAfterLostCommit(ctx, v, key, hash, err)
		}
		if err := vs.madeAnyway(ctx, id, v, err); err != nil {
			return 0, err
		}
	}
	return id, vs.warm(ctx, id, v)
}

// warm puts a new flash-sale voucher's sale on in Redis.
func (vs *Vouchers) warm(ctx context.Context, id int64, v Voucher) error {
	if v.Type != TypeSeckill {
		return nil
	}
	// The sale first, as soon as the commit: the order-writer's sale
	// check takes a sale in MySQL still not in Redis a second later
	// (orderwriter.SaleChecks.MissingRecheck) for lost writes.
	// Its mode after: an order in between has the mode read from
	// MySQL (botcheck.Store.ModeOf), never none for a sale without it.
	var err error
	if w := v.drawWindow(); w > 0 {
		err = vs.Sale.WarmDraw(ctx, id, *v.Stock, *v.BeginTime, *v.EndTime, w, false)
	} else {
		err = vs.Sale.WarmBuckets(ctx, id, *v.Stock, max(v.StockBuckets, 1), *v.BeginTime, *v.EndTime)
	}
	if err != nil {
		return err
	}
	if vs.BotChecks != nil {
		mode, _ := botcheck.ParseMode(v.BotCheck) // validated
		return vs.BotChecks.SetMode(ctx, id, mode, *v.EndTime)
	}
	return nil
}

// errDuplicateKey is ER_DUP_ENTRY.
const errDuplicateKey = 1062

// ErrKeyReused is an Idempotency-Key sent again with another voucher.
var ErrKeyReused = apperr.New(apperr.Unprocessable, "this Idempotency-Key was used for another request: use a new key for a new voucher")

// ErrOutcomeUnknown is a creation whose COMMIT's answer was lost and
// whose key's row is not there yet: the COMMIT may still land (a proxy
// that cut the connection may deliver it later), so "not created" would
// be a guess, and the same key is what makes the retry safe.
var ErrOutcomeUnknown = apperr.New(apperr.Unavailable, "the database's answer was lost and whether the voucher was made is not known yet: retry with the same Idempotency-Key")

// keyed answers a creation whose key is already kept: its voucher's id
// when it asked for the same voucher (hash), with the sale put on in
// Redis if it is not (the first creation's answer may have been lost
// before it warmed it), ErrKeyReused otherwise. found is false when the
// key is not kept. The pool's reads are causal on a cluster
// (mysqldb.Open): a key another node committed is seen.
func (vs *Vouchers) keyed(ctx context.Context, v Voucher, key, hash string) (id int64, found bool, err error) {
	var kept string
	err = vs.DB.QueryRowContext(ctx, "SELECT request_hash, resource_id FROM tb_idempotency_key WHERE route = ? AND idem_key = ?",
		v.route(), key).Scan(&kept, &id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("look up the Idempotency-Key: %w", err)
	case kept != hash:
		return 0, true, ErrKeyReused
	}
	if v.Type == TypeSeckill {
		// The first creation's answer may have been lost before it warmed
		// the sale: warm the buckets that are not there, and leave a sale
		// warmed by it as it is (selling, maybe). A sale that has sold and
		// then was lost by Redis is not put back with its whole stock: the
		// order-writer's sale check rebuilds it from MySQL's orders once
		// the accepted ones are written. An order accepted but not yet in
		// MySQL escapes this look; the retry comes seconds after the
		// creation, and the check's rebuild corrects the stock then.
		ctx := context.WithoutCancel(ctx)
		sold, err := vs.sold(ctx, id)
		if err != nil {
			return id, true, err
		}
		if !sold {
			var err error
			if w := v.drawWindow(); w > 0 {
				err = vs.Sale.WarmDraw(ctx, id, *v.Stock, *v.BeginTime, *v.EndTime, w, true)
			} else {
				err = vs.Sale.WarmNew(ctx, id, *v.Stock, max(v.StockBuckets, 1), *v.BeginTime, *v.EndTime)
			}
			if err != nil {
				return id, true, err
			}
		}
		if vs.BotChecks != nil {
			mode, _ := botcheck.ParseMode(v.BotCheck) // validated
			return id, true, vs.BotChecks.SetMode(ctx, id, mode, *v.EndTime)
		}
	}
	return id, true, nil
}

// sold is whether MySQL holds an order of the voucher.
func (vs *Vouchers) sold(ctx context.Context, voucherID int64) (bool, error) {
	var one int
	err := vs.DB.QueryRowContext(ctx, "SELECT 1 FROM tb_voucher_order WHERE voucher_id = ? LIMIT 1", voucherID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up voucher %d's orders: %w", voucherID, err)
	}
	return true, nil
}

// keyedAfterLostCommit answers a keyed creation whose COMMIT's answer was
// lost: made when its key is kept, unknown otherwise.
func (vs *Vouchers) keyedAfterLostCommit(ctx context.Context, v Voucher, key, hash string, commitErr error) (int64, error) {
	id, found, err := vs.keyed(ctx, v, key, hash)
	switch {
	case err != nil:
		return 0, ErrOutcomeUnknown.Wrap(errors.Join(commitErr, err))
	case !found:
		return 0, ErrOutcomeUnknown.Wrap(commitErr)
	}
	return id, nil
}

// hash identifies what a creation asked for: its voucher as the server
// reads it, normalised (the default buckets and bot check spelt out, the
// times in UTC), so that a body sent again with other spacing, offsets or
// defaults is the same request; versioned, so that a field added later
// can leave the hashes of earlier keys alone.
func (v Voucher) hash() string {
	mode, _ := botcheck.ParseMode(v.BotCheck) // validated
	n := struct {
		ShopID, PayValue, ActualValue int64
		Title, SubTitle, Rules        string
		Type, Buckets                 int
		Stock                         *int64
		Begin, End                    *time.Time
		BotCheck                      string
	}{v.ShopID, v.PayValue, v.ActualValue, v.Title, v.SubTitle, v.Rules, v.Type, max(v.StockBuckets, 1), v.Stock, utc(v.BeginTime),
		utc(v.EndTime), string(mode)}
	b, _ := json.Marshal(n) // plain fields: cannot fail
	version := "v1:"
	if w := v.drawWindow(); w > 0 {
		// A draw's keys hash its window too; a first-come voucher's hash
		// stays what it was before draws were made.
		version = "v2:draw:" + strconv.Itoa(int(w/time.Second)) + ":"
	}
	sum := sha256.Sum256(append([]byte(version), b...))
	return hex.EncodeToString(sum[:])
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// route names the creating route in the keys' table.
func (v Voucher) route() string {
	if v.Type == TypeSeckill {
		return "POST /voucher/seckill"
	}
	return "POST /voucher"
}

// ErrNotCreated is a voucher the database did not take.
var ErrNotCreated = apperr.New(apperr.Unavailable, "the database did not take the voucher: nothing was created, try again")

// madeAnyway is nil when the commit of voucher v as id, which failed
// with commitErr, was made all the same: a commit whose answer was lost
// (the server, or a cluster's node, went away between the two) may have
// been. The voucher's row says which, read on a connection of its own:
// behind a cluster's proxy, from the node that took over, which has
// certified every commit but may not have applied the last ones yet, so
// the read waits for them (the pool's reads are causal). The row must be
// v's own: a cluster that changed its members may hand an id out again.
// Without an Idempotency-Key this is a guess when the proxy delivers the
// COMMIT after the lookup: the key is what makes a retry safe.
func (vs *Vouchers) madeAnyway(ctx context.Context, id int64, v Voucher, commitErr error) error {
	var n int
	err := vs.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_voucher WHERE id = ? AND shop_id = ? AND title = ?", id, v.ShopID, v.Title).Scan(&n)
	switch {
	case err != nil:
		return ErrStoresDisagree.With("the database's answer to the creation of voucher %d was lost, and whether it was made is unknown: if the shop's voucher list has it, `seckillctl reconcile %d` puts its sale on",
			id, id).Wrap(errors.Join(commitErr, err))
	case n == 0:
		return ErrNotCreated.Wrap(commitErr)
	}
	return nil
}

// List is a shop's vouchers, flash-sale ones with their stock and window.
func (vs *Vouchers) List(ctx context.Context, shopID int64) ([]Voucher, error) {
	rows, err := vs.DB.QueryContext(ctx, `SELECT v.id, v.shop_id, v.title, COALESCE(v.sub_title, ''), COALESCE(v.rules, ''),
		v.pay_value, v.actual_value, v.type, v.status, sv.stock, sv.begin_time, sv.end_time, sv.bot_check, sv.admission_window
		FROM tb_voucher v LEFT JOIN tb_seckill_voucher sv ON sv.voucher_id = v.id
		WHERE v.shop_id = ? ORDER BY v.id`, shopID)
	if err != nil {
		return nil, fmt.Errorf("list vouchers of shop %d: %w", shopID, err)
	}
	defer rows.Close()
	list := []Voucher{}
	for rows.Next() {
		var v Voucher
		var stock sql.NullInt64
		var begin, end sql.NullTime
		var check sql.NullString
		var window sql.NullInt64
		if err := rows.Scan(&v.ID, &v.ShopID, &v.Title, &v.SubTitle, &v.Rules, &v.PayValue, &v.ActualValue,
			&v.Type, &v.Status, &stock, &begin, &end, &check, &window); err != nil {
			return nil, fmt.Errorf("list vouchers of shop %d: %w", shopID, err)
		}
		if stock.Valid {
			v.Stock, v.BeginTime, v.EndTime, v.BotCheck = &stock.Int64, &begin.Time, &end.Time, check.String
		}
		if window.Int64 > 0 {
			v.Admission = &Admission{Mode: sale.AdmissionDraw, WindowSeconds: int(window.Int64)}
		}
		list = append(list, v)
	}
	return list, rows.Err()
}

// BotCheckModes reads each sale's bot check from its row (botcheck.Modes).
// It is apart from Vouchers, which writes the mode through the bot checks,
// so that the bot checks can be built first and Vouchers with them.
type BotCheckModes struct{ DB *sql.DB }

// BotCheck is flash-sale voucher id's bot check as its row has it; found
// is false when there is no such row.
func (bm BotCheckModes) BotCheck(ctx context.Context, id int64) (botcheck.Mode, bool, error) {
	var s string
	err := bm.DB.QueryRowContext(ctx, "SELECT bot_check FROM tb_seckill_voucher WHERE voucher_id = ?", id).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("bot check of voucher %d: %w", id, err)
	}
	m, err := botcheck.ParseMode(s)
	if err != nil {
		return "", false, fmt.Errorf("voucher %d's row: %w", id, err)
	}
	return m, true, nil
}

// Change is an admin's change to a flash-sale voucher: units added (or
// removed, when negative) and a new window; nil keeps a bound.
type Change struct {
	AddStock  int64      `json:"addStock"`
	BeginTime *time.Time `json:"beginTime"`
	EndTime   *time.Time `json:"endTime"`
}

// Validate bounds the change's numbers, before any store is asked.
func (c Change) Validate() error {
	if c.AddStock < -MaxStock || c.AddStock > MaxStock {
		return ErrInvalid.With("addStock must be from -100000000 to 100000000")
	}
	if c.AddStock == 0 && c.BeginTime == nil && c.EndTime == nil {
		return ErrInvalid.With("nothing to change: send addStock, beginTime or endTime")
	}
	return nil
}

// ErrStoresDisagree: a change reached one store and could not be undone
// in it; the message says how they differ. Redis is rebuilt from MySQL by
// `seckillctl reconcile <id>`.
var ErrStoresDisagree = apperr.New(apperr.Unavailable, "the change is only half done")

// ChangeSale applies c to both stores in the order that never lets the
// gate sell a unit MySQL does not have. An increase goes to MySQL first:
// a unit the gate sells the moment Redis has it must already be there. A
// decrease, or a window change alone, goes to Redis first: Redis's stock is
// the lower one while orders are on their way, so if Redis can give units
// up, MySQL can. When the second step fails the first is undone; when the
// undo fails too, ErrStoresDisagree says by how much, and that `seckillctl
// reconcile` mends it. The gate sees the new stock and window at once; an
// API instance that saw the voucher sold out keeps answering so for at most
// its sold-out TTL.
func (vs *Vouchers) ChangeSale(ctx context.Context, id int64, c Change) (stock int64, err error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	var begin, end time.Time
	var current, drawWindow int64
	if err := vs.DB.QueryRowContext(ctx, "SELECT begin_time, end_time, stock, admission_window FROM tb_seckill_voucher WHERE voucher_id = ?", id).
		Scan(&begin, &end, &current, &drawWindow); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, ErrNotFound
		}
		return 0, fmt.Errorf("read voucher %d: %w", id, err)
	}
	if drawWindow > 0 && c.BeginTime != nil && !c.BeginTime.Equal(begin) {
		// Moved, the window would take other entrants than those told
		// when the draw is, and a draw made would not be made again.
		return 0, ErrConflict.With("a sale with a draw keeps its beginTime: its draw is at beginTime + windowSeconds")
	}
	old := window{begin, end}
	var next window
	if c.BeginTime != nil {
		next.begin, begin = *c.BeginTime, *c.BeginTime
	}
	if c.EndTime != nil {
		next.end, end = *c.EndTime, *c.EndTime
	}
	if begin.Before(minTime) || end.After(maxTime) {
		return 0, ErrWindow.With("beginTime and endTime must lie between 1970-01-02 and 2038-01-18")
	}
	if !end.After(begin) {
		if c.BeginTime != nil && c.EndTime != nil {
			return 0, ErrWindow.With("endTime must be after beginTime")
		}
		return 0, ErrConflict.With("the window would end before it begins: endTime must be after beginTime, with the bound the sale keeps")
	}
	if drawAt := begin.Add(time.Duration(drawWindow) * time.Second); drawWindow > 0 && !drawAt.Before(end) {
		return 0, ErrConflict.With("a sale with a draw ends after its draw, at %s", drawAt.UTC().Format(time.RFC3339))
	}
	if current+c.AddStock > MaxStock {
		return 0, ErrConflict.With("addStock: the stock would be %d, above 100000000", current+c.AddStock)
	}
	if c.AddStock > 0 {
		return vs.restock(ctx, id, c.AddStock, next, old)
	}
	return vs.reduce(ctx, id, c.AddStock, next, old)
}

// window is a sale's bounds; a zero bound is left as it is.
type window struct{ begin, end time.Time }

func (vs *Vouchers) restock(ctx context.Context, id, n int64, next, old window) (int64, error) {
	// The admin's hanging up does not cut the UPDATE short: its outcome
	// would be unknown without the driver saying so.
	if err := vs.changeMySQL(context.WithoutCancel(ctx), id, n, next); err != nil {
		if mysqldb.OutcomeUnknown(err) {
			// MySQL may have the units: Redis gets none, so that it never
			// sells one MySQL does not have.
			return 0, ErrStoresDisagree.With("the database's answer to adding %d units to voucher %d was lost: whether MySQL has them is unknown, and they are not on sale: run `seckillctl reconcile %d`", n, id, id).Wrap(err)
		}
		return 0, err
	}
	stock, err := vs.Sale.Adjust(ctx, id, n, next.begin, next.end)
	if err == nil {
		return stock, nil
	}
	if !errors.Is(err, sale.ErrNotWarmed) && !errors.Is(err, sale.ErrFrozen) && !errors.Is(err, sale.ErrBucketAway) {
		// Redis may or may not have taken it (a timeout): MySQL keeps the
		// units, which is safe, since Redis never sells more than MySQL has.
		return 0, ErrStoresDisagree.With("MySQL has the %d new units of voucher %d, Redis did not confirm them, so they may not be on sale: run `seckillctl reconcile %d`", n, id, id).Wrap(err)
	}
	if undoErr := vs.changeMySQL(context.WithoutCancel(ctx), id, -n, old); undoErr != nil {
		return 0, ErrStoresDisagree.With("Redis refused the change to voucher %d (%s) and undoing it in MySQL failed: MySQL has %d units more than Redis, not on sale: run `seckillctl reconcile %d`",
			id, apperr.CodeOf(err), n, id).Wrap(errors.Join(err, undoErr))
	}
	return 0, err
}

func (vs *Vouchers) reduce(ctx context.Context, id, n int64, next, old window) (int64, error) {
	stock, err := vs.Sale.Adjust(ctx, id, n, next.begin, next.end)
	switch {
	case errors.Is(err, sale.ErrChangeUnknown):
		// Redis may hold the change in part: MySQL is left as it was, and
		// the check compares them.
		return 0, ErrStoresDisagree.With("Redis did not confirm the change to voucher %d, which it may hold in part; MySQL is unchanged: run `seckillctl reconcile %d`", id, id).Wrap(err)
	case err != nil:
		return stock, err
	}
	if err := vs.changeMySQL(context.WithoutCancel(ctx), id, n, next); err != nil {
		if mysqldb.OutcomeUnknown(err) {
			// MySQL may have taken the units away: undone in Redis, they
			// could be sold without MySQL having them.
			return 0, ErrStoresDisagree.With("the database's answer to removing %d units of voucher %d was lost: Redis has them removed, so none is sold, and whether MySQL does is unknown: run `seckillctl reconcile %d`", -n, id, id).Wrap(err)
		}
		if _, undoErr := vs.Sale.Adjust(context.WithoutCancel(ctx), id, -n, old.begin, old.end); undoErr != nil {
			return 0, ErrStoresDisagree.With("MySQL refused the change to voucher %d and undoing it in Redis failed: Redis has %d units fewer than MySQL (not on sale) or the old window: run `seckillctl reconcile %d`",
				id, -n, id).Wrap(errors.Join(err, undoErr))
		}
		return 0, fmt.Errorf("change voucher %d in MySQL: %w", id, err)
	}
	return stock, nil
}

// changeMySQL adds n units (n may be negative: never below zero) and moves
// the window's non-zero bounds.
func (vs *Vouchers) changeMySQL(ctx context.Context, id, n int64, w window) error {
	res, err := vs.DB.ExecContext(ctx, `UPDATE tb_seckill_voucher SET stock = stock + ?,
		begin_time = COALESCE(?, begin_time), end_time = COALESCE(?, end_time)
		WHERE voucher_id = ? AND stock + ? BETWEEN 0 AND ?`, n, nullTime(w.begin), nullTime(w.end), id, n, MaxStock)
	if err != nil {
		return fmt.Errorf("change voucher %d in MySQL: %w", id, err)
	}
	if rows, _ := res.RowsAffected(); rows == 1 {
		return nil
	}
	// MySQL counts changed rows: a window change to the window the row
	// already has (no units) matched it and changed nothing, which is done,
	// not refused. A change of units always changes a row it matched.
	var stock int64
	err = vs.DB.QueryRowContext(ctx, "SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?", id).Scan(&stock)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("change voucher %d in MySQL: %w", id, err)
	case n == 0:
		return nil
	}
	return ErrConflict.With("addStock: the stock would be %d, outside 0..%d", stock+n, MaxStock)
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}
