// Package shop is the course's shops and shop types, read through the
// cache and written to MySQL.
package shop

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/apperr"
	"github.com/seckill/seckill/internal/cache"
)

// Shop is the course's Shop as its client reads it. Images is the
// comma-separated list; Score is out of 50.
type Shop struct {
	ID        int64   `json:"id"`
	Name      string  `json:"name"`
	TypeID    int64   `json:"typeId"`
	Images    string  `json:"images"`
	Area      string  `json:"area,omitempty"`
	Address   string  `json:"address"`
	X         float64 `json:"x"`
	Y         float64 `json:"y"`
	AvgPrice  *int64  `json:"avgPrice,omitempty"`
	Sold      int     `json:"sold"`
	Comments  int     `json:"comments"`
	Score     int     `json:"score"`
	OpenHours string  `json:"openHours,omitempty"`
}

// Type is a shop type.
type Type struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Icon string `json:"icon"`
	Sort int    `json:"sort"`
}

// The outcomes callers branch on.
var (
	ErrNotFound = apperr.New(apperr.Outcome, "shop not found")
	ErrInvalid  = apperr.New(apperr.Invalid, "invalid shop")
)

// The bounds of a shop's numbers: ids a JavaScript client keeps exact,
// counts within the INT UNSIGNED columns, coordinates on the globe.
const (
	maxID       = 1<<53 - 1
	maxCount    = 1<<32 - 1
	maxAvgPrice = 100_000_000
)

// Validate checks what the columns would not, and bounds every number.
func (s Shop) Validate() error {
	bad := func(why string) error { return ErrInvalid.With("%s", why) }
	switch {
	case s.Name == "" || utf8.RuneCountInString(s.Name) > 128:
		return bad("name must have 1 to 128 characters")
	case s.ID < 0 || s.ID > maxID:
		return bad("id must be a positive id up to 9007199254740991")
	case s.TypeID <= 0 || s.TypeID > maxID:
		return bad("typeId must be a positive id up to 9007199254740991")
	case utf8.RuneCountInString(s.Images) > 1024 || utf8.RuneCountInString(s.Address) > 255 || utf8.RuneCountInString(s.Area) > 128 || utf8.RuneCountInString(s.OpenHours) > 32:
		return bad("images, address, area or openHours too long")
	case s.Score < 0 || s.Score > 50:
		return bad("score is out of 50")
	case s.Sold < 0 || s.Sold > maxCount:
		return bad("sold must be from 0 to 4294967295")
	case s.Comments < 0 || s.Comments > maxCount:
		return bad("comments must be from 0 to 4294967295")
	case s.AvgPrice != nil && (*s.AvgPrice < 0 || *s.AvgPrice > maxAvgPrice):
		return bad("avgPrice must be from 0 to 100000000 (yuan)")
	case s.X < -180 || s.X > 180:
		return bad("x must be a longitude, from -180 to 180")
	case s.Y < -90 || s.Y > 90:
		return bad("y must be a latitude, from -90 to 90")
	}
	return nil
}

// Keys are the shop family's cache keys, the one definition that the shop
// service (which writes them) and the binlog invalidator (which deletes
// them) share: cache:shop:{id} and cache:shop-type, as the course names
// them, under the deployment's prefix.
type Keys struct{ Prefix string }

// Shop is the key of shop id.
func (k Keys) Shop(id int64) string {
	return k.Prefix + "cache:shop:{" + strconv.FormatInt(id, 10) + "}"
}

// Types is the key of the shop-type list.
func (k Keys) Types() string { return k.Prefix + "cache:shop-type" }

// Filter is the key of the Bloom filter of shop ids.
func (k Keys) Filter() string { return k.Prefix + "shop:ids:bloom" }

// Patterns match every key of the family, for a flush.
func (k Keys) Patterns() []string { return []string{k.Prefix + "cache:shop:*", k.Types()} }

// Service reads shops through the cache and writes them to MySQL.
type Service struct {
	db     *sql.DB
	shops  *cache.Cache[Shop]
	types  *cache.Cache[[]Type]
	logger *slog.Logger
	// Filter stops ids that were never shops before the cache; nil lets
	// every id through.
	Filter *Filter
}

