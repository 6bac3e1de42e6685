package ledger

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzMsgBodyFastMatchesStrict: decodeMsgBody's fast path (json.Unmarshal,
// then the canonical check) takes exactly the bodies the strict decoder
// takes, as the same message, for every message type.
func FuzzMsgBodyFastMatchesStrict(f *testing.F) {
	types := MsgTypes()
	for i, t := range types {
		if canon, err := json.Marshal(newMsg(t)); err == nil { // some zero messages have no JSON
			f.Add(uint16(i), canon)
		}
	}
	send := uint16(0)
	for i, t := range types {
		if t == MsgTypeSend {
			send = uint16(i)
		}
	}
	for _, body := range []string{
		`{"to":"gpu1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqgvxq5xe","amount":10}`,
		`{"to":"","amount":10}`,
		`{"amount":10,"to":""}`,
		`{"to":"","amount":10,"extra":1}`,
		`{"TO":"","amount":10}`,
		`{"to":"","amount":10} `,
		`{"to":"","amount":10}{}`,
		`{"to":"","amount":"10"}`,
		`{"to":"","amount":1e3}`,
		`{"to":"","amount":10,"amount":11}`,
		`null`,
		``,
	} {
		f.Add(send, []byte(body))
	}
	f.Fuzz(func(t *testing.T, i uint16, body []byte) {
		typ := types[int(i)%len(types)]
		fast, errFast := decodeMsgBody(body, typ)
		strict := newMsg(typ)
		errStrict := decodeStrict(body, strict)
		if (errFast == nil) != (errStrict == nil) {
			t.Fatalf("%s %q: fast path %v, strict decoder %v", typ, body, errFast, errStrict)
		}
		if errFast == nil && !reflect.DeepEqual(fast, strict) {
			t.Fatalf("%s %q: fast path %+v, strict decoder %+v", typ, body, fast, strict)
		}
		if errFast != nil && errFast.Error() != errStrict.Error() {
			t.Fatalf("%s %q: fast path says %q, strict decoder %q", typ, body, errFast, errStrict)
		}
	})
}
