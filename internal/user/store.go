package user

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
)

// Users is tb_user.
type Users struct{ db *sql.DB }

// NewUsers is the user table on db.
func NewUsers(db *sql.DB) *Users { return &Users{db: db} }

// nickNamePrefix and a random suffix make the course's default nickname.
const nickNamePrefix = "user_"

// FindOrCreate returns the user with phone, creating one with a random
// nickname on a first login. Two first logins at once create one user:
// the UNIQUE phone index keeps the second insert out.
func (u *Users) FindOrCreate(ctx context.Context, phone string) (User, error) {
	usr, err := u.byPhone(ctx, phone)
	if err == nil {
		return usr, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return User{}, err
	}
	if _, err := u.db.ExecContext(ctx, "INSERT IGNORE INTO tb_user (phone, nick_name) VALUES (?, ?)",
		phone, nickNamePrefix+rand.Text()[:10]); err != nil {
		return User{}, fmt.Errorf("create user: %w", err)
	}
	usr, err = u.byPhone(ctx, phone)
	if err != nil {
		return User{}, fmt.Errorf("read new user: %w", err)
	}
	return usr, nil
}

func (u *Users) byPhone(ctx context.Context, phone string) (User, error) {
	var usr User
	err := u.db.QueryRowContext(ctx, "SELECT id, nick_name, icon FROM tb_user WHERE phone = ?", phone).
		Scan(&usr.ID, &usr.NickName, &usr.Icon)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return User{}, err
		}
		return User{}, fmt.Errorf("find user by phone: %w", err)
	}
	return usr, nil
}

// ErrNoUser is a user id with no row: deleted since its token was issued.
var ErrNoUser = errors.New("no such user")

// ByID is the user with id, or ErrNoUser.
func (u *Users) ByID(ctx context.Context, id int64) (User, error) {
	var usr User
	err := u.db.QueryRowContext(ctx, "SELECT id, nick_name, icon FROM tb_user WHERE id = ?", id).
		Scan(&usr.ID, &usr.NickName, &usr.Icon)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, ErrNoUser
	}
	if err != nil {
		return User{}, fmt.Errorf("find user %d: %w", id, err)
	}
	return usr, nil
}
