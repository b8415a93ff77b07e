// Package blog serves the course's shop-visit notes (tb_blog) as its web
// client's home page and "my page" read them: the hot list by likes, with
// each author's name and icon, and a user's own notes, a page at a time.
package blog

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/apperr"
)

// PageSize is the course's page of notes (SystemConstants.MAX_PAGE_SIZE).
const PageSize = 10

// MaxPage bounds the page number: OFFSET grows with it, and nobody scrolls
// through a hundred thousand notes.
const MaxPage = 10_000

// ErrPage is a page number out of 1..MaxPage.
var ErrPage = apperr.Errorf(apperr.Invalid, "current: want a page number from 1 to %d", MaxPage)

// Blog is the course's Blog as its client reads it. Name and Icon are the
// author's, filled in the hot list only, as the course does; the course's
// isLike is left out: there are no likes to read here.
type Blog struct {
	ID         int64     `json:"id"`
	ShopID     int64     `json:"shopId"`
	UserID     int64     `json:"userId"`
	Name       string    `json:"name,omitempty"`
	Icon       string    `json:"icon,omitempty"`
	Title      string    `json:"title"`
	Images     string    `json:"images"`
	Content    string    `json:"content"`
	Liked      int64     `json:"liked"`
	Comments   *int64    `json:"comments"`
	CreateTime time.Time `json:"createTime"`
	UpdateTime time.Time `json:"updateTime"`
}

// Store reads tb_blog.
type Store struct{ db *sql.DB }

// NewStore is tb_blog on db.
func NewStore(db *sql.DB) *Store { return &Store{db: db} }

const columns = "b.id, b.shop_id, b.user_id, b.title, b.images, b.content, COALESCE(b.liked, 0), b.comments, b.create_time, b.update_time"

// Hot is page current of the notes by likes, most liked first (ties by
// id, so that pages do not overlap), each with its author's name and icon.
func (s *Store) Hot(ctx context.Context, current int) ([]Blog, error) {
	if current < 1 || current > MaxPage {
		return nil, ErrPage
	}
	return s.list(ctx, "hot notes", `SELECT `+columns+`, COALESCE(u.nick_name, ''), COALESCE(u.icon, '')
		FROM tb_blog b LEFT JOIN tb_user u ON u.id = b.user_id
		ORDER BY b.liked DESC, b.id DESC LIMIT ? OFFSET ?`, true, PageSize, (current-1)*PageSize)
}

// OfUser is page current of the user's own notes, newest first.
func (s *Store) OfUser(ctx context.Context, userID int64, current int) ([]Blog, error) {
	if current < 1 || current > MaxPage {
		return nil, ErrPage
	}
	return s.list(ctx, "the user's notes", `SELECT `+columns+` FROM tb_blog b WHERE b.user_id = ?
		ORDER BY b.id DESC LIMIT ? OFFSET ?`, false, userID, PageSize, (current-1)*PageSize)
}

func (s *Store) list(ctx context.Context, what, query string, withAuthor bool, args ...any) ([]Blog, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer rows.Close()
	blogs := []Blog{}
	for rows.Next() {
		var b Blog
		var comments sql.NullInt64
		dest := []any{&b.ID, &b.ShopID, &b.UserID, &b.Title, &b.Images, &b.Content, &b.Liked, &comments, &b.CreateTime, &b.UpdateTime}
		if withAuthor {
			dest = append(dest, &b.Name, &b.Icon)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("read %s: %w", what, err)
		}
		if comments.Valid {
			b.Comments = &comments.Int64
		}
		blogs = append(blogs, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return blogs, nil
}