// NewService caches shops and the type list with their strategies.
func NewService(db *sql.DB, rdb redis.UniversalClient, keys Keys, shops, types cache.Strategy, logger *slog.Logger, m *cache.Metrics) *Service {
	return &Service{
		db: db, logger: logger,
		shops: cache.New[Shop](rdb, "shop", func(id string) string {
			n, _ := strconv.ParseInt(id, 10, 64)
			return keys.Shop(n)
		}, shops, logger, m),
		types: cache.New[[]Type](rdb, "shop-type", func(string) string { return keys.Types() }, types, logger, m),
	}
}

// Get is shop id, or ErrNotFound.
func (s *Service) Get(ctx context.Context, id int64) (Shop, error) {
	if s.Filter != nil {
		maybe, err := s.Filter.MayContain(ctx, id)
		if err != nil {
			// The cache and MySQL still answer right, at their cost.
			s.logger.DebugContext(ctx, "shop filter unavailable; asking the cache", "err", err)
		}
		if !maybe {
			return Shop{}, ErrNotFound
		}
	}
	v, found, err := s.shops.Get(ctx, strconv.FormatInt(id, 10), func(ctx context.Context) (Shop, bool, error) {
		return s.load(ctx, id)
	})
	if err != nil {
		return Shop{}, err
	}
	if !found {
		return Shop{}, ErrNotFound
	}
	return v, nil
}

const shopColumns = "id, name, type_id, images, area, address, x, y, avg_price, sold, comments, score, open_hours"

// scanShop reads a row of shopColumns.
func scanShop(row interface{ Scan(...any) error }) (Shop, error) {
	var sh Shop
	var area, hours sql.NullString
	var avg sql.NullInt64
	if err := row.Scan(&sh.ID, &sh.Name, &sh.TypeID, &sh.Images, &area, &sh.Address, &sh.X, &sh.Y,
		&avg, &sh.Sold, &sh.Comments, &sh.Score, &hours); err != nil {
		return Shop{}, err
	}
	sh.Area, sh.OpenHours = area.String, hours.String
	if avg.Valid {
		sh.AvgPrice = &avg.Int64
	}
	return sh, nil
}

