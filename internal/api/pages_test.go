package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/schema"
)

// The routes behind the course's home page, shop list and "my page", on
// the seeded demo data and notes of the test's own: the hot list by likes
// with the author's name and icon, ten a page; shops of a type five a page
// and by name ten; a user's details and public face; and what bad input
// and a missing login get.
func TestCoursePages(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	ctx := t.Context()
	if err := schema.Seed(ctx, a.MySQL.DB); err != nil {
		t.Fatal(err)
	}
	token := a.loggedIn(t, randomPhone())
	auth := map[string]string{"authorization": token}
	var me struct{ ID int64 }
	if res := call(t, "GET", a.URL+"/user/me", auth, nil); json.Unmarshal(res.Body.Data, &me) != nil || me.ID == 0 {
		t.Fatalf("me: %s", res.Raw)
	}
	// Twelve notes of this user, liked 1000..1011: the first hot page is
	// the ten most liked of them, most liked first; the seeded notes (under
	// 100 likes) come after.
	for i := range 12 {
		if _, err := a.MySQL.DB.ExecContext(ctx, `INSERT INTO tb_blog (shop_id, user_id, title, images, content, liked) VALUES (1, ?, ?, '/imgs/a.jpg,/imgs/b.jpg', 'x', ?)`,
			me.ID, fmt.Sprintf("note %d", i), 1000+i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.MySQL.DB.ExecContext(ctx, `INSERT INTO tb_user_info (user_id, city, introduce, gender, birthday, level) VALUES (?, '杭州', 'hi', 1, '2001-02-03', 3)`, me.ID); err != nil {
		t.Fatal(err)
	}
	var nick string
	if err := a.MySQL.DB.QueryRowContext(ctx, "SELECT nick_name FROM tb_user WHERE id = ?", me.ID).Scan(&nick); err != nil {
		t.Fatal(err)
	}

	type blogRow struct {
		ID     int64
		UserID int64
		Name   string
		Icon   string
		Title  string
		Images string
		Liked  int
	}
	list := func(route string, header map[string]string) ([]map[string]any, response) {
		t.Helper()
		res := call(t, "GET", a.URL+route, header, nil)
		var rows []map[string]any
		if res.Status != 200 || !res.Body.Success || json.Unmarshal(res.Body.Data, &rows) != nil {
			t.Fatalf("GET %s: %d %s", route, res.Status, res.Raw)
		}
		return rows, res
	}
	blogs := func(route string, header map[string]string) []blogRow {
		t.Helper()
		_, res := list(route, header)
		var rows []blogRow
		if err := json.Unmarshal(res.Body.Data, &rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}

	hot := blogs("/blog/hot", nil) // no login needed, page 1 by default
	if len(hot) != 10 {
		t.Fatalf("hot page 1 has %d notes, want 10", len(hot))
	}
	for i, b := range hot {
		if b.Liked != 1011-i || b.Name != nick || b.UserID != me.ID || !strings.Contains(b.Images, ",") {
			t.Fatalf("hot[%d] = %+v, want liked %d by %q", i, b, 1011-i, nick)
		}
	}
	page2 := blogs("/blog/hot?current=2", nil)
	if len(page2) < 3 || page2[0].Liked != 1001 || page2[1].Liked != 1000 || page2[2].Liked >= 1000 || page2[2].Name == "" {
		t.Fatalf("hot page 2 = %+v, want the last two of the test's notes, then the seeded ones with their authors", page2)
	}
	if far := blogs("/blog/hot?current=10000", nil); len(far) != 0 {
		t.Fatalf("hot page 10000 = %+v, want an empty list", far)
	}
	mine := blogs("/blog/of/me", auth)
	if len(mine) != 10 || mine[0].Title != "note 11" || mine[0].UserID != me.ID {
		t.Fatalf("my notes = %+v, want ten, newest first", mine)
	}
	if rest := blogs("/blog/of/me?current=2", auth); len(rest) != 2 {
		t.Fatalf("my notes page 2 has %d, want 2", len(rest))
	}

	shops, _ := list("/shop/of/type?typeId=1&current=1&x=120.149993&y=30.334229", nil)
	if len(shops) != 5 {
		t.Fatalf("shops of type 1 page 1: %d, want 5 (the course's page)", len(shops))
	}
	for i, sh := range shops {
		if sh["typeId"] != float64(1) || sh["id"] != float64(i+1) {
			t.Fatalf("shops of type 1[%d] = %v, want shop %d of type 1", i, sh, i+1)
		}
	}
	if ktv, _ := list("/shop/of/type?typeId=2", nil); len(ktv) == 0 || ktv[0]["typeId"] != float64(2) {
		t.Fatalf("shops of type 2: %v", ktv)
	}
	if named, _ := list("/shop/of/name?name="+url.QueryEscape("茶餐厅"), nil); len(named) != 1 || named[0]["name"] != "103茶餐厅" {
		t.Fatalf("shops named 茶餐厅: %v", named)
	}
	var shopCount int
	if err := a.MySQL.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM tb_shop").Scan(&shopCount); err != nil {
		t.Fatal(err)
	}
	if all, _ := list("/shop/of/name", nil); len(all) != min(shopCount, 10) {
		t.Fatalf("shops of any name, page 1: %d, want %d", len(all), min(shopCount, 10))
	}
	if none, _ := list("/shop/of/name?name=%25", nil); len(none) != 0 {
		t.Fatalf("shops named %%: %v, want none (the name is matched literally)", none)
	}

	res := call(t, "GET", a.URL+"/user/info/"+strconv.FormatInt(me.ID, 10), auth, nil)
	var info map[string]any
	if res.Status != 200 || json.Unmarshal(res.Body.Data, &info) != nil || info["city"] != "杭州" || info["gender"] != true ||
		info["birthday"] != "2001-02-03" || info["level"] != float64(3) || info["userId"] != float64(me.ID) {
		t.Fatalf("user info: %d %s", res.Status, res.Raw)
	}
	other := a.loggedIn(t, randomPhone())
	var otherMe struct{ ID int64 }
	json.Unmarshal(call(t, "GET", a.URL+"/user/me", map[string]string{"authorization": other}, nil).Body.Data, &otherMe)
	if res := call(t, "GET", a.URL+"/user/info/"+strconv.FormatInt(otherMe.ID, 10), auth, nil); res.Status != 200 || !res.Body.Success || !noData(res) {
		t.Fatalf("info of a user without details: %d %s, want success with no data", res.Status, res.Raw)
	}
	res = call(t, "GET", a.URL+"/user/"+strconv.FormatInt(me.ID, 10), auth, nil)
	var face map[string]any
	if res.Status != 200 || json.Unmarshal(res.Body.Data, &face) != nil || face["nickName"] != nick || face["id"] != float64(me.ID) || len(face) != 3 {
		t.Fatalf("user by id: %d %s, want id, nickName and icon only", res.Status, res.Raw)
	}
	if res := call(t, "GET", a.URL+"/user/9007199254740991", auth, nil); res.Status != 200 || !res.Body.Success || !noData(res) {
		t.Fatalf("an id that is no user: %d %s, want success with no data", res.Status, res.Raw)
	}

	for _, tc := range []struct {
		route  string
		header map[string]string
		status int
	}{
		{"/blog/hot?current=0", nil, 400},
		{"/blog/hot?current=10001", nil, 400},
		{"/blog/hot?current=abc", nil, 400},
		{"/blog/of/me", nil, 401},
		{"/blog/of/me?current=-1", auth, 400},
		{"/shop/of/type", nil, 400},
		{"/shop/of/type?typeId=x", nil, 400},
		{"/shop/of/type?typeId=0", nil, 400},
		{"/shop/of/type?typeId=1&x=east", nil, 400},
		{"/shop/of/type?typeId=1&x=&x=false&x=false&y=0.0", nil, 400},
		{"/shop/of/type?typeId=1&x=", nil, 400},
		{"/shop/of/type?typeId=1&typeId=x", nil, 400},
		{"/shop/of/type?typeId=1&current=1&current=x", nil, 400},
		{"/shop/of/type?typeId=1&current=99999999999", nil, 400},
		{"/shop/of/name?name=" + strings.Repeat("a", 129), nil, 400},
		{"/user/info/1", nil, 401},
		{"/user/info/abc", auth, 400},
		{"/user/1", nil, 401},
		{"/user/0", auth, 400},
	} {
		res := call(t, "GET", a.URL+tc.route, tc.header, nil)
		if res.Status != tc.status || res.Body.Success || res.Body.ErrorMsg == "" {
			t.Errorf("GET %s: %d %s, want %d with the envelope's errorMsg", tc.route, res.Status, res.Raw, tc.status)
		}
	}
}

// noData is an envelope without data, as the course's Result.ok().
func noData(res response) bool { return len(res.Body.Data) == 0 || string(res.Body.Data) == "null" }
