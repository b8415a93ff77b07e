package user

// SiteDayKey is the key of the site's code budget for today, as Issue
// counts it.
func (c *Codes) SiteDayKey() string {
	return c.keys.siteDay(c.now().In(c.policy.Day).Format("20060102"))
}
