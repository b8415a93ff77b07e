package user

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Users is tb_user.
type Users struct{ db *sql.DB }

// NewUsers is the user table on db.
func NewUsers(db *sql.DB) *Users { return &Users{db: db} }

// Reachable fails when MySQL does not answer: a login asks it before it
// uses up the code, so that a MySQL outage leaves the code for the retry.
func (u *Users) Reachable(ctx context.Context) error {
	if err := u.db.PingContext(ctx); err != nil {
		return fmt.Errorf("the user table: %w", err)
	}
	return nil
}

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

// Info is the course's UserInfo (tb_user_info): the details "my page"
// shows. Gender is a boolean as in the course (false: male); Level is the
// 0–9 membership level the column holds (the course's entity reads it as
// a boolean, which loses it); Birthday is a date, YYYY-MM-DD.
type Info struct {
	UserID    int64   `json:"userId"`
	City      string  `json:"city"`
	Introduce *string `json:"introduce"`
	Fans      int64   `json:"fans"`
	Followee  int64   `json:"followee"`
	Gender    bool    `json:"gender"`
	Birthday  *string `json:"birthday"`
	Credits   int64   `json:"credits"`
	Level     int     `json:"level"`
}

// Info is the details of user id; nil when the user has none yet (the
// course answers success with no data then).
func (u *Users) Info(ctx context.Context, id int64) (*Info, error) {
	var in Info
	var city, introduce sql.NullString
	var fans, followee, credits, gender, level sql.NullInt64
	var birthday sql.NullTime
	err := u.db.QueryRowContext(ctx, `SELECT user_id, city, introduce, fans, followee, gender, birthday, credits, level
		FROM tb_user_info WHERE user_id = ?`, id).Scan(&in.UserID, &city, &introduce, &fans, &followee, &gender, &birthday, &credits, &level)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find the details of user %d: %w", id, err)
	}
	in.City, in.Fans, in.Followee, in.Credits = city.String, fans.Int64, followee.Int64, credits.Int64
	in.Gender, in.Level = gender.Int64 != 0, int(level.Int64)
	if introduce.Valid {
		in.Introduce = &introduce.String
	}
	if birthday.Valid {
		d := birthday.Time.Format(time.DateOnly)
		in.Birthday = &d
	}
	return &in, nil
}
