package apiwire

// Pagination. Every list takes ?limit= (default DefaultPageLimit, at most
// MaxPageLimit) and ?cursor=, and answers with next_cursor: pass it back
// as ?cursor= for the next page; an empty next_cursor is the last page.
// Cursors are opaque to clients. A page may hold fewer than limit items
// while more follow (lists that filter bound the work of one request).
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)
