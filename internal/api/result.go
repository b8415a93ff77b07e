package api

// Result is the course's response envelope: every JSON answer of the API is
// one. Fields that are empty are omitted, as the course's client expects.
type Result struct {
	Success  bool   `json:"success"`
	ErrorMsg string `json:"errorMsg,omitempty"`
	Data     any    `json:"data,omitempty"`
	Total    *int64 `json:"total,omitempty"`
}

// OK wraps data in a successful Result.
func OK(data any) Result { return Result{Success: true, Data: data} }

// Fail is a business outcome the user should read: HTTP 200, success false.
func Fail(msg string) Result { return Result{Success: false, ErrorMsg: msg} }