func (s *Service) load(ctx context.Context, id int64) (Shop, bool, error) {
	sh, err := scanShop(s.db.QueryRowContext(ctx, "SELECT "+shopColumns+" FROM tb_shop WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Shop{}, false, nil
	}
	if err != nil {
		return Shop{}, false, fmt.Errorf("load shop %d: %w", id, err)
	}
	return sh, true, nil
}

// The course's page sizes (SystemConstants): shops of a type come five at
// a time, a search by name ten; MaxPage bounds the OFFSET.
const (
	TypePageSize = 5
	NamePageSize = 10
	MaxPage      = 10_000
)

// ErrPage is a page number out of 1..MaxPage.
var ErrPage = apperr.Errorf(apperr.Invalid, "current: want a page number from 1 to %d", MaxPage)

// OfType is page current of the shops of a type, by id, as the course
// lists them when no coordinates are sent.
func (s *Service) OfType(ctx context.Context, typeID int64, current int) ([]Shop, error) {
	if typeID <= 0 || typeID > maxID {
		return nil, apperr.Errorf(apperr.Invalid, "typeId: want a positive shop type id")
	}
	if current < 1 || current > MaxPage {
		return nil, ErrPage
	}
	return s.list(ctx, "the shops of a type", "SELECT "+shopColumns+" FROM tb_shop WHERE type_id = ? ORDER BY id LIMIT ? OFFSET ?",
		typeID, TypePageSize, (current-1)*TypePageSize)
}

// OfName is page current of the shops whose name has name in it (every
// shop for an empty name); name is matched literally, % and _ included.
func (s *Service) OfName(ctx context.Context, name string, current int) ([]Shop, error) {
	if utf8.RuneCountInString(name) > 128 {
		return nil, apperr.Errorf(apperr.Invalid, "name: at most 128 bytes")
	}
	if current < 1 || current > MaxPage {
		return nil, ErrPage
	}
	pattern := "%" + likeEscaper.Replace(name) + "%"
	return s.list(ctx, "the shops by name", "SELECT "+shopColumns+` FROM tb_shop WHERE name LIKE ? ESCAPE '!' ORDER BY id LIMIT ? OFFSET ?`,
		pattern, NamePageSize, (current-1)*NamePageSize)
}

// likeEscaper makes a LIKE pattern match its text literally, with ! as the
// escape character (a backslash would mean different things under MySQL's
// NO_BACKSLASH_ESCAPES).
var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

func (s *Service) list(ctx context.Context, what, query string, args ...any) ([]Shop, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer rows.Close()
	shops := []Shop{}
	for rows.Next() {
		sh, err := scanShop(rows)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", what, err)
		}
		shops = append(shops, sh)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return shops, nil
}

// Types is the shop-type list, by sort.
func (s *Service) Types(ctx context.Context) ([]Type, error) {
	v, _, err := s.types.Get(ctx, "", func(ctx context.Context) ([]Type, bool, error) {
		rows, err := s.db.QueryContext(ctx, "SELECT id, name, icon, sort FROM tb_shop_type ORDER BY sort, id")
		if err != nil {
			return nil, false, fmt.Errorf("load shop types: %w", err)
		}
		defer rows.Close()
		list := []Type{}
		for rows.Next() {
			var t Type
			if err := rows.Scan(&t.ID, &t.Name, &t.Icon, &t.Sort); err != nil {
				return nil, false, fmt.Errorf("load shop types: %w", err)
			}
			list = append(list, t)
		}
		return list, true, rows.Err()
	})
	return v, err
}

// Create inserts a shop and returns its id.
func (s *Service) Create(ctx context.Context, sh Shop) (int64, error) {
	if err := sh.Validate(); err != nil {
		return 0, err
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO tb_shop (name, type_id, images, area, address, x, y, avg_price, sold, comments, score, open_hours)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, sh.Name, sh.TypeID, sh.Images, nullable(sh.Area), sh.Address, sh.X, sh.Y,
		sh.AvgPrice, sh.Sold, sh.Comments, sh.Score, nullable(sh.OpenHours))
	if err != nil {
		return 0, fmt.Errorf("insert shop: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert shop: %w", err)
	}
	// Known to the filter at once; the binlog follower adds it too.
	if s.Filter != nil {
		if err := s.Filter.Add(ctx, id); err != nil {
			s.logger.WarnContext(ctx, "shop created; adding it to the shop filter failed, the binlog follower will", "shop", id, "err", err)
		}
	}
	// A null marker may sit under the new id (someone asked for it before):
	// drop it, as for any write.
	return id, s.shops.Invalidate(ctx, strconv.FormatInt(id, 10))
}

// Update writes the shop, then deletes its cache entry (cache-aside's order:
// database first, then the cache). The binlog invalidator deletes it again,
// which covers writes that bypass this service and a delete that failed.
func (s *Service) Update(ctx context.Context, sh Shop) error {
	if err := sh.Validate(); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE tb_shop SET name = ?, type_id = ?, images = ?, area = ?, address = ?, x = ?, y = ?,
		avg_price = ?, sold = ?, comments = ?, score = ?, open_hours = ? WHERE id = ?`, sh.Name, sh.TypeID, sh.Images, nullable(sh.Area),
		sh.Address, sh.X, sh.Y, sh.AvgPrice, sh.Sold, sh.Comments, sh.Score, nullable(sh.OpenHours), sh.ID)
	if err != nil {
		return fmt.Errorf("update shop %d: %w", sh.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var exists int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_shop WHERE id = ?", sh.ID).Scan(&exists); err != nil {
			return fmt.Errorf("update shop %d: %w", sh.ID, err)
		}
		if exists == 0 {
			return ErrNotFound
		}
	}
	if err := s.shops.Invalidate(ctx, strconv.FormatInt(sh.ID, 10)); err != nil {
		s.logger.WarnContext(ctx, "shop updated; deleting its cache entry failed, the binlog invalidator will", "shop", sh.ID, "err", err)
	}
	return nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
